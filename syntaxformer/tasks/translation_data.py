"""The data of the translation task: encoded sentence pairs, the source trees, the batches.

* The joint subword vocabulary (:func:`~syntaxformer.data.parallel.build_subwords`) wrapped for
  ``transformers`` (:func:`wrap_subwords`: saved with the model as ``tokenizer.json``).
* :class:`EncodedPairs`: per pair the source pieces followed by ``</s>``, the 0-based word of each
  piece (None for ``</s>``), the target pieces, and the source's structure (``structure_inputs``
  over the source's pieces) when the model's encoder reads one.
* Source trees (:func:`source_structures`): from one of the project's own parsers, over exactly the
  words the encoder sees (the tokenised source, punctuation included: a punctuation token attaches
  to the root word, as :meth:`~syntaxformer.parser.TreeParser.parse_tokens` gives it; one model's heads
  by Chu-Liu-Edmonds, so they form a tree), computed once
  per file and parser and cached as JSON (``CACHE/<sha1 of the words>-<parser>-<its fingerprint>-<kind>.json``:
  :func:`~syntaxformer.parser.parser_fingerprint`, so a parser changed under its name is parsed again). Each
  piece takes its word's structure: its word's head (a later piece of a word points to the word's
  first piece, :func:`~syntaxformer.data.trees.token_heads`) or its word's phrase
  (:func:`~syntaxformer.data.phrases.token_phrase_ids`).
* :class:`TranslationBatch`: a padded batch (sources, decoder inputs ``<s> y``, labels ``y </s>``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerFast

from syntaxformer.data.batching import pad_rows
from syntaxformer.data.parallel import SPECIALS, encode_words
from syntaxformer.data.phrases import NO_PHRASE, cut_tree, token_phrase_ids, word_phrase_ids
from syntaxformer.data.trees import NO_TREE, token_heads
from syntaxformer.errors import InputError
from syntaxformer.models.translation import BOS, EOS, PAD
from syntaxformer.parser import load_parser, names_an_ensemble, parser_fingerprint
from syntaxformer.training.batch import Batch

logger = logging.getLogger(__name__)

#: the parser that gives each kind of source structure by default (the shipped parsers)
DEFAULT_PARSERS = {"heads": "structformer-ptb-lm", "phrase_ids": "ensemble-ptb-lm"}
#: padding of each structure over pieces
STRUCTURE_PADDING = {"heads": NO_TREE, "phrase_ids": NO_PHRASE}


def wrap_subwords(tokenizer) -> PreTrainedTokenizerFast:
    """The ``tokenizers`` BPE vocabulary as a ``transformers`` tokenizer (saved with the model)."""
    pad, bos, eos, unk = SPECIALS
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=pad,
        bos_token=bos,
        eos_token=eos,
        unk_token=unk,
        clean_up_tokenization_spaces=False,
    )


def _cache_file(cache: Path, words: Sequence[Sequence[str]], parser: str, kind: str) -> Path:
    digest = hashlib.sha1("\n".join(" ".join(w) for w in words).encode("utf-8")).hexdigest()[:16]
    return cache / f"{digest}-{parser.replace('/', '_')}-{parser_fingerprint(parser)}-{kind}.json"


def source_structures(
    words: Sequence[Sequence[str]],
    kind: str,
    parser: str | None = None,
    cache: str | Path | None = None,
    level: int = 1,
) -> list[list[int]]:
    """Per sentence, its words' structure from a parser (module docstring).

    Args:
        words: the tokenised sentences (what the encoder sees, before subwords).
        kind: ``"heads"`` (per word its 1-based head, 0 = root) or ``"phrase_ids"`` (per word its
            0-based phrase, the tree cut at ``level``: :func:`~syntaxformer.data.phrases.cut_tree`).
        parser: a parser :func:`~syntaxformer.parser.load_parser` loads (default: :data:`DEFAULT_PARSERS`).
        cache: a folder for the cached result (None: no cache).
    Raises:
        InputError: from the parser (an unknown name; a parser without dependency heads for ``heads``).
        ValueError: an unknown ``kind``.
    """
    if kind not in DEFAULT_PARSERS:
        raise ValueError(f"unknown structure {kind!r}; expected one of {sorted(DEFAULT_PARSERS)}")
    parser = parser or DEFAULT_PARSERS[kind]
    path = None if cache is None else _cache_file(Path(cache), words, parser, f"{kind}-mst-{level}")
    if path is not None and path.is_file():
        return json.loads(path.read_text())
    logger.info("parsing %d source sentences with %s (%s)", len(words), parser, kind)
    trees, heads, _ = _parser(parser, kind).parse_tokens([list(w) for w in words])
    if kind == "heads":
        if heads is None:
            raise InputError(f"--parser {parser}: it induces no dependency heads (structformer-ptb-lm does)")
        result = [list(h) for h in heads]
    else:
        result = [word_phrase_ids(cut_tree(tree, level)) for tree in trees]
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result))
    return result


@lru_cache(maxsize=4)
def _parser(name: str, kind: str):
    """The parser ``name`` (loaded once per process); for heads one model decodes a well-formed tree
    (Chu-Liu-Edmonds, the decoder setting ``dependency="mst"``: the structural positions need a tree), an
    ensemble votes one."""
    options = {"dependency": "mst"} if kind == "heads" and not names_an_ensemble(name) else None
    return load_parser(name, options=options)


def piece_structure(kind: str, word_values: Sequence[int], word_ids: Sequence[int | None]) -> list[int]:
    """A sentence's structure over its pieces: each piece takes its word's (module docstring)."""
    if kind == "heads":
        return token_heads(word_values, word_ids)
    return token_phrase_ids(word_values, word_ids)


@dataclass
class EncodedPairs:
    """Encoded sentence pairs (module docstring): ``source`` and ``target`` piece ids per pair
    (``source`` ends with ``</s>``), ``structures`` the source's structure over its pieces (or None)."""

    source: list[list[int]]
    target: list[list[int]]
    structures: list[list[int]] | None = None
    kind: str | None = None

    def __len__(self) -> int:
        return len(self.source)


