"""The :class:`Recipe`: how ``induce`` trains, parses and scores one model, as data.

A recipe names the model it trains (a registry name), the :class:`~syntaxformer.training.arguments.TrainArguments`
fields of its training, the model config fields it overrides, the text it trains on, the decoder
settings its trees are read with (Algorithm 1's minimum layer and the rest), a one-line ``about`` for
``syntaxformer induce --list-recipes`` and, where its trees need saying, a ``note`` printed with every
report. :meth:`Recipe.check` checks every name and value against the classes that take them; the
package checks every registered recipe when it is imported, so a misspelt field fails at once.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, fields

from syntaxformer.errors import InputError
from syntaxformer.models import PRESETS, REGISTRY, make_config
from syntaxformer.structures import DecoderOptions
from syntaxformer.training.arguments import TrainArguments

#: TrainArguments fields a recipe may not set: the job gives them (``induce``'s options)
JOB_FIELDS = ("out", "model", "overrides", "corpus", "seed", "threads", "device", "quiet", "resume", "prior")


@dataclass(frozen=True)
class Recipe:
    """One named ``induce`` recipe.

    Attributes:
        model: the registry name of the model it trains (``tree-transformer``, ``structformer``, ``on-lstm``).
        train: TrainArguments fields (``preset``, the stop condition, batches, optimiser, schedule,
            masking, vocabulary, ...); not the job's own (:data:`JOB_FIELDS`).
        config: model config fields over the preset's (e.g. ``constituent_variant="official"``).
        corpus: the text it trains on: None = ptb-sample's words; a shipped text (``"ptb-sample,wikitext-2"``)
            or a text the user gives with ``--corpus`` (``"ptb-lm"``: ``induce`` refuses the recipe
            without it).
        min_layer: Algorithm 1's minimum layer (0-based), None = the decoder's default.
        decoder: further :class:`~syntaxformer.structures.DecoderOptions` fields (e.g. the public descend rule).
        about: one line on what the recipe is, for ``--list-recipes``.
        note: what its trees amount to, recorded in ``report.json`` and printed in ``induce``'s header
            (None: nothing to say).
    """

    model: str
    train: dict
    about: str
    config: dict = field(default_factory=dict)
    corpus: str | None = None
    min_layer: int | None = None
    decoder: dict = field(default_factory=dict)
    note: str | None = None

    def with_train(self, about: str | None = None, **changes) -> Recipe:
        """A copy with training fields replaced or added (``corpus=`` sets :attr:`corpus`)."""
        corpus = changes.pop("corpus", self.corpus)
        return Recipe(
            self.model,
            {**self.train, **changes},
            about or self.about,
            dict(self.config),
            corpus,
            self.min_layer,
            dict(self.decoder),
            self.note,
        )

    def fields(self) -> dict:
        """The TrainArguments fields of the training: :attr:`train` and, when named, :attr:`corpus`."""
        return {**self.train, **({} if self.corpus is None else {"corpus": self.corpus})}

    def check(self, name: str) -> None:
        """Check every field against the class that takes it.

        Raises:
            InputError: a model without language-model presets, a job field or a name that is not a
                TrainArguments field, training values TrainArguments refuses, a preset or config field
                the model does not have (or a value its config refuses), an unknown decoder setting or
                a value out of range (a negative minimum layer too).
        """
        where = f"recipe {self.model}/{name}"
        if self.model not in PRESETS:
            raise InputError(f"{where}: {self.model!r} is not a language model of the registry")
        known = {f.name for f in fields(TrainArguments)}
        wrong = sorted(k for k in self.train if k not in known or k in JOB_FIELDS)
        if wrong:
            raise InputError(f"{where}: {', '.join(wrong)} are not recipe fields (TrainArguments, not the job's)")
        args = TrainArguments(out="recipe-check", model=self.model, **self.fields())
        try:
            args.check()
        except InputError as e:
            raise InputError(f"{where}: {e}") from None
        accepted = inspect.signature(REGISTRY[self.model].config_class.__init__).parameters
        unknown = sorted(k for k in self.config if k not in accepted)
        if unknown:
            raise InputError(f"{where}: {', '.join(unknown)} are not {self.model} config fields")
        try:
            make_config(self.model, args.preset, 8, **self.config)
        except ValueError as e:
            raise InputError(f"{where}: {e}") from None
        try:
            DecoderOptions.from_dict({**self.decoder, "min_layer": self.min_layer}).check()
        except InputError as e:
            raise InputError(f"{where}: {e}") from None

    def summary(self) -> str:
        """``preset mini, 6,000 steps, ptb-sample,wikitext-2``: the size, the length and the text."""
        length = [f"{self.train[k]:,} {k.replace('max_', '')}" for k in ("max_steps", "epochs") if self.train.get(k)]
        return ", ".join([f"preset {self.train.get('preset', '?')}", *length, self.corpus or "ptb-sample"])
