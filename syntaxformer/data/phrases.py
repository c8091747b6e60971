"""A phrase partition per training sentence, cut from a constituency tree, for the ``"tree"`` heads
of the multi-granularity prior (``train --phrases``; DESIGN.md §3.3, Hao et al., EMNLP 2019).

``--phrases`` takes

* ``gold``: the gold constituency trees of the treebank ``--corpus`` names (``ptb-sample``,
  ``ptb-sample:dev`` / ``:test``, a ``.mrg`` / bracketed file, a folder or glob), read by
  :func:`~syntaxformer.data.preprocess.load_gold_trees` with the preprocessing
  :func:`~syntaxformer.data.corpus.load_corpus` applies (:data:`~syntaxformer.data.preprocess.PRPN`),
  so the sentences are the usual training words (``--corpus ptb-sample --phrases gold`` trains on the
  same words as ``--corpus ptb-sample``). With ``--trees gold`` as well, the sentences come from the
  dependency source and each gold constituency tree must have the same words.
* ``induced:MODEL_DIR``: the trees a trained Tree Transformer or StructFormer induces for the
  sentences, decoded as ``syntaxformer parse`` decodes them by default
  (:func:`syntaxformer.parsing.model_structures` and :func:`~syntaxformer.parsing.decode` with the
  default :class:`~syntaxformer.structures.DecoderOptions`), computed once before training.

Each tree is cut at ``config.mgsa_tree_level`` (default 1) by
:func:`~syntaxformer.priors.multi_granularity.tree_phrases`. :func:`token_phrase_ids` maps the
per-word phrase ids onto the model's tokens: every piece of a word has its word's phrase, special
tokens (``[CLS]``) and padding have :data:`NO_PHRASE` (-1). Phrase labels (for
``mgsa_phrase_loss_weight > 0``, gold trees only) are the outer label of each phrase's constituent
(``S+VP`` -> ``S``; a single-word phrase has its POS tag), indexed in a fixed vocabulary
(:func:`label_vocabulary`: the labels seen in the training sentences, sorted, then :data:`OTHER` for
any label not seen there); padding slots are -100.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)

#: token phrase id of special tokens and padding (the prior's convention)
NO_PHRASE = -1
#: phrase-label target of padding slots (ignored by the loss)
NO_LABEL = -100
#: the label of a phrase whose label the vocabulary lacks (or that has none)
OTHER = "other"

#: a phrase: ``(start, end, label)``, a half-open word span and its label (None: unlabelled)
Phrase = tuple[int, int, "str | None"]


def check_tree_words(tree, words: Sequence[str], path: str | None, sentence: int) -> None:
    """Raise :class:`InputError` naming ``path`` and the 1-based ``sentence`` unless the leaves of
    ``tree`` (an ``nltk.Tree``) are exactly ``words``."""
    leaves = list(tree.leaves())
    if leaves != list(words):
        diff = next((i for i, (a, b) in enumerate(zip(leaves, words)) if a != b), min(len(leaves), len(words)))
        raise InputError(f"the constituency tree's words do not match the sentence ({len(leaves)} vs "
                         f"{len(words)} words, first difference at word {diff + 1}: "
                         f"{leaves[diff] if diff < len(leaves) else None!r} vs "
                         f"{words[diff] if diff < len(words) else None!r})", path=path, sentence=sentence)


def gold_phrase_trees(source: str, sentences: Sequence[Sequence[str]] | None = None
                      ) -> tuple[list[list[str]], list]:
    """The sentences (normalised words) and preprocessed gold trees of the treebank ``source``.

    Args:
        source: ``ptb-sample``, ``ptb-sample:dev`` / ``:test``, a bracketed file, folder or glob.
        sentences: the sentences read elsewhere (``--trees gold``); each tree must then have the
            words of the sentence at the same position, and the counts must agree.
    Raises:
        InputError: as :func:`~syntaxformer.data.preprocess.load_gold_trees`; a different number of
            sentences; a tree whose words differ from its sentence (naming ``source`` and the sentence).
    """
    from syntaxformer.data.preprocess import load_gold_trees
    trees = list(load_gold_trees(source))
    if sentences is None:
        return [list(t.leaves()) for t in trees], trees
    if len(trees) != len(sentences):
        raise InputError(f"--phrases gold: the treebank has {len(trees)} sentences, the --trees source "
                         f"{len(sentences)}", path=source)
    for number, (tree, words) in enumerate(zip(trees, sentences), start=1):
        check_tree_words(tree, words, source, number)
    return [list(s) for s in sentences], trees


def induced_phrase_trees(model_dir: str, sentences: Sequence[Sequence[str]], batch_size: int = 64,
                         masked: Sequence[int | None] | None = None) -> list:
    """The trees (``nltk.Tree``, leaves = the words) a trained model induces for ``sentences``
    (normalised words), decoded with the model's own decoder settings as ``parse`` does
    (:func:`syntaxformer.parsing.resolve_decoder_options`: its ``decoder.json``, else the defaults); once, in
    evaluation mode on the CPU. ``masked``: per sentence, the 0-based word the model sees as ``[MASK]``
    (or None), as :func:`syntaxformer.parsing.model_structures` takes it; the tree keeps every word.

    Raises:
        InputError: not a model folder, a model that induces no structure, or a tree whose words do
            not match its sentence (naming ``model_dir`` and the 1-based sentence).
    """
    from syntaxformer.parsing import load_model, resolve_decoder_options
    model, tokenizer, _ = load_model(model_dir, device="cpu")
    trees = model_phrase_trees(model, tokenizer, sentences, batch_size, masked, source=model_dir,
                               options=resolve_decoder_options(model_dir))
    logger.info("induced the constituency trees of %d sentences with %s", len(trees), model_dir)
    return trees


def model_phrase_trees(model, tokenizer, sentences: Sequence[Sequence[str]], batch_size: int = 64,
                       masked: Sequence[int | None] | None = None, source: str | None = None,
                       options=None) -> list:
    """:func:`induced_phrase_trees` with a loaded ``model`` (evaluation mode) and its ``tokenizer``;
    ``source`` names the model in errors; ``options``: the
    :class:`~syntaxformer.structures.DecoderOptions` (None = the defaults).

    Raises:
        InputError: as :func:`induced_phrase_trees`.
    """
    from syntaxformer.parsing import DecoderOptions, decode, model_structures
    structures = model_structures(model, tokenizer, sentences, batch_size=batch_size, normalise=False,
                                  masked=masked)
    trees, _ = decode(structures, options or DecoderOptions())
    for number, (tree, words) in enumerate(zip(trees, sentences), start=1):
        check_tree_words(tree, words, source, number)
    return trees


def load_phrase_trees(phrases: str, corpus: str, sentences: Sequence[Sequence[str]] | None = None
                      ) -> tuple[list[list[str]], list]:
    """Sentences and a constituency tree per sentence for ``--phrases`` and ``--corpus``.

    Args:
        phrases: ``"gold"`` or ``"induced:MODEL_DIR"``.
        corpus: the ``--corpus`` (or ``--valid``) spec.
        sentences: sentences already read (with ``--trees gold``), or None: gold reads the treebank's
            words, induced reads :func:`~syntaxformer.data.corpus.load_corpus`.
    Raises:
        InputError: an unknown form, or as :func:`gold_phrase_trees` / :func:`induced_phrase_trees`.
    """
    if phrases == "gold":
        return gold_phrase_trees(corpus, sentences)
    if phrases.startswith("induced:") and phrases[len("induced:"):]:
        if sentences is None:
            from syntaxformer.data.corpus import load_corpus
            sentences = load_corpus(corpus)
        sentences = [list(s) for s in sentences]
        return sentences, induced_phrase_trees(phrases[len("induced:"):], sentences)
    raise InputError(f"--phrases must be gold or induced:MODEL_DIR, got {phrases!r}")


def cut_tree(tree, level: int) -> list[Phrase]:
    """The phrases of ``tree`` at ``level`` (:func:`~syntaxformer.priors.multi_granularity.tree_phrases`),
    each label reduced to its outer part (``S+VP`` -> ``S``)."""
    from syntaxformer.priors.multi_granularity import tree_phrases
    return [(i, j, None if label is None else label.split("+")[0])
            for i, j, label in tree_phrases(tree, level)]


def word_phrase_ids(phrases: Sequence[Phrase]) -> list[int]:
    """Per word, the 0-based index of its phrase (``phrases`` cover the words in order)."""
    ids: list[int] = []
    for p, (i, j, _) in enumerate(phrases):
        ids += [p] * (j - i)
    return ids


def token_phrase_ids(word_phrases: Sequence[int], word_ids: Sequence[int | None]) -> list[int]:
    """Map per-word phrase ids onto tokens.

    Args:
        word_phrases: n phrase ids of the n words (:func:`word_phrase_ids`).
        word_ids: per token, its 0-based word or None (special token), as
            :func:`~syntaxformer.data.tokenization.encode` returns them.
    Returns:
        Per token, its word's phrase id (a word's pieces share it), :data:`NO_PHRASE` for special tokens.
    """
    return [NO_PHRASE if w is None else word_phrases[w] for w in word_ids]


def label_vocabulary(sentences_phrases: Sequence[Sequence[Phrase]]) -> list[str]:
    """The phrase labels seen in ``sentences_phrases`` (the training sentences), sorted, then :data:`OTHER`."""
    seen = {label for phrases in sentences_phrases for _, _, label in phrases if label is not None}
    seen.discard(OTHER)
    return sorted(seen) + [OTHER]


def phrase_label_ids(phrases: Sequence[Phrase], vocabulary: Sequence[str]) -> list[int]:
    """Per phrase, the index of its label in ``vocabulary`` (:data:`OTHER`'s for an unseen or missing label)."""
    index = {label: k for k, label in enumerate(vocabulary)}
    return [index.get(label, index[OTHER]) for _, _, label in phrases]


def pad_phrases(rows: Sequence[Sequence[int]], value: int = NO_PHRASE, length: int | None = None) -> torch.Tensor:
    """Right-pad per-sentence lists into a (B, N) long tensor with ``value`` (N = the longest, or
    ``length``): token phrase ids (pad :data:`NO_PHRASE`) or phrase labels (pad :data:`NO_LABEL`)."""
    from syntaxformer.data.batching import pad_rows
    return pad_rows(rows, value, length)


def tree_level(config: dict) -> int:
    """The level ``--phrases`` cuts trees at: ``mgsa_tree_level`` of ``config`` (the run's overrides, or
    a fine-tuned folder's ``config.json``), else the prior's default (1)."""
    from syntaxformer.priors.multi_granularity import MultiGranularityPrior
    return int(config.get("mgsa_tree_level", MultiGranularityPrior.config_defaults["mgsa_tree_level"]))


def check_phrases_option(phrases: str | None) -> None:
    """Raise :class:`InputError` (one line) unless ``phrases`` is None, ``gold`` or ``induced:MODEL_DIR``."""
    if phrases is not None and not (phrases == "gold" or (phrases.startswith("induced:") and len(phrases) > 8)):
        raise InputError(f"--phrases must be gold or induced:MODEL_DIR, got {phrases!r}")


def model_reads_phrases(model) -> bool:
    """Whether ``model`` reads a phrase partition per sentence: its config's ``prior`` is
    ``multi-granularity`` with at least one ``"tree"`` head (``mgsa_granularities``)."""
    from syntaxformer.priors.multi_granularity import parse_granularities
    config = getattr(model, "config", None)
    return (getattr(config, "prior", None) == "multi-granularity"
            and "tree" in parse_granularities(getattr(config, "mgsa_granularities", None),
                                              config.num_attention_heads))


def model_tree_level(model) -> int:
    """The level the evaluation cuts trees at for ``model``: its config's ``mgsa_tree_level`` (:func:`tree_level`)."""
    return tree_level(model.config.to_dict())


def check_model_phrases(model, phrases: str | None) -> None:
    """The evaluation commands' rule (``perplexity``, ``probe``): ``--phrases`` is required exactly when
    the model reads phrases (:func:`model_reads_phrases`). Checked before any work.

    Raises:
        InputError (one line): a model with ``tree`` heads without ``phrases``; ``phrases`` for a model
            without ``tree`` heads; a bad ``phrases`` value.
    """
    check_phrases_option(phrases)
    reads = model_reads_phrases(model)
    if reads and phrases is None:
        raise InputError("this model's multi-granularity prior has 'tree' heads, which need a phrase partition "
                         "per sentence: pass --phrases gold or --phrases induced:MODEL_DIR")
    if phrases is not None and not reads:
        prior = getattr(getattr(model, "config", None), "prior", None)
        raise InputError(f"--phrases {phrases}: this {type(model).__name__} (prior {prior}) has no 'tree' heads "
                         "and reads no phrases; leave --phrases out")


__all__ = ["NO_PHRASE", "NO_LABEL", "OTHER", "check_tree_words", "gold_phrase_trees", "induced_phrase_trees",
           "model_phrase_trees", "load_phrase_trees", "cut_tree", "word_phrase_ids", "token_phrase_ids",
           "label_vocabulary",
           "phrase_label_ids", "pad_phrases", "tree_level", "check_phrases_option",
           "model_reads_phrases", "model_tree_level", "check_model_phrases"]