def encode_pairs(
    tokenizer: PreTrainedTokenizerFast,
    source_words: Sequence[Sequence[str]],
    target_words: Sequence[Sequence[str]] | None,
    kind: str | None = None,
    word_structures: Sequence[Sequence[int]] | None = None,
) -> EncodedPairs:
    """Encode tokenised sentences (and their sources' word structures) into pieces (module docstring)."""
    backend = tokenizer.backend_tokenizer
    source, structures = [], [] if kind else None
    for s, words in enumerate(source_words):
        ids, word_ids = encode_words(backend, words)
        source.append(ids + [EOS])
        if kind:
            structures.append(piece_structure(kind, word_structures[s], word_ids + [None]))
    target = [encode_words(backend, words)[0] for words in target_words] if target_words is not None else []
    return EncodedPairs(source, target, structures, kind)


@dataclass
class TranslationBatch(Batch):
    """A padded batch: ``input_ids``, ``attention_mask`` (B, N); ``decoder_input_ids`` (B, T) ``<s> y``;
    ``labels`` (B, T) ``y </s>``, -100 at padding; ``structure_inputs`` ``{kind: (B, N)}`` or None."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    decoder_input_ids: torch.Tensor | None = None
    labels: torch.Tensor | None = None
    structure_inputs: dict | None = None

    @property
    def n_tokens(self) -> int:
        """Target tokens (the labels that count)."""
        return int((self.labels != -100).sum())

    @property
    def features(self) -> dict:
        """The model's keyword arguments."""
        return self.values()


def make_batch(pairs: EncodedPairs, indices: Sequence[int], with_targets: bool = True) -> TranslationBatch:
    """The :class:`TranslationBatch` of ``pairs[indices]`` (no randomness)."""
    sources = [pairs.source[i] for i in indices]
    input_ids = pad_rows(sources, PAD)
    attention_mask = (input_ids != PAD).long()
    structure_inputs = None
    if pairs.structures is not None:
        rows = [pairs.structures[i] for i in indices]
        structure_inputs = {pairs.kind: pad_rows(rows, STRUCTURE_PADDING[pairs.kind])}
    if not with_targets:
        return TranslationBatch(input_ids, attention_mask, structure_inputs=structure_inputs)
    targets = [pairs.target[i] for i in indices]
    decoder_input_ids = pad_rows([[BOS] + t for t in targets], PAD)
    labels = pad_rows([t + [EOS] for t in targets], -100)
    return TranslationBatch(input_ids, attention_mask, decoder_input_ids, labels, structure_inputs)


__all__ = [
    "DEFAULT_PARSERS",
    "wrap_subwords",
    "source_structures",
    "piece_structure",
    "EncodedPairs",
    "encode_pairs",
    "TranslationBatch",
    "make_batch",
]
