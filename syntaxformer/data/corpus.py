"""Training text: the sentences a model is trained on, words normalised by the one rule."""

from __future__ import annotations

import functools
import glob
import logging

import torch

from syntaxformer.data.embedded import PTB_SAMPLE, ptb_sample_part
from syntaxformer.data.preprocess import PRPN, Preprocessing, load_gold_trees, normalise_word
from syntaxformer.data.text import read_text
from syntaxformer.data.wikitext import WIKITEXT_2, wikitext_2_sentences
from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)


def corpus_items(spec: str) -> list[str]:
    """The items of a comma-separated corpus spec, stripped, empty ones dropped, in order:
    ``"ptb-sample, wikitext-2,"`` -> ``["ptb-sample", "wikitext-2"]``."""
    return [item for item in (part.strip() for part in spec.split(",")) if item]


def corpus_files(spec: str) -> list[str]:
    """The raw-text files a corpus spec names: comma-separated paths and/or glob patterns.

    Each item is a path, or a glob (matches sorted by name). Order: as listed.

    Raises:
        InputError: an empty spec, or a glob that matches no file.
    """
    files: list[str] = []
    for item in corpus_items(spec):
        if glob.has_magic(item):
            matches = sorted(glob.glob(item))
            if not matches:
                raise InputError("no text file matches this pattern", path=item)
            files.extend(matches)
        else:
            files.append(item)
    if not files:
        raise InputError(f"empty corpus specification {spec!r}")
    return files


@functools.lru_cache(maxsize=4)
def _ptb_sample_words(options: Preprocessing, source: str = PTB_SAMPLE) -> tuple[tuple[str, ...], ...]:
    """The preprocessed words of the embedded sample (or one half), once per process and options."""
    return tuple(tuple(tree.leaves()) for tree in load_gold_trees(source, options))


def is_shipped_text(spec: str) -> bool:
    """Whether every item of a corpus spec names a text shipped in the package (ptb-sample or a half of
    it, ``wikitext-2``), so that it needs no file: ``"ptb-sample,wikitext-2"`` -> True, ``"ptb-lm"`` -> False."""
    items = corpus_items(spec)
    return bool(items) and all(ptb_sample_part(item) is not None or item == WIKITEXT_2 for item in items)


def load_corpus(spec: str, options: Preprocessing = PRPN) -> list[list[str]]:
    """The training sentences named by ``spec``, as lists of normalised words.

    Args:
        spec: ``"ptb-sample"`` — the words of the embedded Penn Treebank sample after the gold
            preprocessing ``options`` (3,914 sentences, 82,369 words with :data:`PRPN`; exactly the
            leaves of :func:`~syntaxformer.data.preprocess.load_gold_trees`); ``"ptb-sample:dev"``
            / ``"ptb-sample:test"`` the words of one half (DESIGN.md §7); ``"wikitext-2"`` the
            embedded WikiText-2 training split (76,483 sentences, 1,714,120 words;
            :mod:`~syntaxformer.data.wikitext`); otherwise raw-text files (one sentence per line,
            :func:`~syntaxformer.data.text.read_text`) and/or glob patterns. Items are
            comma-separated and read in order (``"ptb-sample,wikitext-2"``: the sample, then
            WikiText-2). Raw words are normalised with
            :func:`~syntaxformer.data.preprocess.normalise_word` using ``options.lowercase`` and
            ``options.digits_to_n`` (Mikolov's ``<unk>`` is left as it is); raw text is not filtered by
            tags (it has none).
        options: the preprocessing switches.

    Raises:
        InputError: a missing file, a glob matching nothing, an empty file.
    """
    sentences: list[list[str]] = []
    for item in corpus_items(spec):
        if ptb_sample_part(item) is not None:
            sentences.extend(list(words) for words in _ptb_sample_words(options, item))
            continue
        if item == WIKITEXT_2:
            raw = wikitext_2_sentences()
        else:
            raw = [words for path in corpus_files(item) for words in read_text(path)]
        sentences.extend([normalise_word(w, options.lowercase, options.digits_to_n) for w in words] for words in raw)
    if not sentences:
        raise InputError(f"empty corpus specification {spec!r}")
    logger.info("corpus %s: %d sentences, %d words", spec, len(sentences), sum(map(len, sentences)))
    return sentences


