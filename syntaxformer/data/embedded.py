"""The embedded Penn Treebank sample (``ptb-sample``), shipped inside the package.

``syntaxformer/data/embedded/ptb-sample.tar.xz`` holds the NLTK distribution of the WSJ sample of
the Penn Treebank (sections 00-01, files ``wsj_0001`` .. ``wsj_0199``): 3,914 sentences.

Members of the archive:

* ``combined/wsj_0001.mrg`` .. ``combined/wsj_0199.mrg``: gold constituency trees, bracketed, with
  function tags and ``-NONE-`` traces (100,676 leaves; 94,084 without traces);
* ``dependency/wsj_0001.dp`` .. ``dependency/wsj_0199.dp``: the same sentences as dependency trees,
  ``word TAB tag TAB head`` (1-based head, 0 = root), one blank line between sentences;
* ``README.nltk``: NLTK's notes.

Source: NLTK data (``packages/corpora/treebank.zip`` and ``dependency_treebank.zip``). Licence:
(C) LDC 1995, distributed by NLTK under fair use, **non-commercial use only** (see
``embedded/LICENSE.txt``).

The archive is read once per process (``functools.lru_cache``) with :mod:`tarfile` through
:mod:`importlib.resources`, so it works from an installed wheel as well as from a checkout.
"""

from __future__ import annotations

import functools
import io
import tarfile
from importlib import resources

from syntaxformer.errors import InputError

#: The name that selects the embedded sample wherever a treebank or dependency source is accepted.
PTB_SAMPLE = "ptb-sample"

#: The halves of the sample (DESIGN.md §7): choose recipes on ``dev``, report on ``test``. Selected
#: as ``ptb-sample:dev`` / ``ptb-sample:test`` wherever a treebank, dependency source or corpus is
#: named; the value is the range of file numbers (``wsj_0001`` .. ``wsj_0099`` = 1,921 sentences,
#: ``wsj_0100`` .. ``wsj_0199`` = 1,993 sentences).
PTB_SAMPLE_PARTS = {"dev": (1, 99), "test": (100, 199)}

_ARCHIVE = "ptb-sample.tar.xz"
_KINDS = {"combined": ".mrg", "dependency": ".dp"}


@functools.lru_cache(maxsize=1)
def _archive_members() -> dict[str, str]:
    """Every regular file of the archive as ``{member name: text}`` (ASCII/UTF-8 text)."""
    data = resources.files("syntaxformer.data").joinpath("embedded", _ARCHIVE).read_bytes()
    members: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as archive:
        for member in archive.getmembers():
            if not member.isfile():
                continue
            handle = archive.extractfile(member)
            assert handle is not None, member.name
            members[member.name] = handle.read().decode("utf-8")
    return members


def ptb_sample_part(source) -> str | None:
    """Which part of the embedded sample ``source`` selects, or None when it names no part of it.

    ``"ptb-sample"`` -> ``"all"``; ``"ptb-sample:dev"`` -> ``"dev"``; ``"ptb-sample:test"`` ->
    ``"test"``; anything else (a path) -> None.

    Raises:
        InputError: ``ptb-sample:X`` with another ``X`` (names the known parts).
    """
    text = str(source).strip()
    if text == PTB_SAMPLE:
        return "all"
    if not text.startswith(PTB_SAMPLE + ":"):
        return None
    part = text[len(PTB_SAMPLE) + 1 :]
    if part not in PTB_SAMPLE_PARTS:
        raise InputError(
            f"unknown part {part!r} of {PTB_SAMPLE}: expected {PTB_SAMPLE}, "
            + " or ".join(f"{PTB_SAMPLE}:{p}" for p in PTB_SAMPLE_PARTS)
        )
    return part


def ptb_sample_members(kind: str, part: str = "all") -> list[tuple[str, str]]:
    """The files of one part of the embedded sample, as ``(member name, text)``, sorted by name.

    Args:
        kind: ``"combined"`` (the 199 ``.mrg`` constituency files) or ``"dependency"`` (the 199
            ``.dp`` dependency files).
        part: ``"all"``, or a key of :data:`PTB_SAMPLE_PARTS` (``"dev"``: ``wsj_0001`` ..
            ``wsj_0099``; ``"test"``: ``wsj_0100`` .. ``wsj_0199``).

    Returns:
        e.g. ``[("combined/wsj_0001.mrg", "( (S ..."), ...]``. Texts are returned unchanged (one
        file has CRLF line ends; the readers accept both).

    Raises:
        ValueError: for another ``kind`` (a programming error, not user input).
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {sorted(_KINDS)}, not {kind!r}")
    if part != "all" and part not in PTB_SAMPLE_PARTS:
        raise ValueError(f"part must be 'all' or one of {sorted(PTB_SAMPLE_PARTS)}, not {part!r}")
    first, last = PTB_SAMPLE_PARTS.get(part, (0, 10**9))
    prefix, suffix = f"{kind}/", _KINDS[kind]
    return sorted(
        (name, text)
        for name, text in _archive_members().items()
        if name.startswith(prefix)
        and name.endswith(suffix)
        and first <= int(name[len(prefix) + 4 : -len(suffix)]) <= last
    )


def ptb_sample_readme() -> str:
    """NLTK's ``README`` of the treebank sample, as shipped in the archive."""
    return _archive_members()["README.nltk"]


def read_ptb_sample(kind: str, part: str, parse) -> list:
    """Every file of one part of the embedded sample parsed and concatenated, in file order.

    Args:
        kind, part: as :func:`ptb_sample_members`.
        parse: the format's reader of one text, ``parse(text, path=NAME) -> list`` (NAME is
            ``ptb-sample:MEMBER``, what its errors name).
    """
    items = []
    for name, text in ptb_sample_members(kind, part):
        items.extend(parse(text, path=f"{PTB_SAMPLE}:{name}"))
    return items
