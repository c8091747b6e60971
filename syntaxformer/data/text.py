"""Raw text reader: one sentence per line, whitespace-tokenised."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from syntaxformer.data.treebank import read_text_file
from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)


def parse_text(text: str, path: str = "<string>", keep_blank: bool = False) -> list[list[str]]:
    """Split ``text`` into sentences (lines) of words (``str.split()``); see :func:`read_text`.

    Args:
        text: the text, one sentence per line.
        path: the name used in messages.
        keep_blank: False: blank lines are skipped (logged); True: a blank line is an empty list, so
            item *k* of the result is line *k* of the text.

    Raises:
        InputError: no sentence at all (an empty or blank text), naming ``path``.
    """
    lines = [line.split() for line in text.splitlines()]
    sentences = [words for words in lines if words]
    if not sentences:
        raise InputError("no sentences found (the file is empty or blank)", path=path)
    blank = len(lines) - len(sentences)
    if keep_blank:
        return lines
    if blank:
        logger.info("%s: %d blank line(s) skipped (not sentences); %d sentences read", path, blank, len(sentences))
    return sentences


def read_text(path: str | os.PathLike, keep_blank: bool = False) -> list[list[str]]:
    """Read raw text: one sentence per line, words separated by whitespace.

    Words are returned as they are (no normalisation; see
    :func:`syntaxformer.data.preprocess.normalise_word`). Blank or whitespace-only lines are not
    sentences: they are skipped and their number is logged at INFO level, so sentence *k* of the
    result is the *k*-th non-blank line; with ``keep_blank`` each is an empty list instead, so item
    *k* of the result is line *k* of the file (``syntaxformer parse`` keeps its output line by line).

    Raises:
        InputError: missing or unreadable path, non-UTF-8 text, or no sentence at all (an empty or
            blank file), naming the file.
    """
    if os.path.isdir(path):
        raise InputError("a folder, not a text file (one sentence per line)", path=os.fspath(path))
    if not os.path.isfile(path):
        raise InputError("no such text file", path=os.fspath(path))
    return parse_text(read_text_file(Path(path)), os.fspath(path), keep_blank=keep_blank)
