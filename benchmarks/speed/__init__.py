"""Speed and memory measurements (``benchmarks/README.md``, "Speed and memory"); tables in
``docs/results/speed.md``."""
