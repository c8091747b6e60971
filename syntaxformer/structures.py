"""Typed structures a model induces over one sentence, each decoding itself (torch-struct's idea:
small objects with documented shapes).

A model that induces structure implements ``induce(input_ids, attention_mask)`` returning, per
sentence of the batch, a list of these objects over its **tokens**; :meth:`to_words` maps them onto
the sentence's words (the tokenizer's ``word_ids``). ``parse``, ``induce``, ``show`` and the learning
curve dispatch on the structure's type, never on a model's name.

* :class:`LinkProbabilities` (Tree Transformer): ``[L, n-1]`` link probabilities per layer;
  decoders: Algorithm 1 (paper §4, with minimum layer and threshold) or one layer's top-down split.
* :class:`SyntacticDistances` (StructFormer, ON-LSTM): ``[n-1]`` distances of the word gaps (``[n]``
  heights; ON-LSTM: ``[L, n-1]`` per layer, one of them the default); decoder: top-down split at the
  largest distance (of one layer, ``--layer``, when there are layers).
* :class:`DependencyDistribution` (StructFormer): ``[n, n+1]`` p(head | dependent), column 0 = root;
  decoders: Chu-Liu-Edmonds (a tree) or the public code's argmax.

All arrays are numpy float64 probabilities (not logs) or distances; spans are half-open word intervals
(ARCHITECTURE.md). Decoder options are :class:`DecoderOptions`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from syntaxformer.data.tokenization import word_links
from syntaxformer.decoding.dependency import argmax_heads, chu_liu_edmonds, head_scores
from syntaxformer.decoding.ensemble import mbr_tree
from syntaxformer.decoding.spans import Span, split_by_distance
from syntaxformer.decoding.tree_transformer import (
    OFFICIAL_DESCEND_THRESHOLD,
    algorithm1,
    resolve_min_layer,
    single_layer,
)
from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DecoderOptions:
    """How structures become trees (``syntaxformer parse`` flags).

    Attributes:
        layer: None = Algorithm 1 over all layers (Tree Transformer paper, Algorithm 1); an int = the
            single-layer top-down greedy split of that layer (0-based; paper Figure 4(b)).
        threshold: Algorithm 1's break threshold (paper: 0.8).
        min_layer: Algorithm 1's minimum layer (0-based), None = the decoder's default.
        descend_threshold: None = the paper; 0.7 = the public code's extra descend rule.
        dependency: "mst" (Chu-Liu-Edmonds, a well-formed tree) or "argmax" (the public StructFormer
            code's rule; need not be a tree).
    """

    layer: int | None = None
    threshold: float = 0.8
    min_layer: int | None = None
    descend_threshold: float | None = None
    dependency: str = "mst"

    def to_dict(self) -> dict:
        """The options as a JSON-ready dict (the fields above; ``decoder.json``, reports)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping, path: str | Path | None = None) -> DecoderOptions:
        """Options from a dict written by :meth:`to_dict` (missing fields take their defaults).

        Raises:
            InputError: a key that is not a field, or a value of the wrong kind (names ``path``).
        """
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise InputError(
                f"unknown decoder setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}", path=path
            )
        options = cls(**values)
        options.check(path)
        return options

    def check(self, path: str | Path | None = None) -> None:
        """Raises InputError when a field has a value of the wrong kind or out of its range (names
        ``path``): thresholds are probabilities in [0, 1] (NaN is not), layers 0-based indices; a layer
        beyond the model's is refused where the model's structures are decoded."""

        def is_int(v) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def is_number(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        checks = (
            ("layer", self.layer is None or is_int(self.layer), "a whole number or null"),
            ("min_layer", self.min_layer is None or is_int(self.min_layer), "a whole number or null"),
            ("threshold", is_number(self.threshold), "a number"),
            (
                "descend_threshold",
                self.descend_threshold is None or is_number(self.descend_threshold),
                "a number or null",
            ),
            ("dependency", self.dependency in DEPENDENCY_DECODERS, " or ".join(DEPENDENCY_DECODERS)),
        )
        problems = [f"{name} {getattr(self, name)!r} (expected {kind})" for name, ok, kind in checks if not ok]
        if problems:
            raise InputError(f"bad decoder setting(s): {'; '.join(problems)}", path=path)
        ranges = (
            ("threshold", self.threshold, 0 <= self.threshold <= 1, "a probability in [0, 1]"),
            ("descend_threshold", self.descend_threshold, self.descend_threshold is None or 0 <= self.descend_threshold <= 1, "a probability in [0, 1]"),
            ("layer", self.layer, self.layer is None or self.layer >= 0, "a 0-based layer index, 0 or more"),
            ("min_layer", self.min_layer, self.min_layer is None or self.min_layer >= 0, "a 0-based layer index, 0 or more"),
        )  # fmt: skip
        problems = [
            f"--{name.replace('_', '-')} {value!r} is out of range ({kind})"
            for name, value, ok, kind in ranges
            if not ok
        ]
        if problems:
            raise InputError("; ".join(problems), path=path)
        if self.layer is not None and self.min_layer is not None:
            raise InputError(
                "a layer (single-layer decoder) and a minimum layer (Algorithm 1) exclude each other", path=path
            )

    def with_choices(self, choices: Mapping | None) -> DecoderOptions:
        """These options with the settings a user chose (command-line flags) put over them.

        Args:
            choices: field -> value for the settings given (absent = keep this object's). Choosing
                ``layer`` (the single-layer decoder) clears ``min_layer`` and choosing ``min_layer``
                (Algorithm 1) clears ``layer``, so a saved decoder of the other kind does not linger.
        Raises:
            InputError: an unknown field, a bad value, or both ``layer`` and ``min_layer`` chosen.
        """
        choices = dict(choices or {})
        if not choices:
            return self
        values = self.to_dict()
        if choices.get("layer") is not None:
            values["min_layer"] = None
        if choices.get("min_layer") is not None:
            values["layer"] = None
        values.update(choices)
        return DecoderOptions.from_dict(values)


#: Dependency decoders of :class:`DependencyDistribution` (``DecoderOptions.dependency``).
DEPENDENCY_DECODERS = ("mst", "argmax")

#: The file beside a model's weights that holds the decoder settings it is parsed with by default
#: (:func:`save_decoder_options`, :func:`saved_decoder_options`).
DECODER_FILE = "decoder.json"


def save_decoder_options(folder: str | Path, options: DecoderOptions) -> Path:
    """Write ``options`` into ``folder/decoder.json``: the settings a model is parsed with by default
    (``induce`` writes the ones it scored the model with; ``parse``, ``show``, ``heads``, ``prune``,
    ``probe`` and :func:`syntaxformer.load_parser` read them back).

    Returns:
        The file written.
    """
    options.check()
    path = Path(folder) / DECODER_FILE
    path.write_text(json.dumps(options.to_dict(), indent=2) + "\n", encoding="utf-8")
    return path


def saved_decoder_options(folder: str | Path) -> tuple[DecoderOptions, str]:
    """The decoder settings a model folder is parsed with by default, and where they came from.

    In order: ``folder/decoder.json`` (:func:`save_decoder_options`); the ``"decoder"`` of the
    ``report.json`` in the folder (the shipped parser) or, for an ``induce`` output's ``model/``
    written before ``decoder.json`` existed, in the folder above it; else the documented defaults
    (:class:`DecoderOptions`: Algorithm 1, threshold 0.8, the decoder's default minimum layer,
    :data:`syntaxformer.decoding.tree_transformer.DEFAULT_MIN_LAYER`). Where they came from is logged.

    Returns:
        ``(options, source)``: ``source`` names the file read, or ``"the defaults"``.
    Raises:
        InputError: an unreadable or invalid ``decoder.json`` or report decoder (names the file).
    """
    folder = Path(folder)
    path = folder / DECODER_FILE
    if path.is_file():
        return DecoderOptions.from_dict(_read_json(path), path), str(path)
    for report in (folder / "report.json", folder.parent / "report.json"):
        if report.is_file() and (report.parent == folder or folder.name == "model"):
            decoder = _read_json(report).get("decoder")
            if isinstance(decoder, dict):
                logger.info("%s has no %s: decoding with the settings of %s", folder, DECODER_FILE, report)
                return DecoderOptions.from_dict(decoder, report), str(report)
    logger.info(
        "%s has no %s: decoding with the documented defaults (%s)", folder, DECODER_FILE, DecoderOptions().to_dict()
    )
    return DecoderOptions(), "the defaults"


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"unreadable JSON: {e}", path=path) from None
    if not isinstance(value, dict):
        raise InputError("expected a JSON object", path=path)
    return value


