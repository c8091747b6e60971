"""What every table module shares: the pages and their markers, the table registry, the readers of the JSON
reports, the cell formats, and the catalogue of induce groups (``records/induce/manifest.json``).

A table lives between two marker comments, ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``, on one
of :data:`PAGES`; :data:`TABLES` maps ``NAME`` to the function that writes it (each table module registers
its own with :func:`table`), :func:`render` rewrites a page's marked tables and :func:`stale_pages` names
the pages that differ. Everything outside the markers is left as it is.

The induce groups: ``records/induce/manifest.json`` lists each group of runs once, in the catalogue's order:
its ``key``, its ``label`` (``docs/results/induce.md``), the README's shorter label where it has one
(``short``), and its reports: ``reports``, a glob under ``records/induce/`` (one report per seed), or
``report``, one parser folder's ``report.json`` relative to the repository root (a shipped parser's).
:func:`group` reads a group's reports, :func:`group_label` and :func:`short_label` its labels.

Cells: means ± sample standard deviation over the seeds listed (one seed: the value alone); F1,
accuracy and recall are percentages (0-100); minutes are wall-clock minutes of training.
"""

from __future__ import annotations

import json
import re
import statistics
from functools import lru_cache
from pathlib import Path
from typing import Callable

from benchmarks import RECORDS, RESULTS, ROOT

DOCS = ROOT / "docs"

#: the pages whose marked tables are written here
PAGES = [
    ROOT / "README.md",
    ROOT / "benchmarks" / "speed" / "README.md",
    DOCS / "guide" / "parse.md",
    *sorted(RESULTS.rglob("*.md")),
]

