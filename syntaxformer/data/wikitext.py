"""WikiText-2 (Merity et al., 2016): the embedded training split, read as sentences of words.

``syntaxformer/data/embedded/wiki.train.tokens.xz`` is ``wiki.train.tokens`` of WikiText-2 (the
tokenised version: 36,718 lines of 2,051,910 tokens, 2,088,628 counting one end-of-line token per
line as language-model papers do; as vendored in ``pytorch/examples``,
``word_language_model/data/wikitext-2/``), copied unchanged and compressed with xz. Licence: Creative
Commons Attribution-ShareAlike (CC BY-SA 3.0), the text of Wikipedia articles; attribution in
``embedded/LICENSE.txt``. Selected as ``wikitext-2`` wherever a training text is named
(:func:`~syntaxformer.data.corpus.load_corpus`).

The file holds one paragraph per line, headings as `` = Title = `` lines, words and punctuation
separated by spaces, numbers and hyphenated words split by the joiners ``@-@``, ``@,@``, ``@.@``, and
rare words as ``<unk>``. :func:`wikitext_sentences` turns it into the form of the Penn Treebank text
the induction models train on (PRPN preprocessing, DESIGN.md §6): headings and blank lines dropped,
joiners rejoined (``real @-@ time`` -> ``real-time``, ``1 @,@ 000`` -> ``1,000``), paragraphs split into
sentences after ``.``, ``?`` and ``!``, and punctuation tokens (no letter or digit; ``%`` and ``&``
kept, as the treebank tags them as words) removed. Lower-casing and ``N`` for numbers are left to the
one normalisation rule of the caller (:func:`~syntaxformer.data.preprocess.normalise_word`).
"""

from __future__ import annotations

import functools
import lzma
from importlib import resources

#: The name that selects the embedded WikiText-2 training split wherever a training text is named.
WIKITEXT_2 = "wikitext-2"

_FILE = "wiki.train.tokens.xz"
_JOINERS = {"@-@": "-", "@,@": ",", "@.@": "."}
_SENTENCE_END = frozenset({".", "?", "!"})
_WORD_SYMBOLS = frozenset({"%", "&"})


def _is_word(token: str) -> bool:
    """Whether a token is a word under the treebank's preprocessing (PRPN drops punctuation tags)."""
    return token in _WORD_SYMBOLS or any(ch.isalnum() for ch in token)


def _rejoin(tokens: list[str]) -> list[str]:
    """``['real', '@-@', 'time']`` -> ``['real-time']``; a joiner at an edge is dropped."""
    out: list[str] = []
    glue: str | None = None
    for token in tokens:
        if token in _JOINERS:
            glue = _JOINERS[token] if out else None
            continue
        if glue is not None:
            out[-1] = out[-1] + glue + token
            glue = None
        else:
            out.append(token)
    return out


def paragraph_sentences(line: str) -> list[list[str]]:
    """One line of a WikiText file as sentences of words (see the module docstring).

    Args:
        line: one line of ``wiki.*.tokens``.

    Returns:
        The sentences of the paragraph, each a non-empty list of words; ``[]`` for a blank line or a
        heading (`` = Title = ``, `` = = Section = = ``).

    Example:
        ``" The game 's real @-@ time battles , he said . It sold 1 @,@ 000 copies . "`` ->
        ``[["The", "game", "'s", "real-time", "battles", "he", "said"], ["It", "sold", "1,000", "copies"]]``
    """
    stripped = line.strip()
    if not stripped or (stripped.startswith("=") and stripped.endswith("=")):
        return []
    sentences: list[list[str]] = []
    current: list[str] = []
    for token in _rejoin(stripped.split()):
        if _is_word(token):
            current.append(token)
        if token in _SENTENCE_END and current:
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return sentences


@functools.lru_cache(maxsize=1)
def wikitext_2_sentences() -> tuple[tuple[str, ...], ...]:
    """The embedded WikiText-2 training split as sentences of (not yet normalised) words, in file order.

    Read once per process through :mod:`importlib.resources` (works from a wheel and a checkout).
    """
    data = resources.files("syntaxformer.data").joinpath("embedded", _FILE).read_bytes()
    text = lzma.decompress(data).decode("utf-8")
    return tuple(tuple(s) for line in text.splitlines() for s in paragraph_sentences(line))
