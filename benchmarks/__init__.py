"""The scripts behind the measurements of ``docs/``: speed scripts (:mod:`benchmarks.speed`), one folder per
study (:mod:`benchmarks.studies`) and the tools they share (:mod:`benchmarks.tools`: the job runner, the
results tables, machine-independent records). Run a script from the repository root as a module, e.g.
``python -m benchmarks.speed.train_step --help``; ``benchmarks/README.md`` is the index."""

from pathlib import Path

#: the repository root: ``docs/`` and ``runs/`` are below it, the shared corpora in ``../shared/data``
ROOT = Path(__file__).resolve().parent.parent
