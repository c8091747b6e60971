"""Errors for bad user input.

Every reader and command raises :class:`InputError` (a ``ValueError``) for input it cannot use, with
a one-line message that names the file, the line (1-based) or the sentence (1-based) at fault. The
command line prints that message and exits with status 1, without a traceback.
"""

from __future__ import annotations

from os import PathLike


class InputError(ValueError):
    """Bad user input: a malformed file, a missing path, a mismatch between prediction and gold.

    Args:
        message: what is wrong, in one line (kept as ``message``; ``str(error)`` adds where).
        path: the file at fault, if any.
        line: 1-based line number in ``path``, if known.
        sentence: 1-based sentence number, if the fault is a sentence rather than a line.
    """

    def __init__(
        self, message: str, path: str | PathLike | None = None, line: int | None = None, sentence: int | None = None
    ):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.sentence = sentence
        where = []
        if self.path is not None:
            where.append(self.path if line is None else f"{self.path}:{line}")
        if sentence is not None:
            where.append(f"sentence {sentence}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
