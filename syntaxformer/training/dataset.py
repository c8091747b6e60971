"""A training run's data: the corpus split into training and validation sentences, the tokenizer,
and the encoded sentences (:func:`prepare_data` → :class:`TrainingData`)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from syntaxformer.data.corpus import load_corpus
from syntaxformer.data.tokenization import build_word_tokenizer, build_wordpiece_tokenizer, encode
from syntaxformer.errors import InputError
from syntaxformer.training.arguments import TrainArguments

logger = logging.getLogger(__name__)


@dataclass
class TrainingData:
    """The encoded sentences of a run and what ``training.json`` reports about them.

    Attributes:
        tokenizer: the run's tokenizer (a ``transformers`` fast tokenizer).
        train_ids, valid_ids: token ids per sequence (sentences over ``max_length`` already split
            or dropped).
        train_sentences, valid_sentences: sentences read before encoding.
        train_over, valid_over: sentences that had more than ``max_length`` tokens.
        valid_desc: where the validation sentences come from, in words.
        train_heads, valid_heads: with ``--trees``, per sequence its tree over its tokens (0-based
            head positions, -1 root, -100 special token; :func:`syntaxformer.data.trees.token_heads`),
            parallel to ``train_ids`` / ``valid_ids``; None without trees.
        trees: the ``--trees`` value, or None.
    """
    tokenizer: object
    train_ids: list[list[int]]
    valid_ids: list[list[int]]
    train_sentences: int
    valid_sentences: int
    train_over: int
    valid_over: int
    valid_desc: str
    train_heads: list[list[int]] | None = None
    valid_heads: list[list[int]] | None = None
    trees: str | None = None

    def structure_inputs(self, heads: list[list[int]] | None, indices: list[int]) -> dict | None:
        """The model's ``structure_inputs`` for the sequences ``indices`` of ``heads`` (``train_heads``
        or ``valid_heads``): ``{"heads": (B, N) long}``, padded with -100; None without trees."""
        if heads is None:
            return None
        from syntaxformer.data.trees import pad_heads
        return {"heads": pad_heads([heads[i] for i in indices])}

    @property
    def special_ids(self) -> list[int]:
        """Token ids masking never selects: padding, ``[CLS]`` and ``[MASK]`` (sorted)."""
        t = self.tokenizer
        return sorted({i for i in (t.pad_token_id, t.cls_token_id, t.mask_token_id) if i is not None})

    def record(self, args: TrainArguments) -> dict:
        """The ``data`` section of ``training.json``."""
        return dict(corpus=args.corpus, valid=self.valid_desc,
                    train_sentences=self.train_sentences, train_sequences=len(self.train_ids),
                    train_tokens=sum(map(len, self.train_ids)), valid_sentences=self.valid_sentences,
                    valid_sequences=len(self.valid_ids), max_length=args.max_length,
                    overflow=args.overflow, train_over_max_length=self.train_over,
                    valid_over_max_length=self.valid_over, trees=self.trees)


def prepare_data(args: TrainArguments, saved_tokenizer: Path | None = None) -> TrainingData:
    """Read the corpus, hold out the validation sentences, build (or load) the tokenizer, encode.

    The validation sentences are the ``valid`` corpus if given, else ``valid_fraction`` of the corpus
    chosen by a permutation with the fixed seed 0 (the same for every ``--seed``), excluded from
    training. The tokenizer is loaded from ``saved_tokenizer`` (a resumed run's OUT) when that
    folder holds a ``tokenizer.json``, else built from the training sentences (``args.tokenizer``).

    Raises:
        InputError: an unreadable or empty corpus, or no training sentence left after encoding.
    """
    if args.trees is not None:
        return _prepare_tree_data(args, saved_tokenizer)
    sentences = load_corpus(args.corpus)
    if not sentences:
        raise InputError("the training corpus has no sentence", path=args.corpus)
    if args.valid is not None:
        train_sents, valid_sents = sentences, load_corpus(args.valid)
        valid_desc = args.valid
    else:
        held = held_out_indices(len(sentences), args.valid_fraction)
        train_sents = [s for i, s in enumerate(sentences) if i not in held]
        valid_sents = [s for i, s in enumerate(sentences) if i in held]
        valid_desc = f"{args.valid_fraction} of {args.corpus} (seed-0 permutation)"
    if saved_tokenizer is not None and (saved_tokenizer / "tokenizer.json").is_file():
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(saved_tokenizer)
    else:
        tokenizer = _build_tokenizer(args, train_sents)
    train_ids, train_over = _encode_counted(tokenizer, train_sents, args.max_length, args.overflow)
    valid_ids, valid_over = _encode_counted(tokenizer, valid_sents, args.max_length, args.overflow)
    if not train_ids:
        raise InputError("no training sentence left after encoding", path=args.corpus)
    logger.info("training: %d sentences (%d tokens), validation: %d sentences, vocabulary %d",
                len(train_ids), sum(map(len, train_ids)), len(valid_ids), len(tokenizer))
    return TrainingData(tokenizer, train_ids, valid_ids, len(train_sents), len(valid_sents),
                        train_over, valid_over, valid_desc)


def _prepare_tree_data(args: TrainArguments, saved_tokenizer: Path | None) -> TrainingData:
    """:func:`prepare_data` with a tree per sentence (``args.trees``, :mod:`syntaxformer.data.trees`):
    the same validation rule and tokenizer; sentences over ``max_length`` tokens are dropped whatever
    ``overflow`` says (a tree cannot be split; counted), and each kept sequence gets its token heads."""
    from syntaxformer.data.trees import load_tree_corpus
    sentences, trees = load_tree_corpus(args.trees, args.corpus)
    if not sentences:
        raise InputError("the training corpus has no sentence", path=args.corpus)
    if args.valid is not None:
        train, (valid_sents, valid_trees) = (sentences, trees), load_tree_corpus(args.trees, args.valid)
        valid, valid_desc = (valid_sents, valid_trees), args.valid
    else:
        held = held_out_indices(len(sentences), args.valid_fraction)
        train = ([s for i, s in enumerate(sentences) if i not in held], [t for i, t in enumerate(trees) if i not in held])
        valid = ([s for i, s in enumerate(sentences) if i in held], [t for i, t in enumerate(trees) if i in held])
        valid_desc = f"{args.valid_fraction} of {args.corpus} (seed-0 permutation)"
    if saved_tokenizer is not None and (saved_tokenizer / "tokenizer.json").is_file():
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(saved_tokenizer)
    else:
        tokenizer = _build_tokenizer(args, train[0])
    train_ids, train_heads, train_over = _encode_trees(tokenizer, *train, args.max_length)
    valid_ids, valid_heads, valid_over = _encode_trees(tokenizer, *valid, args.max_length)
    if not train_ids:
        raise InputError("no training sentence left after encoding", path=args.corpus)
    logger.info("training with %s trees: %d sentences (%d tokens), validation: %d sentences, vocabulary %d",
                args.trees, len(train_ids), sum(map(len, train_ids)), len(valid_ids), len(tokenizer))
    return TrainingData(tokenizer, train_ids, valid_ids, len(train[0]), len(valid[0]), train_over, valid_over,
                        valid_desc, train_heads, valid_heads, args.trees)


def _encode_trees(tokenizer, sentences, trees, max_length: int):
    """Encode sentences with trees: ``(ids, token heads, number over max_length)``; the sentences over
    ``max_length`` tokens are dropped (logged)."""
    from syntaxformer.data.trees import token_heads
    ids, word_ids = encode(tokenizer, sentences)
    kept = [i for i, x in enumerate(ids) if len(x) <= max_length]
    over = len(ids) - len(kept)
    if over:
        logger.warning("dropped %d of %d sentences longer than %d tokens (a tree cannot be split)", over,
                       len(ids), max_length)
    return [ids[i] for i in kept], [token_heads(trees[i], word_ids[i]) for i in kept], over


def held_out_indices(n: int, fraction: float) -> set[int]:
    """The indices of the validation slice: the first ``round(fraction·n)`` of a seed-0 permutation."""
    k = round(fraction * n)
    if fraction > 0 and n > 1:
        k = max(1, min(k, n - 1))
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    return set(perm[:k].tolist())


def _encode_counted(tokenizer, sentences, max_length: int, overflow: str):
    """:func:`encode` for training: returns ``(ids, number of sentences over max_length)``; those
    are split (``overflow="split"``; their pieces go after the other sentences) or dropped
    (``"skip"``); :func:`encode` logs the count."""
    ids, _ = encode(tokenizer, sentences)
    over = [i for i, x in enumerate(ids) if len(x) > max_length]
    if not over:
        return ids, 0
    long = set(over)
    kept = [x for i, x in enumerate(ids) if i not in long]
    extra, _ = encode(tokenizer, [sentences[i] for i in over], max_length, overflow)
    return kept + extra, len(over)


def _build_tokenizer(args: TrainArguments, sentences):
    if args.tokenizer == "word":
        return build_word_tokenizer(sentences, min_freq=max(1, args.min_freq), max_vocab=args.max_vocab,
                                    add_cls=args.add_cls)
    if args.tokenizer == "wordpiece":
        return build_wordpiece_tokenizer(sentences, vocab_size=args.wordpiece_vocab_size,
                                         min_freq=max(1, args.min_freq), add_cls=args.add_cls)
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(args.tokenizer)


__all__ = ["TrainingData", "prepare_data"]
