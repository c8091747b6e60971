"""syntaxformer as a spaCy pipeline component: the constituents (and, from a model that induces them,
the dependency heads) of each sentence of a spaCy ``Doc``, exposed as benepar, the Berkeley Neural
Parser, exposes its parses (its ``integrations/spacy_extensions.py``: the same extension names and
meanings).

    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("syntaxformer", config={"model": "tree-transformer-ptb-lm"})
    sentence = next(nlp("The old man sat on the bench. Dogs bark.").sents)
    sentence._.parse_string  # '(S (X (X (X The) (X old) (X man)) (X sat)) ... (X .))'

**Registration.** ``@Language.factory("syntaxformer")`` below. spaCy imports this module through the
``spacy_factories`` entry point of syntaxformer's package metadata (``pyproject.toml``) when it builds a
pipeline, so ``nlp.add_pipe("syntaxformer")`` works once syntaxformer is installed; ``import
syntaxformer`` after spaCy, or importing this module, registers it too. spaCy is optional (``pip install
"syntaxformer[spacy]"``): the package imports this module only when spaCy is already imported.

**Tokens.** spaCy's tokens are the parser's tokens, one sentence per span of ``doc.sents`` (a sentence
splitter runs first: ``sentencizer``, or a spaCy parser), parsed by
:meth:`syntaxformer.parser.Parser.parse_tokens`. As there, punctuation tokens
(:func:`~syntaxformer.parser.is_punctuation`) are not shown to the model, and neither are whitespace
tokens (``token.is_space``: a second space, a line break), which count as punctuation; both are put
back in the tree (between two words into the smallest constituent containing both, at either end into
the root). So every token is in its sentence's tree and every constituent is a spaCy span. A sentence
with no word (only punctuation or whitespace, e.g. the line break after the last sentence, which the
sentencizer makes a sentence of) gets the flat tree: its root over its tokens.

**Extensions** (benepar's names and meanings; a constituent is a spaCy ``Span``):

- ``Span._.parse_string``: the bracketed tree of a constituent, in the field's form
  (:mod:`syntaxformer.decoding.spans`: root ``S``, constituents ``X``, a preterminal ``X`` over each
  token; ``(`` and ``)`` written ``-LRB-`` and ``-RRB-``, a whitespace token ``_SP``). A sentence's is
  ``to_bracketed`` of the parser's tree of its tokens (``Parser.parse_sents``).
- ``Span._.labels``: its labels, a tuple: ``("S",)`` for a sentence, ``("X",)`` for a constituent inside
  it, ``()`` for a single token (its preterminal is no label, as benepar's part-of-speech tags are not).
- ``Span._.constituents``: the constituent and every constituent inside it, in pre-order (a span before
  the spans it contains, left to right), single tokens included.
- ``Span._.children``: its immediate constituents, left to right (single tokens included).
- ``Span._.parent``: the smallest constituent strictly containing it; None for a sentence.
- ``Token._.labels``, ``Token._.parse_string``, ``Token._.parent``: those of the token's one-token span.

A span that is not a constituent raises :class:`NonConstituentError`; any of them on a ``Doc`` the
component has not processed raises ValueError. The parse is stored on the ``Doc``
(``doc._.syntaxformer_constituents``: ``(start, end, labels)`` of every constituent, pre-order, token
offsets of the ``Doc``), so it is saved with it (``Doc.to_bytes``, ``DocBin`` with user data).

**Dependency heads** (a model that induces them, StructFormer): ``Token._.syntaxformer_head`` is each
token's head (a ``Token``; a sentence's root is its own head, spaCy's convention; None for a model
without heads), punctuation and whitespace attached to the root word as
:meth:`~syntaxformer.parser.Parser.parse_dependencies` does. With ``set_heads`` (the default) they are
also spaCy's own ``token.head`` and ``token.dep_`` (``ROOT``, ``punct`` for punctuation and whitespace,
``dep`` otherwise), so ``displacy`` and spaCy's tree attributes see them; each sentence keeps its one
root, so ``doc.sents`` are unchanged. A ``Doc`` that already holds a dependency parse (a spaCy parser
before this component) is refused rather than overwritten: pass ``set_heads=False`` to keep it and read
the induced heads from ``Token._.syntaxformer_head`` only.
"""

import bisect
from collections.abc import Iterable, Iterator
from typing import Any, Optional

import numpy
from nltk import Tree

try:
    from spacy.attrs import DEP, HEAD
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token
    from spacy.util import minibatch
except ImportError as error:  # spaCy is an optional dependency
    raise ImportError(f"the spaCy component needs spaCy: pip install 'syntaxformer[spacy]' ({error})") from error