MARKER = re.compile(r"(<!-- results:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)

#: table name -> function returning the markdown table (no trailing newline)
TABLES: dict[str, Callable[[], str]] = {}


def table(name: str):
    """Register a table writer under ``name`` (the marker's name)."""

    def register(function):
        TABLES[name] = function
        return function

    return register


# ---------------------------------------------------------------------------------------------------------
# reading and formatting


@lru_cache(maxsize=None)
def load(path: str) -> dict:
    """A JSON report, by path relative to the repository root."""
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def reports(pattern: str) -> list[dict]:
    """The induce reports matching ``records/induce/PATTERN``, in seed order."""
    found = [load(str(p.relative_to(ROOT))) for p in sorted((RECORDS / "induce").glob(pattern))]
    if not found:
        raise FileNotFoundError(f"no report matches records/induce/{pattern}")
    return sorted(found, key=lambda r: r["seed"])


def mean_sd(values, digits: int = 2) -> str:
    """``mean ± sample sd`` of ``values``; one value alone; ``–`` for none."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def span(values, digits: int = 1) -> str:
    """``low–high`` of ``values`` (one value alone)."""
    low, high = min(values), max(values)
    low, high = f"{low:.{digits}f}", f"{high:.{digits}f}"
    return low if low == high else f"{low}–{high}"


def seeds_of(rows: list[dict]) -> str:
    return ", ".join(str(r["seed"]) for r in rows)


def markdown(header: list[str], rows: list[list[str]], align: str | None = None) -> str:
    """A markdown table; ``align``: one character per column, ``l`` or ``r`` (default all left)."""
    align = align or "l" * len(header)
    rule = ["---" if a == "l" else "--:" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# the induce groups (records/induce/manifest.json) and their reports

#: the catalogue of induce groups, relative to the repository root
MANIFEST = "records/induce/manifest.json"

#: where a shipped parser's report is (relative to the repository root)
SHIPPED_REPORT = "syntaxformer/pretrained/{}/report.json"


def read_manifest(path: str = MANIFEST) -> dict[str, dict]:
    """The manifest's groups by key, in its order; a repeated key, or a group with not exactly one of
    ``reports`` (a glob) and ``report`` (one path), is an error."""
    groups: dict[str, dict] = {}
    for entry in load(path)["groups"]:
        if entry["key"] in groups:
            raise ValueError(f"{path}: group {entry['key']!r} is listed twice")
        if ("reports" in entry) == ("report" in entry):
            raise ValueError(f"{path}: group {entry['key']!r} needs one of 'reports' (a glob) and 'report' (a path)")
        groups[entry["key"]] = entry
    return groups


#: the induce groups: key -> the manifest's entry (``label``, ``short`` where the README has one,
#: ``reports`` or ``report``)
INDUCE = read_manifest()


def group_label(key: str) -> str:
    """The induce group's label (``docs/results/induce.md``)."""
    return INDUCE[key]["label"]


def short_label(key: str) -> str:
    """The README's label of the induce group: its ``short`` label, or its label where it has none."""
    return INDUCE[key].get("short", INDUCE[key]["label"])


def group(key: str) -> list[dict]:
    """The reports of the induce group ``key``, in seed order (a parser folder's report: one)."""
    entry = INDUCE[key]
    if "report" in entry:  # a shipped parser's, not a records/induce pattern
        return [shipped_report(entry["report"])]
    return reports(entry["reports"])


def shipped_report(path: str) -> dict:
    """A shipped parser's report; for a run continued with ``--resume`` (whose report has only its last
    part's clock) the training minutes of all its parts (``training.json``'s ``train_minutes_total``)."""
    report = json.loads(json.dumps(load(path)))
    total = load(str(Path(path).with_name("training.json"))).get("train_minutes_total")
    if total is not None and total > report["minutes"]["train"]:
        report["minutes"]["train"] = total
    return report


def model_key(report: dict) -> str:
    return report["model"].replace("-", "_")


def part_scores(rows: list[dict], part: str, system: str | None = None, field: str = "sentence_f1") -> list[float]:
    """``field`` of ``system`` (default: the model itself) on ``part`` (test, dev, all), one per report."""
    return [r["parts"][part][system or model_key(r)][field] for r in rows]


def train_minutes(report: dict) -> float:
    """A run's minutes of training: its report's training stage, or for a resumed run whose report names its
    resumes, the optimizer steps' minutes summed over all its processes (``minutes.train`` is the last one's)."""
    training = report["training"]
    return training["train_minutes_total"] if training.get("resumed_from_steps") else report["minutes"]["train"]


def compute(rows: list[dict]) -> str:
    """Steps and training minutes of a group, from the reports: a run's training stage, or for a resumed run
    whose report has them, its optimizer steps' minutes over all its processes (an older resumed run's clock
    is not its training's)."""
    steps = sorted({r["training"]["steps"] for r in rows})
    steps = f"{steps[0]:,}" if len(steps) == 1 else f"{steps[0]:,}–{steps[-1]:,}"
    resumed = [r for r in rows if r["training"].get("resumed_from_steps")]
    timed = [r for r in rows if r["training"].get("tokens_per_second")]
    devices = sorted({"GPU" if str(r["training"]["device"]).startswith("cuda") else "CPU" for r in timed})
    minutes = span([train_minutes(r) for r in timed]) + f" min, {'/'.join(devices)}" if timed else "–"
    if resumed:
        minutes += f" (seed {', '.join(str(r['seed']) for r in resumed)}: resumed, minutes summed over its runs)"
    untimed = [str(r["seed"]) for r in rows if r not in timed]
    if untimed:
        minutes += f" (seed {', '.join(untimed)}: resumed, its clock not kept)"
    return f"{steps} steps; {minutes}"


# ---------------------------------------------------------------------------------------------------------
# the pages


def render(text: str, where: str = "page") -> str:
    """``text`` with every marked table rewritten; an unknown table name is an error naming ``where``."""

    def replace(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise KeyError(f"{where}: no table named {name!r} (known: {', '.join(sorted(TABLES))})")
        return f"{match.group(1)}{TABLES[name]()}\n{match.group(4)}"

    return MARKER.sub(replace, text)


def stale_pages(pages=None) -> list[Path]:
    """The pages whose tables differ from what the reports say."""
    return [
        p for p in (pages or PAGES) if render(p.read_text(encoding="utf-8"), str(p)) != p.read_text(encoding="utf-8")
    ]