def _one_token_per_word(word_ids: Sequence[int | None], sentence: int | None, what: str) -> None:
    if any(w is None for w in word_ids) or len(set(word_ids)) != len(word_ids):
        raise InputError(
            f"{what} need one token per word: this tokenizer splits words or adds special tokens", sentence=sentence
        )


@dataclass
class LinkProbabilities:
    """Tree Transformer link probabilities ``a^l_k`` (words k, k+1 in one constituent at layer l).

    Attributes:
        probs: ``[L, n-1]`` float64, layer 0 lowest (after the hierarchical constraint, eq. 8).
    """

    probs: np.ndarray

    @property
    def num_layers(self) -> int:
        """Layers ``L`` of ``probs``."""
        return self.probs.shape[0]

    def to_words(self, word_ids: Sequence[int | None], sentence: int | None = None) -> LinkProbabilities:
        """Token links -> word links (:func:`syntaxformer.data.tokenization.word_links`: a word's inner
        pieces are linked, the links between words are the links between their boundary pieces)."""
        return LinkProbabilities(word_links(torch.as_tensor(self.probs), word_ids).numpy())

    def spans(self, options: DecoderOptions = DecoderOptions()) -> set[Span]:
        """Algorithm 1, or the single-layer split with ``options.layer``.

        Raises:
            InputError: ``--layer`` / ``--min-layer`` out of range (names the flag).
        """
        if options.layer is not None:
            if not -self.num_layers <= options.layer < self.num_layers:
                raise InputError(
                    f"--layer {options.layer} out of range: the model has {self.num_layers} layers (0-based)"
                )
            return single_layer(self.probs[options.layer])
        min_layer_of(options, self.num_layers)
        return algorithm1(
            self.probs,
            threshold=options.threshold,
            min_layer=options.min_layer,
            descend_threshold=options.descend_threshold,
        )

    def decoders(self) -> dict[str, Callable[[], set[Span]]]:
        """Every decoder of the learning curve: Algorithm 1 for each minimum layer m, under the paper's
        rule (``algorithm1_m{m}``) and with the public code's descend rule (``algorithm1_m{m}_descend``,
        0.7), and each layer's single-layer split (``layer{l}``)."""
        found = {}
        for m in range(self.num_layers):
            found[f"algorithm1_m{m}"] = lambda m=m: algorithm1(self.probs, min_layer=m)
            found[f"algorithm1_m{m}_descend"] = lambda m=m: algorithm1(
                self.probs, min_layer=m, descend_threshold=OFFICIAL_DESCEND_THRESHOLD
            )
        found.update({f"layer{l}": (lambda l=l: single_layer(self.probs[l])) for l in range(self.num_layers)})
        return found

    def to_json(self) -> dict:
        """``{"link_probs": [[a^l_k] per layer]}``, probabilities rounded to 6 places."""
        return {"link_probs": [[round(float(x), 6) for x in layer] for layer in self.probs]}