from syntaxformer.decoding.spans import PRETERMINAL, escape_word, labelled_spans, with_preterminals
from syntaxformer.parser import Parser, is_punctuation, load_parser

#: The name of the pipeline component (``nlp.add_pipe("syntaxformer")``).
FACTORY = "syntaxformer"

#: How a whitespace token is written in ``parse_string`` (spaCy's tag of whitespace tokens).
SPACE_LEAF = "_SP"

#: What the parser is given for a whitespace token: a symbol, so it is treated as punctuation.
_SPACE_FOR_PARSER = "\u2423"

#: A constituent: ``(start, end, labels)``, token offsets of the ``Doc``, half-open.
Constituent = tuple[int, int, tuple[str, ...]]


class NonConstituentError(ValueError):
    """A span asked for its constituency data is not a constituent (benepar's ``NonConstituentException``)."""


# ----------------------------------------------------------------------------------------- reading


def _constituents(doc: Doc) -> list:
    """The parse stored on ``doc`` (module docstring).

    Raises:
        ValueError: the component has not processed ``doc``.
    """
    data = doc._.syntaxformer_constituents
    if data is None:
        raise ValueError(f"this Doc has no constituency parse: add the {FACTORY!r} component to the pipeline")
    return data


def _position(span: Span) -> int:
    """The index of ``span`` in its ``Doc``'s constituents.

    Raises:
        NonConstituentError: ``span`` is not a constituent; ValueError: as :func:`_constituents`.
    """
    data = _constituents(span.doc)
    key = (span.start, -span.end)
    position = bisect.bisect_left(data, key, key=lambda c: (c[0], -c[1]))
    if position == len(data) or (data[position][0], data[position][1]) != (span.start, span.end):
        raise NonConstituentError(f"span {span.start}:{span.end} ({span.text!r:.60}) is not a constituent")
    return position


def span_labels(span: Span) -> tuple[str, ...]:
    """``Span._.labels`` (module docstring). Raises: NonConstituentError, ValueError (:func:`_position`)."""
    return tuple(_constituents(span.doc)[_position(span)][2])


def span_constituents(span: Span) -> Iterator[Span]:
    """``Span._.constituents``: ``span`` and the constituents inside it, pre-order (module docstring).

    Raises:
        NonConstituentError, ValueError: as :func:`_position` (when iteration starts).
    """
    data, position = _constituents(span.doc), _position(span)
    while position < len(data) and data[position][0] < span.end:
        yield span.doc[data[position][0] : data[position][1]]
        position += 1


def span_children(span: Span) -> Iterator[Span]:
    """``Span._.children``: the immediate constituents of ``span``, left to right.

    Raises:
        NonConstituentError, ValueError: as :func:`_position` (when iteration starts).
    """
    data, position = _constituents(span.doc), _position(span) + 1
    expected = span.start
    while position < len(data) and data[position][0] < span.end:
        start, end = data[position][0], data[position][1]
        if start == expected:  # the next child; the constituents between are inside the previous one
            yield span.doc[start:end]
            expected = end
        position += 1


def span_parent(span: Span) -> Optional[Span]:
    """``Span._.parent``: the smallest constituent strictly containing ``span``; None for a sentence.

    Raises:
        NonConstituentError, ValueError: as :func:`_position`.
    """
    data, position = _constituents(span.doc), _position(span)
    sentence = span.sent
    if (span.start, span.end) == (sentence.start, sentence.end):
        return None
    for start, end, _ in reversed(data[:position]):  # pre-order: the nearest container is the parent
        if start <= span.start and span.end <= end:
            return span.doc[start:end]
    raise AssertionError("a constituent inside a sentence lies inside the sentence's root")


def span_parse_string(span: Span) -> str:
    """``Span._.parse_string``: the bracketed tree of the constituent ``span`` (module docstring).

    Raises:
        NonConstituentError, ValueError: as :func:`_position`.
    """
    return _bracketed(span.doc, _constituents(span.doc), _position(span))[0]


def _bracketed(doc: Doc, data: list, position: int) -> tuple[str, int]:
    """The bracketed tree of constituent ``position`` and the position after its last descendant."""
    start, end, labels = data[position][0], data[position][1], tuple(data[position][2])
    following = position + 1
    if end - start == 1:
        token = doc[start]
        text = SPACE_LEAF if token.is_space else escape_word(token.text)
        labels = labels or (PRETERMINAL,)  # the innermost label is the token's preterminal
    else:
        parts = []
        while following < len(data) and data[following][0] < end:
            part, following = _bracketed(doc, data, following)
            parts.append(part)
        text = " ".join(parts)
    for label in reversed(labels):
        text = f"({label} {text})"
    return text, following


