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


def held_out_indices(n: int, fraction: float) -> set[int]:
    """The indices of the validation slice of ``n`` sentences: the first ``round(fraction·n)`` (at
    least 1 and at most ``n - 1`` when ``fraction > 0`` and ``n > 1``) of a seed-0 permutation. The
    trainer's split rule, also used by ``nli`` and ``heads``."""
    k = round(fraction * n)
    if fraction > 0 and n > 1:
        k = max(1, min(k, n - 1))
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    return set(perm[:k].tolist())