@dataclass
class SyntacticDistances:
    """Syntactic distances of the word gaps (larger = split earlier) and heights of the words.

    A model with distances per layer (ON-LSTM) gives them all in ``layers`` and names the row its
    decoder uses by default in ``layer``; ``distances`` is that row. ``--layer`` then picks another
    row; for a model without layers (StructFormer) it is refused.

    Attributes:
        distances: ``[n-1]`` float64, gap k between words k and k+1 (the default decoder's).
        heights: ``[n]`` float64 syntactic heights, or None.
        layers: ``[L, n-1]`` float64 distances of every layer (layer 0 lowest), or None.
        layer: the row of ``layers`` that ``distances`` is (0-based), or None without layers.
    """

    distances: np.ndarray
    heights: np.ndarray | None = None
    layers: np.ndarray | None = None
    layer: int | None = None

    @classmethod
    def of_layers(cls, layers: np.ndarray, layer: int) -> SyntacticDistances:
        """Distances ``[L, n-1]`` of every layer, ``layer`` (0-based; negative counts from the top)
        the default row."""
        layer = range(layers.shape[0])[layer]
        return cls(layers[layer], layers=layers, layer=layer)

    @property
    def num_layers(self) -> int:
        """Rows of ``layers`` (0 without layers)."""
        return 0 if self.layers is None else self.layers.shape[0]

    def to_words(self, word_ids: Sequence[int | None], sentence: int | None = None) -> SyntacticDistances:
        """Itself: distances come one per word (raises InputError, naming ``sentence``, otherwise)."""
        _one_token_per_word(word_ids, sentence, "syntactic distances")
        return self

    def layer_distances(self, layer: int | None) -> np.ndarray:
        """``[n-1]`` distances of ``layer`` (None: the default ones).

        Raises:
            InputError: a layer for distances without layers, or out of range (names ``--layer``).
        """
        if layer is None:
            return self.distances
        if self.layers is None:
            raise InputError(
                f"--layer {layer}: a Tree Transformer decoder option (one layer of several), but this "
                "model gives one row of syntactic distances (top-down split at the largest)"
            )
        if not -self.num_layers <= layer < self.num_layers:
            raise InputError(f"--layer {layer} out of range: the model has {self.num_layers} layers (0-based)")
        return self.layers[layer]

    def spans(self, options: DecoderOptions = DecoderOptions()) -> set[Span]:
        """Top-down split at the largest distance (leftmost on ties), of ``options.layer`` when given.

        Raises:
            InputError: Tree Transformer decoder options given (never ignored silently); a bad layer.
        """
        given = [
            flag
            for flag, value in (
                ("--min-layer", options.min_layer),
                ("--descend-rule official", options.descend_threshold),
            )
            if value is not None
        ]
        if given:
            raise InputError(
                f"{', '.join(given)}: Tree Transformer decoder option(s) (link probabilities), "
                "but this model gives syntactic distances (top-down split at the largest)"
            )
        return split_by_distance(list(self.layer_distances(options.layer)))

    def decoders(self) -> dict[str, Callable[[], set[Span]]]:
        """The learning curve's decoders: ``distance`` (the default), ``layer{l}`` for every layer."""
        found = {"distance": lambda: split_by_distance(list(self.distances))}
        found.update(
            {f"layer{l}": (lambda l=l: split_by_distance(list(self.layers[l]))) for l in range(self.num_layers)}
        )
        return found

    def to_json(self) -> dict:
        """``distances``, and where present ``heights`` and the per-layer ``layer_distances`` with the
        default row's index ``distance_layer``; values rounded to 6 places."""
        row = {"distances": [round(float(x), 6) for x in self.distances]}
        if self.heights is not None:
            row["heights"] = [round(float(x), 6) for x in self.heights]
        if self.layers is not None:
            row["layer_distances"] = [[round(float(x), 6) for x in layer] for layer in self.layers]
            row["distance_layer"] = self.layer
        return row


