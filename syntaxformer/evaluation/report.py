"""Plain-text reports shared by every command: a header of ``key: value`` lines, aligned tables, JSON.

Commands print; this module only builds strings (the library never prints).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from os import PathLike


def format_value(value, digits: int = 2) -> str:
    """A table cell: floats with ``digits`` decimals, ``None`` / NaN as ``-``, ints with thousands
    separators, everything else ``str``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def format_table(header: Sequence[str], rows: Sequence[Sequence], digits: int = 2) -> str:
    """An aligned plain-text table: first column left-aligned, the others right-aligned.

    Args:
        header: column titles.
        rows: one sequence of cells per row (formatted by :func:`format_value`), as long as ``header``.
        digits: decimals of float cells.

    Returns:
        The table as lines joined by ``\\n`` (header, a rule of ``-``, rows), no trailing newline.
    """
    cells = [[str(h) for h in header]] + [[format_value(v, digits) for v in row] for row in rows]
    assert all(len(row) == len(header) for row in cells), "every row needs one cell per column"
    widths = [max(len(row[c]) for row in cells) for c in range(len(header))]

    def line(row):
        parts = [row[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:], widths[1:])]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(row) for row in cells[1:]])


def format_header(title: str, fields: Mapping[str, object]) -> str:
    """A report's opening lines: the title, then one ``key: value`` line per field (``None`` skipped).

    Every report names at least its data, protocol and seed (and the preset when a model is
    involved), e.g. ``format_header("evaluate", {"data": ..., "protocol": ..., "seed": 0})``.
    """
    width = max((len(k) for k, v in fields.items() if v is not None), default=0)
    lines = [title]
    for key, value in fields.items():
        if value is not None:
            lines.append(f"{(key + ':').ljust(width + 1)} {format_value(value)}")
    return "\n".join(lines)


def _json_default(value):
    if isinstance(value, PathLike):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def to_json(obj: Mapping) -> str:
    """``obj`` as one JSON object (indented; paths as strings, sets/tuples as lists, NaN as null)."""
    return json.dumps(_nan_to_none(obj), indent=2, default=_json_default, allow_nan=False)


def _nan_to_none(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Mapping):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_to_none(v) for v in value]
    return value


#: Display names of the structure-free baselines (:mod:`syntaxformer.evaluation.baselines`), in
#: table order.
BASELINE_NAMES = {
    "left_branching": "left-branching",
    "right_branching": "right-branching",
    "random": "random binary",
    "balanced": "balanced binary",
}


def score_cell(result: dict, key: str, label: str | None = None):
    """A table cell of a scores dict: ``result[key]`` (or ``result[key][label]``), or the string
    ``mean ± std`` when ``result`` has a ``std`` (the random baseline: mean over seeds)."""
    value = result[key] if label is None else result[key][label]
    if "std" not in result or value is None:
        return value
    std = result["std"][key] if label is None else result["std"][key][label]
    return f"{value:.2f} ± {std:.2f}"
