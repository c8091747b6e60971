"""The SICK reader (Marelli et al., LREC 2014; the SemEval-2014 Task 1 release; DESIGN.md §6).

``SICK.txt`` is tab-separated with a header line and Windows line ends (CRLF; the last line may have
none). The columns read: ``pair_ID``, ``sentence_A`` (premise), ``sentence_B`` (hypothesis),
``entailment_label`` (ENTAILMENT / NEUTRAL / CONTRADICTION) and ``SemEval_set`` (TRAIN / TRIAL /
TEST: the official split; 4,439 / 495 / 4,906 pairs). Every line must have as many fields as the
header; any fault is an :class:`~syntaxformer.errors.InputError` naming the file and line.
"""

from __future__ import annotations

from pathlib import Path

from syntaxformer.data.nli_pair import NliPair, make_pair, tsv_rows
from syntaxformer.data.treebank import read_text_file
from syntaxformer.errors import InputError

#: the columns a SICK header must have
SICK_COLUMNS = ("pair_ID", "sentence_A", "sentence_B", "entailment_label", "SemEval_set")
#: ``SemEval_set`` value -> split name (TRIAL is the selection split)
SICK_SPLITS = {"TRAIN": "train", "TRIAL": "valid", "TEST": "test"}


def is_sick_header(line: str) -> bool:
    """Whether ``line`` is a SICK header (tab-separated, with every column of :data:`SICK_COLUMNS`)."""
    fields = line.rstrip("\r\n").split("\t")
    return all(c in fields for c in SICK_COLUMNS)


def read_sick(path: str | Path) -> list[tuple[NliPair, str]]:
    """Every pair of a SICK file with its split.

    Returns:
        ``[(pair, split)]`` in file order; split is ``"train"``, ``"valid"`` (TRIAL) or ``"test"``.
    Raises:
        InputError: not a SICK header, a line with another number of fields than the header, an
            unknown label or ``SemEval_set``, an empty sentence (naming file and line), or no pair.
    """
    path = Path(path)
    lines = read_text_file(path).split("\n")
    if not is_sick_header(lines[0]):
        raise InputError(f"not a SICK header: expected the columns {', '.join(SICK_COLUMNS)}", path=path, line=1)
    header, rows = tsv_rows(lines, path)
    col = {name: header.index(name) for name in SICK_COLUMNS}
    pairs = []
    for number, fields in rows:
        split = SICK_SPLITS.get(fields[col["SemEval_set"]].strip())
        if split is None:
            raise InputError(
                f"unknown SemEval_set {fields[col['SemEval_set']]!r}; expected TRAIN, TRIAL or TEST",
                path=path,
                line=number,
            )
        pair = make_pair(
            fields[col["sentence_A"]],
            fields[col["sentence_B"]],
            fields[col["entailment_label"]],
            fields[col["pair_ID"]],
            path,
            number,
        )
        if pair is None:
            raise InputError("label - : every SICK pair has a label", path=path, line=number)
        pairs.append((pair, split))
    if not pairs:
        raise InputError("no pair after the header", path=path)
    return pairs


__all__ = ["SICK_COLUMNS", "SICK_SPLITS", "is_sick_header", "read_sick"]
