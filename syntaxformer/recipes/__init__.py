"""Named ``induce`` recipes, as data: one module per model (:class:`Recipe` objects), one table here.

``RECIPES[model][name]`` is a :class:`Recipe`; every recipe is checked (:meth:`Recipe.check`) when this
package is imported. A new recipe is a :class:`Recipe` in its model's module and an entry in that
module's ``RECIPES``; a new model's recipes are a module and one line in :data:`RECIPES`.
"""

from __future__ import annotations

from syntaxformer.errors import InputError
from syntaxformer.recipes import on_lstm, pcfg, structformer, tree_transformer
from syntaxformer.recipes.recipe import JOB_FIELDS, Recipe

#: ``{model: {recipe name: Recipe}}`` for every model ``induce`` trains
RECIPES: dict[str, dict[str, Recipe]] = {
    tree_transformer.MODEL: tree_transformer.RECIPES,
    structformer.MODEL: structformer.RECIPES,
    on_lstm.MODEL: on_lstm.RECIPES,
    pcfg.NEURAL: pcfg.RECIPES_NEURAL,
    pcfg.COMPOUND: pcfg.RECIPES_COMPOUND,
}


def check_recipes(recipes: dict[str, dict[str, Recipe]]) -> None:
    """Check every recipe of ``recipes`` (:meth:`Recipe.check`); a recipe filed under another model's
    name is refused.

    Raises:
        InputError: the first bad recipe, named ``model/name``.
    """
    for model, named in recipes.items():
        for name, recipe in named.items():
            if recipe.model != model:
                raise InputError(f"recipe {model}/{name} trains {recipe.model}")
            recipe.check(name)


def get_recipe(model: str, name: str) -> Recipe:
    """The recipe ``name`` of ``model``.

    Raises:
        InputError: a model without recipes, or a recipe it does not have (names those it has).
    """
    if name not in RECIPES.get(model, {}):
        raise InputError(f"--recipe {name}: {model} has the recipes {', '.join(RECIPES.get(model, {}))}")
    return RECIPES[model][name]


def describe_recipes() -> str:
    """Every recipe, one line each (model, name, size, length, text, what it is), its note below it."""
    lines = []
    for model, named in RECIPES.items():
        for name, recipe in named.items():
            lines.append(f"{model} {name}: {recipe.about} ({recipe.summary()})")
            if recipe.note:
                lines.append(f"    note: {recipe.note}")
    return "\n".join(lines)


check_recipes(RECIPES)

__all__ = ["JOB_FIELDS", "RECIPES", "Recipe", "check_recipes", "describe_recipes", "get_recipe"]