@dataclass
class DependencyDistribution:
    """p(head | dependent) over the words and the root.

    Attributes:
        probs: ``[n, n+1]`` float64: row i = dependent word i, column 0 = the root, column j = word j-1.
        heights: ``[n]`` syntactic heights (the argmax decoder's tie rule), or None.
    """

    probs: np.ndarray
    heights: np.ndarray | None = None

    def to_words(self, word_ids: Sequence[int | None], sentence: int | None = None) -> DependencyDistribution:
        """Itself: one row per word (raises InputError, naming ``sentence``, otherwise)."""
        _one_token_per_word(word_ids, sentence, "dependency distributions")
        return self

    def heads(self, options: DecoderOptions = DecoderOptions()) -> list[int]:
        """Heads (1-based, 0 = root) by Chu-Liu-Edmonds or the argmax rule.

        Raises:
            InputError: an unknown ``options.dependency``.
        """
        if options.dependency == "argmax":
            return argmax_heads(self.probs[:, 1:], self.heights)
        if options.dependency != "mst":
            raise InputError(f"unknown dependency decoder {options.dependency!r}: expected mst or argmax")
        return chu_liu_edmonds(head_scores(self.probs[:, 1:], root_probs=self.probs[:, 0]))

    def to_json(self) -> dict:
        """Nothing: the heads are written to CoNLL-U, not to ``structures.json``."""
        return {}


