"""The inside algorithm's cost: ours (vectorised over starts and split points per width) against the
authors' formulation (one Python loop over spans and split points, as harvardnlp/compound-pcfg's
``PCFG._inside``), forward + backward of ``log Z`` for one batch, same grammar, same inputs.

    .venv/bin/python -m benchmarks.speed.pcfg_inside --out records/induce/pcfg-inside-speed.json

Setting: the ``cpu`` recipe's grammar (10 nonterminals, 20 preterminals), a batch of 32 sentences of
30 words, random rule scores (log-softmax of normal draws), float32, ``--threads`` CPU threads. The
loop formulation below is written here from the authors' description of the algorithm (their chart
indexed ``[start, end, state]`` with every state; the children's sum a ``logsumexp`` over the flattened
``(B, C)`` pairs per split point); both give the same ``log Z`` (checked). Medians of ``--repeats`` runs
after one warm-up; the ratio is the figure to read (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from syntaxformer.blocks.inside import inside
from syntaxformer.runtime import code_version


def loop_inside(emissions, rules, roots):
    """``log Z`` by one Python loop over widths, starts and split points (the authors' formulation)."""
    batch, n, t = emissions.shape
    nt = rules.shape[1]
    states = nt + t
    beta = [[None] * (n + 1) for _ in range(n + 1)]  # beta[s][e]: (B, A) for span s..e-1
    for s in range(n):
        beta[s][s + 1] = torch.cat([emissions.new_full((batch, nt), float("-inf")), emissions[:, s]], -1)
    for w in range(2, n + 1):
        for s in range(n - w + 1):
            e = s + w
            parts = []
            for k in range(s + 1, e):
                scores = beta[s][k][:, None, :, None] + beta[k][e][:, None, None, :] + rules  # (B, NT, A, A)
                parts.append(scores.flatten(2).logsumexp(-1))
            top = torch.stack(parts, -1).logsumexp(-1)  # (B, NT)
            beta[s][e] = torch.cat([top, top.new_full((batch, states - nt), float("-inf"))], -1)
    return (beta[0][n][:, :nt] + roots).logsumexp(-1)


def timed(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--length", type=int, default=30)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    nt, t, b, n = 10, 20, args.batch, args.length
    a = nt + t
    rules0 = torch.randn(1, nt, a * a, generator=g).log_softmax(-1).view(1, nt, a, a)
    roots0 = torch.randn(1, nt, generator=g).log_softmax(-1)
    emissions0 = torch.randn(b, n, t, generator=g) - 3.0
    lengths = torch.full((b,), n)

    def run(fn):
        def step():
            e, r, ro = (x.clone().requires_grad_() for x in (emissions0, rules0, roots0))
            fn(e, r, ro).sum().backward()

        return step

    ours = run(lambda e, r, ro: inside(e, r, ro, lengths))
    theirs = run(loop_inside)
    with torch.no_grad():
        same = torch.allclose(inside(emissions0, rules0, roots0, lengths), loop_inside(emissions0, rules0, roots0))
    t_ours, t_theirs = timed(ours, args.repeats), timed(theirs, args.repeats)
    record = {
        "what": "inside algorithm, forward + backward of log Z, one batch",
        "setting": {"nonterminals": nt, "preterminals": t, "batch": b, "words": n, "dtype": "float32"},
        "ours_seconds": round(t_ours, 4),
        "loop_formulation_seconds": round(t_theirs, 4),
        "ratio_loop_over_ours": round(t_theirs / t_ours, 2),
        "same_log_z": bool(same),
        "device": f"CPU {platform.processor() or platform.machine()}, {args.threads} threads of {os.cpu_count()} cores",
        "load_average": os.getloadavg(),
        "code": code_version(),
        "torch": torch.__version__,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    json.dump(record, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
