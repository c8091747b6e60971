"""Training-step speed and peak memory: Tree Transformer vs a plain Transformer (issues 3 and 5).

For each sequence length N, one forward+backward MLM training step (15% of positions labelled,
logits only there, as the trainer does) is timed for these models of the same size, interleaved
(one step of each in turn, ``--repeats`` rounds, median per model):

* ``plain/sdpa``  -- ``prior="none"``, ``attn_implementation="sdpa"`` (PyTorch fused attention);
* ``tree/sdpa``   -- Tree Transformer, ``attn_implementation="sdpa"``;
* ``plain/eager`` -- ``prior="none"``, eager attention;
* ``tree/eager``  -- Tree Transformer, eager (the literal reference);
* ``tree/cubic``  -- FOR CONTRAST ONLY: the constituent prior built as the authors' public code does,
  with two N×N×N triangular matrix products per sentence (re-implemented here, benchmark only; the
  library never does this), eager attention.

Ratios are to the plain Transformer with the same backend (cubic: to plain/eager). Memory is the
process's peak resident memory during one step above its resident memory before it (Linux
``/proc/self/status`` VmHWM after resetting it via ``/proc/self/clear_refs``): it counts everything
the step allocates (activations of the whole model, not only the prior), and is only as exact as the
allocator's reuse of freed pages; "n/a" where the kernel does not allow the reset.

Usage: ``python benchmarks/attention_speed.py --preset small --lengths 64 256 --repeats 5``
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from syntaxformer.cli import prepare_process
from syntaxformer.models import make_config, MODELS
from syntaxformer.priors.constituent import ConstituentPrior


class CubicPrior(ConstituentPrior):
    """log C built as the public code does: log-links on the super-diagonal, then ``t = L @ T`` and
    ``T @ t`` with the upper-triangular ones matrix ``T`` (two N×N×N products). Benchmark only."""

    def __init__(self, state: ConstituentPrior):
        super().__init__(state.cum_log_links, state.variant, state.log_diagonal)

    def log_prior(self):
        cum = self.cum_log_links
        n = cum.shape[-1]
        log_links = cum[:, 1:] - cum[:, :-1]  # (B, N-1)
        tri = torch.triu(torch.ones(n, n, dtype=cum.dtype, device=cum.device))
        superdiag = torch.diag_embed(log_links, offset=1)  # (B, N, N)
        upper = tri @ (superdiag @ tri)  # (B, N, N): sum_{k=i}^{j-1} log a_k for i < j
        upper = upper.masked_fill(tri.bool().logical_not() | torch.eye(n, dtype=torch.bool), 0.0)
        return upper + upper.transpose(-1, -2)  # log C, 0 on the diagonal (paper variant)


def use_cubic_prior(model):
    for layer in model.tree_transformer.layers:
        module = layer.constituent
        original = module.prior_state

        def prior_state(hidden, mask=None, prior=None, _original=original):
            state, a = _original(hidden, mask, prior)
            return CubicPrior(state), a

        module.prior_state = prior_state


def peak_rss_delta(step) -> float | None:
    """MiB of peak resident memory above the current one while running ``step()`` (Linux only)."""
    def status(key):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) / 1024
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        step()
        return None
    before = status("VmRSS:")
    step()
    return status("VmHWM:") - before


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 1024, 2048])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=4096, help="tokens per batch (batch = tokens // N, >= 1)")
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-cubic-above", type=int, default=1024,
                        help="skip the N×N×N contrast above this length (it is slow)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    # flush denormals before any tensor work, so PyTorch's worker threads inherit it (DESIGN.md §5;
    # the library no longer sets it at import, and the model's forward sets it for the calling thread only)
    prepare_process()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    names = ["plain/sdpa", "tree/sdpa", "plain/eager", "tree/eager", "tree/cubic"]
    models = {}
    for name in names:
        prior_name, impl = name.split("/")
        config = make_config("tree-transformer", args.preset, args.vocab,
                             prior="none" if prior_name == "plain" else "constituent",
                             attn_implementation="eager" if impl == "cubic" else impl)
        torch.manual_seed(args.seed)
        model = MODELS["tree-transformer"](config).train()
        if impl == "cubic":
            use_cubic_prior(model)
        models[name] = model

    rows = []
    for n in args.lengths:
        batch = max(1, args.tokens // n)
        g = torch.Generator().manual_seed(args.seed)
        ids = torch.randint(5, args.vocab, (batch, n), generator=g)
        labels = torch.where(torch.rand(batch, n, generator=g) < 0.15, ids, torch.full_like(ids, -100))
        active = [m for m in names if not (m == "tree/cubic" and n > args.skip_cubic_above)]

        def step(name):
            model = models[name]
            model.zero_grad(set_to_none=True)
            model(ids, labels=labels, masked_only=True).loss.backward()

        memory = {name: peak_rss_delta(lambda: step(name)) for name in active}  # also the warm-up
        times = {name: [] for name in active}
        for _ in range(args.repeats):
            for name in active:  # alternating the models
                t0 = time.perf_counter()
                step(name)
                times[name].append(time.perf_counter() - t0)
        median = {name: statistics.median(ts) for name, ts in times.items()}
        for name in active:
            base = "plain/eager" if name == "tree/cubic" else f"plain/{name.split('/')[1]}"
            rows.append(dict(N=n, batch=batch, model=name, step_ms=1000 * median[name],
                             ratio=median[name] / median[base], peak_mib=memory[name]))

    meta = dict(preset=args.preset, threads=args.threads, tokens_per_batch=args.tokens, repeats=args.repeats,
                seed=args.seed, torch=torch.__version__, device="cpu", cpu_count=os.cpu_count())
    if args.json:
        print(json.dumps(dict(meta=meta, rows=rows), indent=1))
        return
    print(f"preset {args.preset}, {args.threads} thread(s), ~{args.tokens} tokens/batch, median of "
          f"{args.repeats}, forward+backward MLM step (15% labelled), seed {args.seed}, torch {torch.__version__}")
    print(f"{'N':>5} {'batch':>5}  {'model':<12} {'step ms':>9} {'ratio':>6} {'peak MiB':>9}")
    for r in rows:
        mem = "n/a" if r["peak_mib"] is None else f"{r['peak_mib']:.0f}"
        print(f"{r['N']:>5} {r['batch']:>5}  {r['model']:<12} {r['step_ms']:>9.1f} {r['ratio']:>6.2f} {mem:>9}")
    print("ratio: time / plain Transformer with the same backend (tree/cubic: / plain/eager)")


if __name__ == "__main__":
    main()