def _token_span(token: Token) -> Span:
    return token.doc[token.i : token.i + 1]


def token_head(token: Token) -> Optional[Token]:
    """``Token._.syntaxformer_head``: the induced head (module docstring), or None for a model without
    heads. Raises: ValueError: as :func:`_constituents`."""
    _constituents(token.doc)
    heads = token.doc._.syntaxformer_heads
    return None if heads is None else token.doc[heads[token.i]]


#: The extensions, by class: name -> getter (module docstring).
EXTENSIONS = {
    Span: {
        "parse_string": span_parse_string,
        "labels": span_labels,
        "constituents": span_constituents,
        "children": span_children,
        "parent": span_parent,
    },
    Token: {
        "parse_string": lambda token: span_parse_string(_token_span(token)),
        "labels": lambda token: span_labels(_token_span(token)),
        "parent": lambda token: span_parent(_token_span(token)),
        "syntaxformer_head": token_head,
    },
}


def install_extensions() -> None:
    """Register the ``Doc`` data and the ``Span`` / ``Token`` extensions with spaCy (idempotent).

    Raises:
        ValueError: another package (benepar) holds one of the names with its own getter.
    """
    for name in ("syntaxformer_constituents", "syntaxformer_heads"):
        if not Doc.has_extension(name):
            Doc.set_extension(name, default=None)
    for cls, getters in EXTENSIONS.items():
        for name, getter in getters.items():
            if cls.has_extension(name) and cls.get_extension(name)[2] is not getter:
                raise ValueError(
                    f"{cls.__name__}._.{name} is already set by another package (benepar?): "
                    f"a pipeline cannot hold both its extensions and {FACTORY!r}'s"
                )
            cls.set_extension(name, getter=getter, force=True)


# ----------------------------------------------------------------------------------------- writing


def tree_constituents(tree: Tree, offset: int = 0) -> list[Constituent]:
    """The constituents of one sentence's tree in the field's form (module docstring), pre-order.

    Args:
        tree: the tree over the sentence's tokens (every token under its preterminal, or ``(S token)``).
        offset: the sentence's first token in the ``Doc``.
    Returns:
        ``(start + offset, end + offset, labels)`` per distinct span (a unary chain's labels outer
        first); a single token's innermost label, its preterminal, is dropped, except for a one-token
        sentence, whose root label stays.
    """
    labels: dict[tuple[int, int], list[str]] = {}
    for start, end, label in labelled_spans(tree):
        labels.setdefault((start, end), []).append(label)
    whole = (0, len(tree.leaves()))
    return [
        (start + offset, end + offset, tuple(names[:-1] if end - start == 1 and (start, end) != whole else names))
        for (start, end), names in labels.items()
    ]


