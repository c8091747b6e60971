"""The results tables of ``README.md``, ``docs/results/*.md``, ``docs/guide/parse.md`` and
``benchmarks/speed/README.md``, written from the JSON reports in the repository, never copied by hand;
``python -m benchmarks.tools.results_tables`` is the command that writes (or checks) them.

:mod:`~benchmarks.tools.results.core` holds what the tables share: the pages and their markers, the table
registry (``TABLES``, ``table``), the readers and cell formats, and the catalogue of induce groups
(``records/induce/manifest.json``: each group's key, labels and reports). Each other module writes the tables
of one page or one family of tables and registers them with ``@table``; importing this package imports
every one of them, so ``TABLES`` is complete:

- :mod:`~benchmarks.tools.results.readme`: ``README.md``'s one results table;
- :mod:`~benchmarks.tools.results.shipped`: ``docs/guide/parse.md``'s shipped parsers;
- :mod:`~benchmarks.tools.results.induce` and :mod:`~benchmarks.tools.results.induce_paper`:
  ``docs/results/induce.md``;
- :mod:`~benchmarks.tools.results.baselines`, :mod:`~benchmarks.tools.results.heads`,
  :mod:`~benchmarks.tools.results.logic`, :mod:`~benchmarks.tools.results.priors`,
  :mod:`~benchmarks.tools.results.probe`, :mod:`~benchmarks.tools.results.out_of_domain`,
  :mod:`~benchmarks.tools.results.ensemble`, :mod:`~benchmarks.tools.results.nli`,
  :mod:`~benchmarks.tools.results.compare`: the page of the same name under ``docs/results/`` (with the
  README's ensemble rows, and the logic and NLI speed tables of ``docs/results/speed.md``);
- :mod:`~benchmarks.tools.results.speed` and :mod:`~benchmarks.tools.results.accelerator`:
  ``docs/results/speed.md`` and ``benchmarks/speed/README.md``;
- :mod:`~benchmarks.tools.results.translation`: ``docs/results/translation.md``.
"""

from benchmarks.tools.results import (
    accelerator,
    baselines,
    compare,
    core,
    ensemble,
    heads,
    induce,
    induce_paper,
    logic,
    nli,
    out_of_domain,
    priors,
    probe,
    readme,
    shipped,
    speed,
    translation,
)

__all__ = [
    "accelerator",
    "baselines",
    "compare",
    "core",
    "ensemble",
    "heads",
    "induce",
    "induce_paper",
    "logic",
    "nli",
    "out_of_domain",
    "priors",
    "probe",
    "readme",
    "shipped",
    "speed",
    "translation",
]
