"""Tools shared by the speed scripts and the studies: :mod:`~benchmarks.tools.jobs` (the one job runner),
:mod:`~benchmarks.tools.results_tables` (the command; the tables are :mod:`benchmarks.tools.results`),
:mod:`~benchmarks.tools.portable`, :mod:`~benchmarks.tools.summarise_induce`."""
