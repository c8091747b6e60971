"""Where a per-sentence structure comes from: the value of ``--trees`` and ``--phrases`` (``train``,
``perplexity``, ``probe`` and their Python functions).

* ``gold``: the corpus's own trees (a dependency source for ``--trees``, :mod:`syntaxformer.data.trees`;
  a treebank for ``--phrases``, :mod:`syntaxformer.data.phrases`);
* ``induced:MODEL_DIR``: the trees a trained model in ``MODEL_DIR`` induces for the sentences
  (:mod:`syntaxformer.sources.induced`).

:meth:`StructureSource.parse` reads and checks such a value once, at the command line or at the entry
of a function that accepts a string; everything after asks the value (:attr:`~StructureSource.is_induced`,
:attr:`~StructureSource.model_dir`). A :class:`StructureSource` *is* its string (a ``str`` subclass),
so reports keep the text they always had (``"gold"``, ``"induced:/path"``); a copy or a pickle of it
is the plain ``str`` (``dataclasses.asdict``, which writes ``training.json`` and a checkpoint's
options, gives the same bytes as before; a checkpoint loads without this class). Parse again where a
value is needed (:meth:`StructureSource.parse` is idempotent).
"""

from __future__ import annotations

from syntaxformer.errors import InputError

#: the value naming the corpus's own trees
GOLD = "gold"
#: the prefix of a value naming a model folder that induces the trees
INDUCED = "induced:"


class StructureSource(str):
    """A checked ``--trees`` / ``--phrases`` value: ``"gold"`` or ``"induced:MODEL_DIR"`` (module docstring).

    Args:
        value: the option's text.
        option: the option it was given as (``"--trees"`` or ``"--phrases"``), named in the error.
    Raises:
        InputError (one line): any other text, e.g. ``"--trees must be gold or induced:MODEL_DIR, got 'silver'"``.
    """

    def __new__(cls, value: str, option: str = "--trees") -> StructureSource:
        if not isinstance(value, str) or not (
            value == GOLD or (value.startswith(INDUCED) and len(value) > len(INDUCED))
        ):
            raise InputError(f"{option} must be gold or induced:MODEL_DIR, got {value!r}")
        return super().__new__(cls, value)

    @classmethod
    def parse(cls, value: str | StructureSource | None, option: str = "--trees") -> StructureSource | None:
        """``value`` as a :class:`StructureSource`: None stays None, a parsed value is returned as it is,
        a string is checked (:class:`StructureSource`'s ``InputError``, naming ``option``)."""
        if value is None or isinstance(value, StructureSource):
            return value
        return cls(value, option)

    @property
    def is_induced(self) -> bool:
        """Whether a model induces the structure (``induced:MODEL_DIR``)."""
        return self.startswith(INDUCED)

    @property
    def is_gold(self) -> bool:
        """Whether the structure is the corpus's own (``gold``)."""
        return not self.is_induced

    @property
    def kind(self) -> str:
        """``"gold"`` or ``"induced"``."""
        return "induced" if self.is_induced else GOLD

    @property
    def model_dir(self) -> str | None:
        """The folder of the model that induces the structure (``induced:MODEL_DIR``); None for gold."""
        return self[len(INDUCED) :] if self.is_induced else None

    def __reduce__(self):
        """Copies and pickles are the plain string: ``dataclasses.asdict(args)`` (``training.json``, a
        checkpoint's ``args``) gives the bytes it gave before this type existed, and loads without it."""
        return (str, (str(self),))


__all__ = ["GOLD", "INDUCED", "StructureSource"]