class SyntaxformerComponent:
    """The pipeline component (module docstring): parses every sentence of each ``Doc`` it is given.

    Args:
        parser: a :class:`~syntaxformer.parser.Parser` or :class:`~syntaxformer.parser.EnsembleParser` (:func:`~syntaxformer.parser.load_parser`).
        name: the component's name in the pipeline.
        set_heads: write a dependency model's heads into spaCy's ``token.head`` / ``token.dep_`` too.
    """

    def __init__(self, parser: Parser, name: str = FACTORY, set_heads: bool = True):
        install_extensions()
        self.parser, self.name, self.set_heads = parser, name, set_heads
        self.gives_heads = parser.gives_dependencies

    def __call__(self, doc: Doc) -> Doc:
        """Parse ``doc``'s sentences; returns ``doc``. Raises: as :meth:`annotate`."""
        self.annotate([doc])
        return doc

    def pipe(self, docs: Iterable[Doc], batch_size: int = 128) -> Iterator[Doc]:
        """Parse a stream of ``Doc``s, the sentences of ``batch_size`` of them in one call of the parser
        (which runs the model on ``Parser.batch_size`` sentences at a time). Raises: as :meth:`annotate`."""
        for batch in minibatch(docs, size=batch_size):
            self.annotate(batch)
            yield from batch

    def annotate(self, docs: list[Doc]) -> None:
        """Parse every sentence of ``docs`` and store the constituents (and heads) on each ``Doc``.

        Raises:
            ValueError: a ``Doc`` without sentence boundaries (no sentence splitter before this component),
                or, with ``set_heads`` and a model that induces heads, one that already has a dependency
                parse.
        """
        for doc in docs:
            if not doc.has_annotation("SENT_START"):
                raise ValueError(f"{self.name!r} parses sentences: add a 'sentencizer' (or a parser) before it")
            if self.set_heads and self.gives_heads and doc.has_annotation("DEP"):
                raise ValueError(
                    f"this Doc already has dependency heads: give {self.name!r} the setting set_heads=False "
                    "to keep them (the induced ones are then in Token._.syntaxformer_head)"
                )
        sentences = [sentence for doc in docs for sentence in doc.sents]
        trees, heads = self._parse(sentences)
        for doc in docs:
            doc._.syntaxformer_constituents, doc._.syntaxformer_heads = [], [] if self.gives_heads else None
        for sentence, tree, sentence_heads in zip(sentences, trees, heads):
            doc = sentence.doc
            doc._.syntaxformer_constituents += tree_constituents(tree, sentence.start)
            if self.gives_heads:
                doc._.syntaxformer_heads += [sentence.start + (h - 1 if h else i) for i, h in enumerate(sentence_heads)]
        if self.set_heads and self.gives_heads:
            for doc in docs:
                _set_spacy_heads(doc)

    def _parse(self, sentences: list[Span]) -> tuple[list[Tree], list]:
        """Per sentence its tree in the field's form and its 1-based heads (0 = root; None without a
        dependency model); a sentence with no word gets the flat tree, its first token the root."""
        tokens = [[_SPACE_FOR_PARSER if t.is_space else t.text for t in sentence] for sentence in sentences]
        with_words = [k for k, sentence in enumerate(tokens) if not all(is_punctuation(t) for t in sentence)]
        parsed, parsed_heads = [], None
        if with_words:
            parsed, parsed_heads, _ = self.parser.parse_tokens([tokens[k] for k in with_words])
        trees = [with_preterminals(Tree("S", [t.text for t in sentence])) for sentence in sentences]
        heads = [[0] + [1] * (len(sentence) - 1) for sentence in sentences]
        for number, k in enumerate(with_words):
            trees[k] = parsed[number]
            if parsed_heads is not None:
                heads[k] = parsed_heads[number]
        return trees, heads


def _set_spacy_heads(doc: Doc) -> None:
    """Write ``doc._.syntaxformer_heads`` into spaCy's heads and dependency labels (module docstring)."""
    heads = doc._.syntaxformer_heads
    labels = [
        "ROOT" if h == i else ("punct" if doc[i].is_space or is_punctuation(doc[i].text) else "dep")
        for i, h in enumerate(heads)
    ]
    rows = [[h - i, doc.vocab.strings.add(label)] for i, (h, label) in enumerate(zip(heads, labels))]
    doc.from_array([HEAD, DEP], numpy.array(rows, dtype="int64").astype("uint64"))  # HEAD: relative offsets


@Language.factory(
    FACTORY,
    default_config={"model": None, "options": None, "device": "cpu", "batch_size": 64, "set_heads": True},
    assigns=["doc._.syntaxformer_constituents", "doc._.syntaxformer_heads", "token.head", "token.dep"],
    requires=["token.is_sent_start"],
)
def make_component(
    nlp: Language,
    name: str,
    model: Optional[str],
    options: Optional[dict[str, Any]],
    device: str,
    batch_size: int,
    set_heads: bool,
) -> SyntaxformerComponent:
    """The ``"syntaxformer"`` factory: ``nlp.add_pipe("syntaxformer", config={...})``.

    Args:
        nlp: the pipeline (spaCy passes it).
        name: the component's name (spaCy passes it).
        model: a shipped parser's name (``tree-transformer-ptb-lm``, ``structformer-ptb-lm``, ...) or a
            model folder; None = the default shipped parser (:func:`~syntaxformer.parser.load_parser`);
            an ensemble: names or folders joined by ``,``, a shipped ensemble's name
            (``ensemble-ptb-lm``) or an ensemble folder.
        options: decoder settings over the model's saved ones (e.g. ``{"threshold": 0.7}``), or None.
        device: ``"cpu"``, ``"cuda"``, ...
        batch_size: sentences per forward pass.
        set_heads: write a dependency model's heads into spaCy's ``token.head`` (module docstring).
    Returns:
        the component.
    Raises:
        InputError: as :func:`~syntaxformer.parser.load_parser`; ValueError: an extension name held
            by another package (:func:`install_extensions`).
    """
    parser = load_parser(model, options, device=device, batch_size=batch_size)
    return SyntaxformerComponent(parser, name=name, set_heads=set_heads)


__all__ = [
    "FACTORY",
    "SPACE_LEAF",
    "EXTENSIONS",
    "NonConstituentError",
    "SyntaxformerComponent",
    "install_extensions",
    "make_component",
    "tree_constituents",
]
