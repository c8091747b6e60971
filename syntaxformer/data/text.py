"""Raw text reader: one sentence per line, whitespace-tokenised."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from syntaxformer.data.treebank import read_text_file
from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)


def parse_text(text: str, path: str = "<string>") -> list[list[str]]:
    """Split ``text`` into sentences (lines) of words (``str.split()``); see :func:`read_text`."""
    sentences = [line.split() for line in text.splitlines()]
    blank = sum(1 for words in sentences if not words)
    sentences = [words for words in sentences if words]
    if not sentences:
        raise InputError("no sentences found (the file is empty or blank)", path=path)
    if blank:
        logger.info("%s: %d blank line(s) skipped (not sentences); %d sentences read", path, blank, len(sentences))
    return sentences


def read_text(path: str | os.PathLike) -> list[list[str]]:
    """Read raw text: one sentence per line, words separated by whitespace.

    Words are returned as they are (no normalisation; see
    :func:`syntaxformer.data.preprocess.normalise_word`). Blank or whitespace-only lines are not
    sentences: they are skipped and their number is logged at INFO level, so sentence *k* of the
    result is the *k*-th non-blank line.

    Raises:
        InputError: missing or unreadable path, non-UTF-8 text, or no sentence at all (an empty or
            blank file), naming the file.
    """
    if not os.path.isfile(path):
        raise InputError("no such text file", path=os.fspath(path))
    return parse_text(read_text_file(Path(path)), os.fspath(path))
