"""Start-up of ``syntaxformer parse`` for one sentence: wall time and where it goes.

Each measurement is a fresh process (nothing cached in memory but the OS's file cache), repeated
``--repeats`` times; the report gives medians. Two kinds of run alternate:

* **end to end**: ``.venv/bin/syntaxformer parse --input - --out DIR`` with one sentence on standard
  input, timed from the parent (spawn to exit);
* **phases**: the same command in process (``syntaxformer.cli.main``, the entry point's own call)
  with timestamps at the boundaries below, taken by wrapping functions of the code under test
  (``syntaxformer.cli.build_parser``, ``syntaxformer.parser.load_parser``, ``Parser.check``,
  ``Parser.parse_tokens``), so the code runs unchanged:

  1. ``interpreter``: spawn to the first line of the script (Python, ``site``);
  2. ``import syntaxformer.cli``: the package root and what it imports (torch, transformers, nltk, the
     models, the parser);
  3. ``command line``: ``build_parser`` and argument parsing (importing the command modules);
  4. ``parse command imports + input``: importing the workflow ``parse`` needs, reading standard input;
  5. ``load model``: ``load_parser`` up to its check (``from_pretrained``, tokenizer, decoder settings);
  6. ``first forward``: ``Parser.check``, the model's first forward pass (a three-word sentence);
  7. ``parse sentence``: ``Parser.parse_tokens`` on the sentence (the second forward, decoding);
  8. ``write outputs``: the rest of ``main`` (``trees.txt``, the printed line);
  9. ``exit``: ``main``'s return to the process's end (interpreter teardown).

One more run with ``python -X importtime`` gives the top cumulative imports and the import time per
top-level package (self times summed). ``--compare-ref GITREF`` measures a ``git worktree`` of that
commit the same way (``PYTHONPATH`` = the worktree, same interpreter and packages), alternating with
the working tree, and checks that both write the same ``trees.txt``.

    .venv/bin/python -m benchmarks.speed.parse_startup --repeats 5 --compare-ref HEAD~1

Writes ``records/benchmarks/parse-startup.json`` (``--out``) and prints a table. The machine is shared:
the report records the load average before and after; compare only numbers from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import RECORDS, ROOT

SENTENCE = "The old man sat on the bench ."

PHASES = [
    "interpreter",
    "import syntaxformer.cli",
    "command line",
    "parse command imports + input",
    "load model",
    "first forward",
    "parse sentence",
    "write outputs",
    "exit",
]

#: The in-process run: timestamps (time.time(), shared with the parent) at each phase boundary.
CHILD = r"""
import time, sys, json
marks = {"start": time.time()}
import syntaxformer.cli as cli
marks["cli"] = time.time()
import syntaxformer.parser as sp

def wrap(owner, name, before, after):
    inner = getattr(owner, name)
    def wrapped(*a, **k):
        marks.setdefault(before, time.time())
        try:
            return inner(*a, **k)
        finally:
            marks.setdefault(after, time.time())
    setattr(owner, name, wrapped)

wrap(cli, "build_parser", "build", "built")
wrap(sp, "load_parser", "load", "loaded")
wrap(sp.Parser, "check", "check", "checked")
wrap(sp.Parser, "parse_tokens", "parse", "parsed")
marks["main"] = time.time()
code = cli.main()  # argv None, as the entry point calls it
marks["end"] = time.time()
import torch
info = {"torch": torch.__version__, "threads": torch.get_num_threads(), "syntaxformer": cli.__file__}
print("@@" + json.dumps({"marks": marks, "info": info}), file=sys.stderr)
sys.stderr.flush()
sys.exit(code)
"""


def _env(source: Path | None) -> dict:
    env = dict(os.environ)
    if source is not None:  # a worktree of another commit, ahead of the editable install
        env["PYTHONPATH"] = str(source)
    return env


def _run(argv: list[str], env: dict, out: Path) -> tuple[float, float, str]:
    """Run ``argv`` with the sentence on stdin; (spawn time, end time, stderr). Fails loudly."""
    start = time.time()
    proc = subprocess.run(argv, input=SENTENCE + "\n", capture_output=True, text=True, env=env, cwd=out.parent)
    end = time.time()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return start, end, proc.stderr


def end_to_end(python: Path, source: Path | None, out: Path) -> float:
    """Seconds for the ``syntaxformer`` entry point to parse the sentence (spawn to exit)."""
    script = python.parent / "syntaxformer"
    start, end, _ = _run([str(python), str(script), "parse", "--input", "-", "--out", str(out)], _env(source), out)
    return end - start


def phases(python: Path, source: Path | None, out: Path) -> tuple[dict, dict]:
    """Seconds per phase (:data:`PHASES`) of one in-process run, and the child's torch information."""
    argv = [str(python), "-c", CHILD, "parse", "--input", "-", "--out", str(out)]
    start, end, stderr = _run(argv, _env(source), out)
    record = json.loads(next(line[2:] for line in stderr.splitlines() if line.startswith("@@")))
    m = record["marks"]
    bounds = [start, m["start"], m["cli"], m["built"], m["load"], m["check"], m["checked"], m["parsed"], m["end"], end]
    return {name: bounds[i + 1] - bounds[i] for i, name in enumerate(PHASES)}, record["info"]