@dataclass
class SpanMarginals:
    """A PCFG's posterior over spans (:mod:`syntaxformer.models.pcfg`): ``p((i, j) in tree | words)``.

    The default decoder is the **max-marginal tree**: the binary tree of largest sum of span marginals
    (the minimum-Bayes-risk tree for the expected number of correct spans), by the ensemble's CKY
    (:func:`~syntaxformer.decoding.ensemble.mbr_tree`: ties at the smallest split point). The model's
    Viterbi tree (its most probable labelled tree, unlabelled) is kept beside it (``viterbi``).

    Attributes:
        marginals: ``[n+1, n+1]`` float64, ``marginals[i, j]`` for spans of two or more words (the whole
            sentence 1), else 0.
        viterbi: the Viterbi tree's spans of two or more words (the whole sentence included), or None.
    """

    marginals: np.ndarray
    viterbi: set | None = None

    def to_words(self, word_ids: Sequence[int | None], sentence: int | None = None) -> SpanMarginals:
        """Itself: the grammar emits one token per word (raises InputError, naming ``sentence``, otherwise)."""
        _one_token_per_word(word_ids, sentence, "span marginals")
        return self

    def spans(self, options: DecoderOptions = DecoderOptions()) -> set[Span]:
        """The max-marginal tree (class docstring).

        Raises:
            InputError: decoder options of another structure (``--layer``, ``--min-layer``, the descend
                rule): never ignored silently.
        """
        given = [
            flag
            for flag, value in (
                ("--layer", options.layer),
                ("--min-layer", options.min_layer),
                ("--descend-rule official", options.descend_threshold),
            )
            if value is not None
        ]
        if given:
            raise InputError(
                f"{', '.join(given)}: decoder option(s) of other models, but this model gives span marginals "
                "(a PCFG: the max-marginal tree)"
            )
        return mbr_tree(self.marginals, keep_unvoted=True)

    def decoders(self) -> dict[str, Callable[[], set[Span]]]:
        """The learning curve's decoders: ``max-marginal`` (the default) and ``viterbi``."""
        found = {"max-marginal": lambda: mbr_tree(self.marginals, keep_unvoted=True)}
        if self.viterbi is not None:
            found["viterbi"] = lambda: set(self.viterbi)
        return found

    def to_json(self) -> dict:
        """``span_marginals`` (``[n+1][n+1]``, rounded to 6 places) and ``viterbi_spans``."""
        row = {"span_marginals": [[round(float(x), 6) for x in r] for r in self.marginals]}
        if self.viterbi is not None:
            row["viterbi_spans"] = sorted([int(i), int(j)] for i, j in self.viterbi)
        return row


CONSTITUENCY = (LinkProbabilities, SyntacticDistances, SpanMarginals)


@dataclass
class Structures:
    """Everything a model induces over the words of one sentence.

    Attributes:
        words: the sentence's words, as given.
        items: the structure objects (one constituency structure; at most one dependency distribution).
    """

    words: list[str]
    items: list = field(default_factory=list)

    @property
    def constituency(self) -> LinkProbabilities | SyntacticDistances | SpanMarginals | None:
        """The constituency structure (link probabilities, syntactic distances or span marginals), or None."""
        return next((s for s in self.items if isinstance(s, CONSTITUENCY)), None)

    @property
    def dependency(self) -> DependencyDistribution | None:
        """The dependency distribution, or None."""
        return next((s for s in self.items if isinstance(s, DependencyDistribution)), None)

    # the arrays, for reading (None where the sentence has no such structure)
    @property
    def link_probs(self) -> np.ndarray | None:
        """``[L, n-1]`` link probabilities, or None."""
        return self.constituency.probs if isinstance(self.constituency, LinkProbabilities) else None

    @property
    def distances(self) -> np.ndarray | None:
        """``[n-1]`` syntactic distances, or None."""
        return self.constituency.distances if isinstance(self.constituency, SyntacticDistances) else None

    @property
    def heights(self) -> np.ndarray | None:
        """``[n]`` syntactic heights, or None."""
        return self.constituency.heights if isinstance(self.constituency, SyntacticDistances) else None

    @property
    def dependency_probs(self) -> np.ndarray | None:
        """``[n, n+1]`` p(head | dependent) (column 0 = root), or None."""
        return None if self.dependency is None else self.dependency.probs

    def spans(self, options: DecoderOptions = DecoderOptions()) -> set[Span]:
        """Constituency spans (half-open, whole sentence included) by the constituency structure."""
        return self.constituency.spans(options)

    def heads(self, options: DecoderOptions = DecoderOptions()) -> list[int] | None:
        """Dependency heads (1-based, 0 = root), or None without a dependency distribution."""
        return None if self.dependency is None else self.dependency.heads(options)

    def to_json(self) -> dict:
        """One ``structures.json`` row: the words and every structure's own fields."""
        row = {"words": self.words}
        for item in self.items:
            row.update(item.to_json())
        return row


def min_layer_of(options: DecoderOptions, num_layers: int) -> int:
    """The 0-based minimum layer Algorithm 1 uses with ``options`` on a model of ``num_layers`` layers
    (:func:`~syntaxformer.decoding.tree_transformer.resolve_min_layer`).

    Raises:
        InputError: ``options.min_layer`` outside ``0 .. num_layers - 1`` (the ``--min-layer`` flag).
    """
    try:
        return resolve_min_layer(num_layers, options.min_layer)
    except ValueError as e:
        raise InputError(f"--min-layer {options.min_layer} out of range: {e}") from None
