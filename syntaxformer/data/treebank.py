"""Reader for Penn Treebank bracketed trees (``.mrg`` files, or one tree per line) to ``nltk.Tree``.

One reader for every bracketed input of syntaxformer: gold treebanks, the embedded ``ptb-sample``,
and predicted trees written by :func:`syntaxformer.decoding.spans.to_bracketed`.

Trees are returned *raw*: exactly what ``nltk.Tree.fromstring`` makes of each top-level bracket
(the Penn Treebank's outer unlabelled bracket ``( (S ...) )`` stays as a root with the empty label
``""``). The field's cleaning is :func:`syntaxformer.data.preprocess.preprocess_tree`.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from pathlib import Path

from nltk import Tree

from syntaxformer.data.embedded import ptb_sample_part, read_ptb_sample
from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)

_BRACKET = re.compile(r"[()]")


def parse_bracketed(text: str, path: str = "<string>") -> list[Tree]:
    """Parse every top-level bracketed tree of ``text``.

    Trees may span several lines (``.mrg`` files) or be one per line; only whitespace may lie
    between two trees. Line ends may be ``\\n`` or ``\\r\\n``.

    Args:
        text: the file's contents.
        path: the name used in error messages.

    Returns:
        One ``nltk.Tree`` per top-level bracket, in order.

    Raises:
        InputError: naming ``path`` and the 1-based line: where a tree with unbalanced brackets
            starts, where a stray ``)`` or stray text between trees is, or where a tree that
            ``nltk.Tree.fromstring`` rejects starts; "no trees found" if ``text`` holds no tree.
    """
    trees: list[Tree] = []
    depth = 0
    start = 0  # offset of the current tree's "("
    end = 0  # offset just after the previous tree
    line = 1  # 1-based line of offset `counted`
    counted = 0

    def line_of(offset: int) -> int:
        nonlocal line, counted
        assert offset >= counted
        line += text.count("\n", counted, offset)
        counted = offset
        return line

    for match in _BRACKET.finditer(text):
        offset = match.start()
        if match.group() == "(":
            if depth == 0:
                gap = text[end:offset]
                if gap.strip():
                    stray = end + len(gap) - len(gap.lstrip())
                    raise InputError(f"text outside any tree: {gap.strip()[:40]!r}", path=path, line=line_of(stray))
                start = offset
            depth += 1
        else:
            if depth == 0:
                raise InputError("unbalanced brackets: ')' with no matching '('", path=path, line=line_of(offset))
            depth -= 1
            if depth == 0:
                end = offset + 1
                trees.append(_from_string(text[start:end], path, line_of(start)))
    if depth > 0:
        raise InputError(f"unbalanced brackets: tree not closed ({depth} ')' missing)", path=path, line=line_of(start))
    tail = text[end:]
    if tail.strip():
        raise InputError(
            f"text outside any tree: {tail.strip()[:40]!r}",
            path=path,
            line=line_of(end + len(tail) - len(tail.lstrip())),
        )
    if not trees:
        raise InputError("no trees found", path=path)
    return trees


#: Node labels and leaves: any run of characters other than white space and brackets. nltk's default
#: patterns also take a backslash as an escape (so a word ``\`` before ``)`` would swallow it); the Penn
#: Treebank escapes brackets as -LRB-/-RRB- instead, and its ``\/`` stays as written.
_TOKEN = r"[^\s()]+"


def _from_string(bracketed: str, path: str, line: int) -> Tree:
    try:
        return Tree.fromstring(bracketed, node_pattern=_TOKEN, leaf_pattern=_TOKEN)
    except ValueError as e:
        raise InputError(f"malformed tree: {e}", path=path, line=line) from None


def read_text_file(path: Path) -> str:
    """The whole file as UTF-8 text (the one file reader of every format).

    Raises:
        InputError: unreadable (naming the file) or not UTF-8 (naming the file and line).
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(
            f"not UTF-8 text (byte {e.start})", path=path, line=data.count(b"\n", 0, e.start) + 1
        ) from None


def resolve_files(source: str | os.PathLike, pattern: str, what: str) -> list[Path]:
    """The files a source names: a file, a folder, or a glob. Shared by every reader.

    Args:
        source: a file; a folder (its files matching ``pattern``, sorted by name; if none, all
            its regular files whose name does not start with ``.``, sorted); or a glob
            (``glob.glob``, sorted, regular files only).
        pattern: the file pattern looked for first in a folder, e.g. ``"*.mrg"``.
        what: what is being read, for error messages (e.g. ``"treebank"``).

    Raises:
        InputError: if the path does not exist, the glob matches no file, or the folder is empty.
    """
    text = os.fspath(source)
    path = Path(text)
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.glob(pattern) if p.is_file())
        if not files:
            files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            raise InputError(f"{what} folder holds no files", path=text)
        return files
    if glob.has_magic(text):
        files = sorted(Path(p) for p in glob.glob(text) if Path(p).is_file())
        if not files:
            raise InputError(f"no {what} file matches this pattern", path=text)
        return files
    raise InputError(f"no such {what} file or folder", path=text)


def read_treebank(source: str | os.PathLike) -> list[Tree]:
    """Read every tree of a treebank, raw (see :func:`parse_bracketed`).

    Args:
        source: ``"ptb-sample"`` for the embedded Penn Treebank sample (3,914 trees, files
            ``wsj_0001.mrg`` .. ``wsj_0199.mrg`` in order), ``"ptb-sample:dev"`` /
            ``"ptb-sample:test"`` for its halves (DESIGN.md §7); otherwise a file, a folder (all its
            ``*.mrg`` files sorted by name; if it has none, all its regular files not starting with
            ``.``), or a glob pattern (matches sorted by name). The name ``ptb-sample`` always
            means the embedded sample; write ``./ptb-sample`` for a folder of that name.

    Returns:
        The trees of all files in order. Sentence *k* (1-based) of the result is the *k*-th tree of
        the concatenated files.

    Raises:
        InputError: missing path, glob matching nothing, unreadable / non-UTF-8 file, malformed
            brackets (with file and line), a file with no tree.
    """
    part = ptb_sample_part(os.fspath(source))
    if part is not None:
        return read_ptb_sample("combined", part, parse_bracketed)
    trees = []
    files = resolve_files(source, "*.mrg", "treebank")
    for path in files:
        trees.extend(parse_bracketed(read_text_file(path), path=str(path)))
    logger.debug("read %d trees from %d file(s) of %s", len(trees), len(files), source)
    return trees
