"""Generic sentence-pair readers: JSON lines and TSV (SNLI / MultiNLI style; DESIGN.md §6).

A file holds one pair per line with three fields, named either ``premise`` / ``hypothesis`` /
``label`` or SNLI's ``sentence1`` / ``sentence2`` / ``gold_label`` (other fields are ignored):

* **JSON lines**: one JSON object per line (blank lines skipped);
* **TSV**: a header line naming the columns, then tab-separated lines with exactly as many fields
  (SNLI's ``.txt`` release is such a file).

Labels: ``entailment`` / ``neutral`` / ``contradiction`` (any case). Pairs labelled ``-`` (SNLI: no
annotator majority) are skipped and counted. Anything else malformed -- a line that is not a JSON
object, a missing field, a wrong number of fields, an unknown label, an empty sentence -- is an
:class:`~syntaxformer.errors.InputError` naming the file and the 1-based line.
"""

from __future__ import annotations

import json
from pathlib import Path

from syntaxformer.data.nli_pair import NliPair, make_pair, tsv_rows
from syntaxformer.data.treebank import read_text_file
from syntaxformer.errors import InputError

#: accepted field names: (premise, hypothesis, label), in order of preference
FIELD_NAMES = (("premise", "hypothesis", "label"), ("sentence1", "sentence2", "gold_label"))


def _fields(available, path: Path, line: int) -> tuple[str, str, str]:
    for names in FIELD_NAMES:
        if all(n in available for n in names):
            return names
    expected = " or ".join("/".join(names) for names in FIELD_NAMES)
    raise InputError(f"no fields {expected}", path=path, line=line)


def read_jsonl_pairs(path: Path, lines: list[str]) -> tuple[list[NliPair], int]:
    """Pairs of JSON-lines text (module docstring): ``(pairs, skipped for the label "-")``."""
    pairs, skipped = [], 0
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as e:
            raise InputError(f"not a JSON object ({e.msg})", path=path, line=number) from None
        if not isinstance(obj, dict):
            raise InputError("not a JSON object", path=path, line=number)
        p, h, lab = _fields(obj, path, number)
        if not all(isinstance(obj[k], str) for k in (p, h, lab)):
            raise InputError(f"fields {p}, {h}, {lab} must be strings", path=path, line=number)
        pair = make_pair(obj[p], obj[h], obj[lab], str(obj.get("pairID", number)), path, number)
        skipped += pair is None
        pairs += [pair] if pair is not None else []
    return pairs, skipped


def read_tsv_pairs(path: Path, lines: list[str]) -> tuple[list[NliPair], int]:
    """Pairs of TSV text with a header (module docstring): ``(pairs, skipped for the label "-")``."""
    header, rows = tsv_rows(lines, path)
    p, h, lab = (header.index(n) for n in _fields(header, path, 1))
    pairs, skipped = [], 0
    for number, fields in rows:
        pair = make_pair(fields[p], fields[h], fields[lab], str(number), path, number)
        skipped += pair is None
        pairs += [pair] if pair is not None else []
    return pairs, skipped


def read_pairs(path: str | Path, fmt: str) -> tuple[list[NliPair], int]:
    """Every labelled pair of a ``"jsonl"`` or ``"tsv"`` file and the number skipped (label ``-``).

    Raises:
        InputError: as the module docstring says, or a file with no labelled pair.
    """
    path = Path(path)
    lines = read_text_file(path).split("\n")
    pairs, skipped = (read_jsonl_pairs if fmt == "jsonl" else read_tsv_pairs)(path, lines)
    if not pairs:
        raise InputError(f"no labelled pair ({skipped} skipped for the label -)", path=path)
    return pairs, skipped


__all__ = ["FIELD_NAMES", "read_pairs", "read_jsonl_pairs", "read_tsv_pairs"]
