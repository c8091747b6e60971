"""Every results table of ``README.md`` and ``docs/results/``, written from the JSON reports in the
repository's ``records/`` (one folder per study: ``records/induce/``, ``records/logic/``, ``records/heads/``,
``records/nli/``, ``records/priors/``, ``records/benchmarks/`` ...), never copied by hand.

    python -m benchmarks.tools.results_tables            # rewrite the tables in place
    python -m benchmarks.tools.results_tables --check    # exit 1 and name the pages that differ

A table lives between two marker comments, ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``;
:data:`TABLES` maps ``NAME`` to the function that writes it. Everything outside the markers is left as
it is. ``tests/docs/test_results_pages.py`` regenerates the tables in memory and fails when a page differs.

This module is the command; it also writes the tables of ``docs/guide/parse.md`` and
``benchmarks/speed/README.md``. The tables are the package :mod:`benchmarks.tools.results`: its ``core``
(the pages, the registry, the readers, the catalogue of induce groups ``records/induce/manifest.json``) and
one module per page or family of tables, all imported here so that :data:`TABLES` is complete.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks import ROOT
from benchmarks.tools.results.accelerator import gpu_step_table, gpu_step_targets
from benchmarks.tools.results.core import MARKER, PAGES, TABLES, mean_sd, render, span, stale_pages
from benchmarks.tools.results.induce_paper import induce_tree_transformer_paper, longer_runs, shorter_twin

__all__ = [
    "MARKER",
    "PAGES",
    "TABLES",
    "gpu_step_table",
    "gpu_step_targets",
    "induce_tree_transformer_paper",
    "longer_runs",
    "main",
    "mean_sd",
    "render",
    "shorter_twin",
    "span",
    "stale_pages",
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs")
    args = parser.parse_args(argv)
    stale = stale_pages()
    if args.check:
        for page in stale:
            print(
                f"{page.relative_to(ROOT)}: tables differ from the reports (run python -m benchmarks.tools.results_tables)"
            )
        return 1 if stale else 0
    for page in stale:
        page.write_text(render(page.read_text(encoding="utf-8"), str(page)), encoding="utf-8")
        print(f"rewrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
