"""Recipes as data: typed, checked when the package is imported, listed by ``induce --list-recipes``."""

from __future__ import annotations

import pytest

from syntaxformer.cli import main
from syntaxformer.errors import InputError
from syntaxformer.recipes import RECIPES, Recipe, check_recipes, describe_recipes, get_recipe
from syntaxformer.recipes import tree_transformer as tt_recipes
from syntaxformer.workflows.induce import recipe_decoder, recipe_note, resolve_recipe


def test_every_model_file_holds_model_code_only():
    import syntaxformer.models.on_lstm as on_lstm
    import syntaxformer.models.structformer as structformer
    import syntaxformer.models.tree_transformer as tree_transformer

    for module in (tree_transformer, structformer, on_lstm):
        assert not hasattr(module, "RECIPES"), module.__name__


def test_a_recipe_resolves_to_its_training_config_and_decoder():
    fields, overrides, min_layer = resolve_recipe("tree-transformer", "paper")
    assert fields["max_steps"] == 60000 and fields["corpus"] == "ptb-lm" and fields["lr"] == 1e-4
    assert overrides == {"constituent_variant": "official"} and min_layer == 2
    assert recipe_decoder("tree-transformer", "paper") == {"descend_threshold": 0.7, "threshold": 0.8}
    assert recipe_note("tree-transformer", "paper") is None
    assert "right-branching" in recipe_note("tree-transformer", "default")
    # a recipe without a named text leaves the corpus to the job
    assert "corpus" not in resolve_recipe("tree-transformer", "sample")[0]
    # the user's fields replace the recipe's; None keeps the recipe's
    assert resolve_recipe("structformer", "default", {"lr": 1e-3, "max_steps": None})[0]["max_steps"] == 5400


def test_with_train_copies_and_replaces():
    longer = tt_recipes.SAMPLE.with_train(about="x", max_steps=9, corpus="ptb-lm")
    assert longer.train["max_steps"] == 9 and longer.corpus == "ptb-lm" and longer.about == "x"
    assert tt_recipes.SAMPLE.train["max_steps"] == 7000 and tt_recipes.SAMPLE.corpus is None
    assert longer.config == tt_recipes.SAMPLE.config and longer.config is not tt_recipes.SAMPLE.config


@pytest.mark.parametrize(
    "recipe, message",
    [
        (Recipe("tree-transformer", dict(preset="mini", max_steps=5, lerning_rate=1), "x"), "lerning_rate are not"),
        (Recipe("tree-transformer", dict(preset="mini", max_steps=5, seed=3), "x"), "seed are not recipe fields"),
        (Recipe("tree-transformer", dict(preset="mini", max_steps=5, mask_rate=2.0), "x"), "--mask-rate must be"),
        (Recipe("tree-transformer", dict(preset="mini"), "x"), "stop condition"),
        (Recipe("tree-transformer", dict(preset="huge", max_steps=5), "x"), "unknown preset 'huge'"),
        (Recipe("tree-transformer", dict(preset="mini", max_steps=5), "x", config=dict(n_layers=2)), "n_layers"),
        (
            Recipe("tree-transformer", dict(preset="mini", max_steps=5), "x", config=dict(constituent_variant="z")),
            "constituent_variant",
        ),
        (Recipe("structformer", dict(preset="mini", max_steps=5), "x", decoder=dict(treshold=0.5)), "treshold"),
        (Recipe("structformer", dict(preset="mini", max_steps=5), "x", decoder=dict(threshold=5)), "threshold"),
        (Recipe("tree-transformer", dict(preset="mini", max_steps=5), "x", min_layer=-1), "bad: --min-layer -1"),
        (Recipe("gaussian-transformer", dict(preset="mini", max_steps=5), "x"), "not a language model"),
    ],
)
def test_a_bad_recipe_is_refused_in_one_line_naming_it(recipe, message):
    with pytest.raises(InputError, match=message) as caught:
        check_recipes({recipe.model: {"bad": recipe}})
    assert "\n" not in str(caught.value)


def test_a_recipe_filed_under_another_model_is_refused():
    with pytest.raises(InputError, match="recipe structformer/x trains tree-transformer"):
        check_recipes({"structformer": {"x": tt_recipes.SAMPLE}})


def test_a_new_recipe_is_one_object_and_one_table_entry(monkeypatch, tmp_path, capsys):
    """The documented way to add a recipe: a Recipe in the model's module and its entry in RECIPES."""
    quick = tt_recipes.SAMPLE.with_train(about="four steps", max_steps=4, preset="tiny")
    monkeypatch.setitem(RECIPES["tree-transformer"], "quick", quick)
    check_recipes(RECIPES)
    assert get_recipe("tree-transformer", "quick") is quick
    assert "tree-transformer quick: four steps (preset tiny, 4 steps, ptb-sample)" in describe_recipes()


def test_unknown_recipe_names_those_the_model_has():
    with pytest.raises(InputError, match="--recipe nope: structformer has the recipes default, long, paper"):
        get_recipe("structformer", "nope")


def test_list_recipes_prints_every_recipe_with_its_note(capsys):
    assert main(["induce", "--list-recipes"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if not line.startswith("    note:")]
    assert len(lines) == sum(len(named) for named in RECIPES.values())
    assert "tree-transformer paper: the authors' procedure" in out and "(preset paper, 60,000 steps, ptb-lm)" in out
    assert "    note: a recipe sized for a laptop CPU" in out