#: the unknown-word token of Mikolov's ptb-lm text, which stands for any word outside its vocabulary
UNKNOWN_WORD = "<unk>"
#: tokens that the PRPN preprocessing removes (tags ``$``, ``#``) and Mikolov's ptb-lm text keeps
SYMBOL_WORDS = frozenset({"$", "#", "us$", "c$", "a$"})


def _comparable(words) -> tuple[str, ...]:
    """Words as :func:`exclude_treebank` compares them: without :data:`SYMBOL_WORDS`, ``%`` as ``N``
    (Mikolov's ptb-lm text writes the percent sign as ``N``)."""
    return tuple("N" if w == "%" else w for w in words if w not in SYMBOL_WORDS)


def exclude_treebank(
    sentences: list[list[str]], treebank: str, options: Preprocessing = PRPN
) -> tuple[list[list[str]], int]:
    """``sentences`` without those whose words are exactly a sentence of ``treebank`` (``--exclude-treebank``):
    the held-out setting, a model that never read the sentences it is scored on.

    A sentence is compared by its words as training reads them (normalised by
    :func:`~syntaxformer.data.preprocess.normalise_word` with ``options``) against the treebank's
    preprocessed words (the gold leaves of :func:`~syntaxformer.data.preprocess.load_gold_trees`,
    normalised the same way): the whole word sequence, word for word, where the text's
    :data:`UNKNOWN_WORD` (Mikolov's ptb-lm text writes it for every word outside its 10k vocabulary)
    matches any word (in a sentence of at most half unknown words), and both sides are read without ``$`` and ``#`` and with ``%`` as ``N`` (the
    ptb-lm text keeps the currency and number signs (``us$`` and the like) that the PRPN preprocessing removes, and writes
    the percent sign as ``N``: :func:`_comparable`).

    Args:
        sentences: the training sentences (normalised words, as :func:`load_corpus` gives them).
        treebank: ``"ptb-sample"`` (or a half of it) or a treebank path.
        options: the preprocessing of both.
    Returns:
        ``(kept, removed)``: the other sentences in order, and how many were removed.
    Raises:
        InputError: an unreadable treebank.
    """
    if ptb_sample_part(treebank) is not None:
        gold = _ptb_sample_words(options, treebank)
    else:
        gold = tuple(tuple(tree.leaves()) for tree in load_gold_trees(treebank, options))
    excluded = {_comparable(normalise_word(w, options.lowercase, options.digits_to_n) for w in words) for words in gold}
    by_length: dict[int, list[tuple[str, ...]]] = {}
    for words in excluded:
        by_length.setdefault(len(words), []).append(words)

    def in_treebank(words: list[str]) -> bool:
        key = _comparable(words)
        if key in excluded:
            return True
        if 2 * key.count(UNKNOWN_WORD) > len(key):  # mostly unknown: too little to match on
            return False
        return any(all(a == b or a == UNKNOWN_WORD for a, b in zip(key, gold)) for gold in by_length.get(len(key), ()))

    kept = [words for words in sentences if not in_treebank(words)]
    logger.info(
        "--exclude-treebank %s: %d of %d sentences removed", treebank, len(sentences) - len(kept), len(sentences)
    )
    return kept, len(sentences) - len(kept)


def held_out_indices(n: int, fraction: float) -> set[int]:
    """The indices of the validation slice of ``n`` sentences: the first ``round(fraction·n)`` (at
    least 1 and at most ``n - 1`` when ``fraction > 0`` and ``n > 1``) of a seed-0 permutation. The
    trainer's split rule, also used by ``nli`` and ``heads``."""
    k = round(fraction * n)
    if fraction > 0 and n > 1:
        k = max(1, min(k, n - 1))
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    return set(perm[:k].tolist())