def import_times(python: Path, source: Path | None, out: Path, top: int) -> dict:
    """``python -X importtime`` of the command: the top cumulative imports and seconds per top-level
    package (self times summed)."""
    argv = [str(python), "-X", "importtime", "-c", CHILD, "parse", "--input", "-", "--out", str(out)]
    _, _, stderr = _run(argv, _env(source), out)
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:") :].split("|")
        rows.append((name.strip(), int(self_us) / 1e6, int(cumulative_us) / 1e6))
    packages: dict[str, float] = {}
    for name, self_s, _ in rows:
        packages[name.split(".")[0]] = packages.get(name.split(".")[0], 0.0) + self_s
    cumulative = sorted(rows, key=lambda r: -r[2])[:top]
    return {
        "top_cumulative_s": [
            {"module": n, "cumulative_s": round(c, 3), "self_s": round(s, 3)} for n, s, c in cumulative
        ],
        "by_package_s": {k: round(v, 3) for k, v in sorted(packages.items(), key=lambda kv: -kv[1])[:top]},
        "total_s": round(sum(s for _, s, _ in rows), 3),
    }


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        # set here: the package's own modules are compiled from source in every process (no .pyc written)
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
    }


def measure(label: str, python: Path, source: Path | None, work: Path) -> dict:
    """One repeat of both kinds of run for one code version (called alternately per version)."""
    out_e2e, out_phases = work / f"{label}-e2e", work / f"{label}-phases"
    total = end_to_end(python, source, out_e2e)
    split, info = phases(python, source, out_phases)
    trees = (out_e2e / "trees.txt").read_text(encoding="utf-8")
    return {"total": total, "phases": split, "info": info, "trees": trees}


def summarise(runs: list[dict]) -> dict:
    return {
        "end_to_end_s": {
            "median": round(statistics.median(r["total"] for r in runs), 3),
            "runs": [round(r["total"], 3) for r in runs],
        },
        "phases_median_s": {p: round(statistics.median(r["phases"][p] for r in runs), 3) for p in PHASES},
        "phases_runs_s": {p: [round(r["phases"][p], 3) for r in runs] for p in PHASES},
        "phases_total_median_s": round(statistics.median(sum(r["phases"].values()) for r in runs), 3),
        "torch": runs[0]["info"]["torch"],
        "threads_in_parse": runs[0]["info"]["threads"],
        "code": runs[0]["info"]["syntaxformer"],
    }


def worktree(ref: str, parent: Path) -> Path:
    path = parent / "ref"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), ref], check=True, capture_output=True
    )
    return path


def print_table(report: dict) -> None:
    versions = report["versions"]
    names = list(versions)
    print(f"{'phase (median s)':34}" + "".join(f"{n:>14}" for n in names))
    for phase in PHASES:
        print(f"{phase:34}" + "".join(f"{versions[n]['phases_median_s'][phase]:14.2f}" for n in names))
    print(f"{'sum of phases':34}" + "".join(f"{versions[n]['phases_total_median_s']:14.2f}" for n in names))
    print(
        f"{'end to end (syntaxformer parse)':34}"
        + "".join(f"{versions[n]['end_to_end_s']['median']:14.2f}" for n in names)
    )
    if "ratio_end_to_end" in report:
        print(f"ratio end to end (working tree / {report['reference']}): {report['ratio_end_to_end']:.2f}")
    print(f"load average before/after: {report['load_average']['before']} / {report['load_average']['after']}")
    print("top cumulative imports (working tree):")
    for row in versions[names[0]]["imports"]["top_cumulative_s"]:
        print(f"  {row['cumulative_s']:7.2f}  {row['module']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="fresh processes per kind of run and version")
    ap.add_argument("--compare-ref", help="a git ref to measure as well (git worktree + PYTHONPATH)")
    ap.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    ap.add_argument("--top", type=int, default=15, help="imports and packages to list")
    ap.add_argument("--out", default=str(RECORDS / "benchmarks" / "parse-startup.json"))
    ap.add_argument("--seed", type=int, default=0, help="recorded; the parse is deterministic (seed 0 as the CLI)")
    args = ap.parse_args(argv)
    python = Path(args.python)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sources = {"working tree": None}
        if args.compare_ref:
            sources[args.compare_ref] = worktree(args.compare_ref, work)
        try:
            load_before = [round(x, 2) for x in os.getloadavg()]
            runs: dict[str, list] = {label: [] for label in sources}
            for i in range(args.repeats):  # alternate versions: both see the same load
                for j, (label, source) in enumerate(sources.items()):
                    runs[label].append(measure(f"{j}-{i}", python, source, work))
            versions = {label: summarise(r) for label, r in runs.items()}
            for j, (label, source) in enumerate(sources.items()):
                versions[label]["imports"] = import_times(python, source, work / f"{j}-importtime", args.top)
            load_after = [round(x, 2) for x in os.getloadavg()]
        finally:
            if args.compare_ref:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(sources[args.compare_ref])]
                )
    trees = {r["trees"] for rs in runs.values() for r in rs}
    report = {
        "what": "wall time of `syntaxformer parse --input - --out DIR` for one sentence with the shipped parser",
        "data": {"sentence": SENTENCE, "model": "the shipped parser (syntaxformer/pretrained)"},
        "protocol": f"fresh processes, {args.repeats} repeats per kind of run and version, alternating "
        "versions; medians; phases from timestamps in process (benchmarks/speed/parse_startup.py)",
        "seed": args.seed,
        "machine": machine(),
        "load_average": {"before": load_before, "after": load_after},
        "note": "shared machine, busy during the run (other jobs and a background training job): "
        "absolute times vary with the load; compare versions within this run only",
        "outputs_identical": len(trees) == 1,
        "trees": sorted(trees),
        "versions": versions,
    }
    if args.compare_ref:
        report["reference"] = args.compare_ref
        ref, new = versions[args.compare_ref], versions["working tree"]
        report["ratio_end_to_end"] = round(new["end_to_end_s"]["median"] / ref["end_to_end_s"]["median"], 3)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print_table(report)
    if len(trees) != 1:
        print("OUTPUTS DIFFER between runs or versions", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
