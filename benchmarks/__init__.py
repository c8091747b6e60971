"""The scripts behind the measurements of ``records/`` and ``docs/results/``: speed scripts (:mod:`benchmarks.speed`), one folder per
study (:mod:`benchmarks.studies`) and the tools they share (:mod:`benchmarks.tools`: the job runner, the
results tables, machine-independent records). Run a script from the repository root as a module, e.g.
``python -m benchmarks.speed.train_step --help``; ``benchmarks/README.md`` is the index."""

from pathlib import Path

#: the repository root: ``docs/``, ``records/`` and ``runs/`` are below it, the shared corpora in ``../shared/data``
ROOT = Path(__file__).resolve().parent.parent
#: the runs' JSON reports and curves the results tables are written from, one folder per study
RECORDS = ROOT / "records"
#: the results pages, one per study (``docs/results/STUDY.md``), and the figures they show (``docs/results/STUDY/``)
RESULTS = ROOT / "docs" / "results"
