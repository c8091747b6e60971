"""A training run's data: the corpus split into training and validation sentences, the tokenizer,
and the encoded sentences (:func:`prepare_data` → :class:`TrainingData`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

from transformers import AutoTokenizer

from syntaxformer.data import phrases as ph
from syntaxformer.data.corpus import exclude_treebank, held_out_indices, load_corpus
from syntaxformer.data.phrases import NO_LABEL, NO_PHRASE, pad_phrases
from syntaxformer.data.tokenization import build_word_tokenizer, build_wordpiece_tokenizer, encode
from syntaxformer.data.trees import pad_heads, token_heads
from syntaxformer.errors import InputError
from syntaxformer.priors import structure_reader
from syntaxformer.sources.checks import tree_level
from syntaxformer.sources.corpus import load_structured_corpus
from syntaxformer.training.arguments import DataArguments, TrainArguments

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
        train_phrases, valid_phrases: with ``--phrases``, per sequence its token phrase ids (-1 special
            token; :func:`syntaxformer.data.phrases.token_phrase_ids`), parallel to the ids; else None.
        train_phrase_labels, valid_phrase_labels: per sequence, per phrase its label index in
            ``phrase_label_names`` (when the reading prior asks for labels, gold trees only); else None.
        phrases: the ``--phrases`` value, or None; tree_level: the level the trees were cut at.
        phrase_label_names: the phrase-label vocabulary (training labels sorted, then ``other``), or None.
        excluded: with ``--exclude-treebank``, how many sentences of the text it removed; else None.
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
    train_phrases: list[list[int]] | None = None
    valid_phrases: list[list[int]] | None = None
    train_phrase_labels: list[list[int]] | None = None
    valid_phrase_labels: list[list[int]] | None = None
    phrases: str | None = None
    tree_level: int | None = None
    phrase_label_names: list[str] | None = None
    excluded: int | None = None

    def structure_inputs(self, split: str, indices: list[int]) -> dict | None:
        """The model's ``structure_inputs`` for the sequences ``indices`` of ``split`` (``"train"`` or
        ``"valid"``), padded to the batch's longest sequence: ``"heads"`` (B, N) long (-100 padding)
        with ``--trees``; ``"phrase_ids"`` (B, N) long (-1 padding) and, with labels,
        ``"phrase_labels"`` (B, P) long (-100 padding) with ``--phrases``; None with neither."""
        out = {}
        heads, phrase_ids, labels = (getattr(self, f"{split}_{k}") for k in ("heads", "phrases", "phrase_labels"))
        if heads is not None:
            out["heads"] = pad_heads([heads[i] for i in indices])
        if phrase_ids is not None:
            out["phrase_ids"] = pad_phrases([phrase_ids[i] for i in indices], NO_PHRASE)
        if labels is not None:
            out["phrase_labels"] = pad_phrases([labels[i] for i in indices], NO_LABEL)
        return out or None

    @property
    def has_structure(self) -> bool:
        """Whether the sequences carry per-sentence structure (``--trees`` or ``--phrases``)."""
        return self.train_heads is not None or self.train_phrases is not None

    def model_overrides(self, args: TrainArguments) -> TrainArguments:
        """``args`` with the overrides the reading prior derives from the phrase-label vocabulary (its
        ``with_phrase_labels``: the number of labels; with phrase labels; ``args`` itself otherwise,
        and with ``init_from``, whose config is the folder's).

        Raises:
            InputError: an override that contradicts the vocabulary (the prior's message).
        """
        if not self.phrase_label_names:
            return args
        overrides = structure_reader(args._prior_config()).with_phrase_labels(args.overrides, self.phrase_label_names)
        if args.init_from is not None:
            return args
        return replace(args, overrides=overrides)

    @property
    def special_ids(self) -> list[int]:
        """Token ids masking never selects: padding, ``[CLS]`` and ``[MASK]`` (sorted)."""
        t = self.tokenizer
        return sorted({i for i in (t.pad_token_id, t.cls_token_id, t.mask_token_id) if i is not None})

    @staticmethod
    def _induced(args: TrainArguments) -> bool:
        return any(s is not None and s.is_induced for s in (args.trees, args.phrases))

    def record(self, args: TrainArguments) -> dict:
        """The ``data`` section of ``training.json``."""
        return dict(
            corpus=args.corpus,
            valid=self.valid_desc,
            train_sentences=self.train_sentences,
            train_sequences=len(self.train_ids),
            train_tokens=sum(map(len, self.train_ids)),
            valid_sentences=self.valid_sentences,
            valid_sequences=len(self.valid_ids),
            max_length=args.max_length,
            overflow=args.overflow,
            train_over_max_length=self.train_over,
            valid_over_max_length=self.valid_over,
            trees=self.trees,
            phrases=self.phrases,
            **(
                {"exclude_treebank": args.exclude_treebank, "excluded_sentences": self.excluded}
                if args.exclude_treebank
                else {}
            ),
            **({"induced_from": args.induced_from} if self._induced(args) else {}),
            **({"tree_level": self.tree_level} if self.phrases is not None else {}),
            **({"phrase_labels": self.phrase_label_names} if self.phrase_label_names else {}),
        )


def prepare_data(args: TrainArguments, saved_tokenizer: Path | None = None) -> TrainingData:
    """Read the corpus, hold out the validation sentences, build (or load) the tokenizer, encode.

    The validation sentences are the ``valid`` corpus if given, else ``valid_fraction`` of the corpus
    chosen by a permutation with the fixed seed 0 (the same for every ``--seed``), excluded from
    training. The tokenizer is loaded from ``saved_tokenizer`` (a resumed run's OUT) when that
    folder holds a ``tokenizer.json``, else built from the training sentences (``args.tokenizer``).

    Raises:
        InputError: an unreadable or empty corpus, or no training sentence left after encoding.
    """
    if args.trees is not None or args.phrases is not None:
        return _prepare_tree_data(args, saved_tokenizer)
    sentences = load_corpus(args.corpus)
    excluded = None
    if args.exclude_treebank is not None:
        sentences, excluded = exclude_treebank(sentences, args.exclude_treebank)
    if not sentences:
        raise InputError("the training corpus has no sentence", path=args.corpus)
    if args.valid is not None:
        train_sents, valid_sents, valid_desc = sentences, load_corpus(args.valid), args.valid
    else:
        train_sents, valid_sents, valid_desc = held_out_split(sentences, args)
    tokenizer = _tokenizer(args, saved_tokenizer, train_sents)
    train_ids, train_over = _encode_counted(tokenizer, train_sents, args)
    valid_ids, valid_over = _encode_counted(tokenizer, valid_sents, args)
    if not train_ids:
        raise InputError("no training sentence left after encoding", path=args.corpus)
    logger.info(
        "training: %d sentences (%d tokens), validation: %d sentences, vocabulary %d",
        len(train_ids),
        sum(map(len, train_ids)),
        len(valid_ids),
        len(tokenizer),
    )
    return TrainingData(
        tokenizer,
        train_ids,
        valid_ids,
        len(train_sents),
        len(valid_sents),
        train_over,
        valid_over,
        valid_desc,
        excluded=excluded,
    )


def _load_structured(args: TrainArguments, corpus: str):
    """``(sentences, word heads or None, constituency trees or None)`` of ``corpus`` for ``--trees`` /
    ``--phrases``: the sentences come from the dependency source (``--trees gold``), else the treebank
    (``--phrases gold``), else :func:`load_corpus`; each structure is read or induced for them."""
    return load_structured_corpus(corpus, args.trees, args.phrases)


def _prepare_tree_data(args: TrainArguments, saved_tokenizer: Path | None) -> TrainingData:
    """:func:`prepare_data` with a tree per sentence (``args.trees``, :mod:`syntaxformer.data.trees`;
    ``args.phrases``, :mod:`syntaxformer.data.phrases`): the same validation rule and tokenizer;
    sentences over ``max_length`` tokens are dropped whatever ``overflow`` says (a tree cannot be split;
    counted), and each kept sequence gets its token heads and / or token phrase ids (and labels)."""
    if args.exclude_treebank is not None:
        raise InputError("--exclude-treebank filters plain training text: not with --trees or --phrases")
    sentences, heads, trees = _load_structured(args, args.corpus)
    if not sentences:
        raise InputError("the training corpus has no sentence", path=args.corpus)
    rows = list(zip(sentences, heads or [None] * len(sentences), trees or [None] * len(sentences)))
    if args.valid is not None:
        train, valid, valid_desc = rows, list(zip(*_fill(_load_structured(args, args.valid)))), args.valid
    else:
        train, valid, valid_desc = held_out_split(rows, args)
    tokenizer = _tokenizer(args, saved_tokenizer, [r[0] for r in train])
    train_enc = _encode_trees(tokenizer, train, args.max_length)
    valid_enc = _encode_trees(tokenizer, valid, args.max_length)
    if not train_enc["ids"]:
        raise InputError("no training sentence left after encoding", path=args.corpus)
    logger.info(
        "training with %s: %d sentences (%d tokens), validation: %d sentences, vocabulary %d",
        " and ".join(f"{k} {v}" for k, v in (("--trees", args.trees), ("--phrases", args.phrases)) if v),
        len(train_enc["ids"]),
        sum(map(len, train_enc["ids"])),
        len(valid_enc["ids"]),
        len(tokenizer),
    )
    data = TrainingData(
        tokenizer,
        train_enc["ids"],
        valid_enc["ids"],
        len(train),
        len(valid),
        train_enc["over"],
        valid_enc["over"],
        valid_desc,
        train_enc["heads"],
        valid_enc["heads"],
        args.trees,
    )
    if trees is not None:
        _add_phrases(data, args, train_enc["words"], valid_enc["words"], [r[2] for r in train], [r[2] for r in valid])
    return data


def _fill(loaded):
    """``(sentences, heads, trees)`` with None structures as lists of None, for zipping."""
    sentences, heads, trees = loaded
    none = [None] * len(sentences)
    return sentences, heads or none, trees or none


def _add_phrases(data: TrainingData, args: TrainArguments, train_words, valid_words, train_trees, valid_trees) -> None:
    """Cut the kept sentences' trees at the reading prior's ``tree_level`` into token phrase ids (and,
    when the prior gives a phrase-label vocabulary, ``phrase_label_vocabulary``: the training
    sentences' labels or a ``--model`` folder's, the phrase labels);
    ``train_words`` / ``valid_words``: per kept sequence, its sentence index and token word ids."""
    config = args._prior_config()
    reader = structure_reader(config)
    level = tree_level(config)
    cut = {
        "train": [(ph.cut_tree(train_trees[i], level), w) for i, w in train_words],
        "valid": [(ph.cut_tree(valid_trees[i], level), w) for i, w in valid_words],
    }
    data.phrases, data.tree_level = args.phrases, level
    data.train_phrases, data.valid_phrases = (
        [ph.token_phrase_ids(ph.word_phrase_ids(p), w) for p, w in cut[k]] for k in ("train", "valid")
    )
    labels = reader.phrase_label_vocabulary(config, [p for p, _ in cut["train"]]) if reader is not None else None
    if labels is not None:
        data.phrase_label_names = labels
        data.train_phrase_labels, data.valid_phrase_labels = (
            [ph.phrase_label_ids(p, data.phrase_label_names) for p, _ in cut[k]] for k in ("train", "valid")
        )
    n_phrases = sum(len(p) for p, _ in cut["train"])
    logger.info(
        "phrases (%s) cut at level %d: %d phrases in training%s",
        args.phrases,
        level,
        n_phrases,
        f", {len(data.phrase_label_names)} phrase labels" if data.phrase_label_names else "",
    )


def _encode_trees(tokenizer, rows, max_length: int) -> dict:
    """Encode ``rows`` (sentence, word heads or None, tree or None): ``ids``, token ``heads`` (None
    without heads), ``words`` (per kept sequence: its row index and token word ids) and ``over`` (the
    number of rows over ``max_length`` tokens, dropped and logged)."""
    ids, word_ids = encode(tokenizer, [r[0] for r in rows]) if rows else ([], [])
    kept = [i for i, x in enumerate(ids) if len(x) <= max_length]
    over = len(ids) - len(kept)
    if over:
        logger.warning(
            "dropped %d of %d sentences longer than %d tokens (a tree cannot be split)", over, len(ids), max_length
        )
    has_heads = bool(rows) and rows[0][1] is not None
    return dict(
        ids=[ids[i] for i in kept],
        over=over,
        words=[(i, word_ids[i]) for i in kept],
        heads=[token_heads(rows[i][1], word_ids[i]) for i in kept] if has_heads else None,
    )


def _encode_counted(tokenizer, sentences, args: DataArguments):
    """:func:`encode` for training: returns ``(ids, number of sentences over max_length)``; those
    are split (``overflow="split"``; their pieces go after the other sentences), dropped
    (``"skip"``) or cut to their first ``max_length`` tokens (``"cut"``, in place); :func:`encode` logs
    the count. Sentences over ``max_sentence_length`` tokens are dropped first (logged, not counted)."""
    max_length, overflow = args.max_length, args.overflow
    ids, _ = encode(tokenizer, sentences)
    if args.max_sentence_length is not None:
        kept = [i for i, x in enumerate(ids) if len(x) <= args.max_sentence_length]
        if len(kept) < len(ids):
            logger.warning(
                "dropped %d sentences of more than %d tokens", len(ids) - len(kept), args.max_sentence_length
            )
        ids, sentences = [ids[i] for i in kept], [sentences[i] for i in kept]
    if overflow == "cut":  # in place, order kept (the public Tree Transformer code's 60 input positions)
        over = sum(len(x) > max_length for x in ids)
        if over:
            logger.warning("cut %d of %d sentences to their first %d tokens", over, len(ids), max_length)
        return [x[:max_length] for x in ids], over
    over = [i for i, x in enumerate(ids) if len(x) > max_length]
    if not over:
        return ids, 0
    long = set(over)
    kept = [x for i, x in enumerate(ids) if i not in long]
    extra, _ = encode(tokenizer, [sentences[i] for i in over], max_length, overflow)
    return kept + extra, len(over)


def held_out_split(items: list, args: DataArguments) -> tuple[list, list, str]:
    """``(training items, validation items, description)``: the validation slice is
    :func:`held_out_indices` ``(len(items), args.valid_fraction)``, the rest trains (order kept)."""
    held = held_out_indices(len(items), args.valid_fraction)
    return (
        [x for i, x in enumerate(items) if i not in held],
        [x for i, x in enumerate(items) if i in held],
        f"{args.valid_fraction} of {args.corpus} (seed-0 permutation)",
    )


def _tokenizer(args: DataArguments, saved_tokenizer, sentences):
    """The tokenizer saved in ``saved_tokenizer`` (a resumed run), else one built on ``sentences``."""
    if saved_tokenizer is not None and (saved_tokenizer / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(saved_tokenizer)
    return _build_tokenizer(args, sentences)


def _build_tokenizer(args: TrainArguments, sentences):
    if args.tokenizer == "word":
        return build_word_tokenizer(
            sentences, min_freq=max(1, args.min_freq), max_vocab=args.max_vocab, add_cls=args.add_cls
        )
    if args.tokenizer == "wordpiece":
        return build_wordpiece_tokenizer(
            sentences, vocab_size=args.wordpiece_vocab_size, min_freq=max(1, args.min_freq), add_cls=args.add_cls
        )
    return AutoTokenizer.from_pretrained(args.tokenizer)


__all__ = ["TrainingData", "prepare_data"]
