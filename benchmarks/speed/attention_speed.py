"""Training-step speed and peak memory: Tree Transformer vs a plain Transformer.

For each sequence length N, one forward+backward MLM training step (15% of positions labelled,
logits only there, as the trainer does) is timed for these models of the same size, interleaved
(one step of each in turn, ``--repeats`` rounds, median per model):

* ``plain/sdpa``  -- ``prior="none"``, ``attn_implementation="sdpa"`` (PyTorch fused attention);
* ``tree/sdpa``   -- Tree Transformer, ``attn_implementation="sdpa"`` (our kernel,
  ``BlockwisePriorAttention``: keeps the attention for the backward up to
  ``SAVE_ATTENTION_ELEMENTS`` per layer, recomputes it block by block above);
* ``tree/blocks`` -- the same kernel forced to recompute at every N (memory linear in N);
* ``plain/eager`` -- ``prior="none"``, eager attention;
* ``tree/eager``  -- Tree Transformer, eager (the literal reference);
* ``tree/cubic``  -- FOR CONTRAST ONLY: the constituent prior built as the authors' public code does,
  with two N×N×N triangular matrix products per sentence (re-implemented here, benchmark only; the
  library never does this), eager attention.

Ratios are to the plain Transformer with the same backend (blocks: to plain/sdpa; cubic: to
plain/eager). Peak memory: the most memory that tensors allocated during one step occupy at once
(exact: on CPU the profiler's allocation events, ``torch.profiler.profile(profile_memory=True)``,
their running "Total Allocated"; on CUDA ``torch.cuda.max_memory_allocated``), measured in a separate
untimed step. The batch holds ``--tokens`` tokens (batch = tokens // N), so memory that grows
linearly with N per sentence stays constant down the table and memory quadratic in N grows ∝ N.

Usage: ``python -m benchmarks.speed.attention_speed --preset small --lengths 64 256 1024 2048 --repeats 5``
       ``python -m benchmarks.speed.attention_speed --device cuda --dtype bfloat16 --tokens 65536`` (GPU)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time

import torch

from syntaxformer.cli import prepare_process
from syntaxformer.kernels import attention
from syntaxformer.models import MODELS, make_config
from syntaxformer.priors.constituent import ConstituentPrior
from syntaxformer.runtime import code_version

NAMES = ["plain/sdpa", "tree/sdpa", "tree/blocks", "plain/eager", "tree/eager", "tree/cubic"]


class CubicPrior(ConstituentPrior):
    """log C built as the public code does: log-links on the super-diagonal, then ``t = L @ T`` and
    ``T @ t`` with the upper-triangular ones matrix ``T`` (two N×N×N products). Benchmark only."""

    def __init__(self, state: ConstituentPrior):
        super().__init__(state.cum_log_links, state.variant, state.log_diagonal)

    def log_prior(self, rows=None):
        assert rows is None, "the N×N×N contrast builds the whole prior (eager attention only)"
        cum = self.cum_log_links
        n = cum.shape[-1]
        log_links = cum[:, 1:] - cum[:, :-1]  # (B, N-1)
        tri = torch.triu(torch.ones(n, n, dtype=cum.dtype, device=cum.device))
        superdiag = torch.diag_embed(log_links, offset=1)  # (B, N, N)
        upper = tri @ (superdiag @ tri)  # (B, N, N): sum_{k=i}^{j-1} log a_k for i < j
        eye = torch.eye(n, dtype=torch.bool, device=cum.device)
        upper = upper.masked_fill(tri.bool().logical_not() | eye, 0.0)
        return upper + upper.transpose(-1, -2)  # log C, 0 on the diagonal (paper variant)


def use_cubic_prior(model):
    for layer in model.tree_transformer.layers:
        module = layer.constituent
        original = module.prior_state

        def prior_state(hidden, mask=None, prior=None, _original=original):
            state, a = _original(hidden, mask, prior)
            return CubicPrior(state), a

        module.prior_state = prior_state


@contextlib.contextmanager
def recompute_always(enabled: bool):
    """``tree/blocks``: the sdpa kernel recomputes its attention at every N (keeps nothing N×N)."""
    saved = attention.SAVE_ATTENTION_ELEMENTS
    if enabled:
        attention.SAVE_ATTENTION_ELEMENTS = -1
    try:
        yield
    finally:
        attention.SAVE_ATTENTION_ELEMENTS = saved


def peak_memory_mib(step, device: torch.device) -> float:
    """MiB: the most that tensors allocated during ``step()`` occupy at once (exact; see the docstring)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    totals = [
        e["args"]["Total Allocated"]
        for e in events
        if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0
    ]
    return max([0] + totals) / 2**20


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 1024, 2048])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=4096, help="tokens per batch (batch = tokens // N, >= 1)")
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "bfloat16"],
        help="bfloat16: autocast (mixed precision), weights float32",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", nargs="+", default=NAMES, choices=NAMES)
    parser.add_argument(
        "--skip-cubic-above", type=int, default=1024, help="skip the N×N×N contrast above this length (it is slow)"
    )
    parser.add_argument(
        "--save-attention-elements",
        type=int,
        default=attention.SAVE_ATTENTION_ELEMENTS,
        help="the sdpa kernel keeps (B, H, N, N) up to this size, recomputes above",
    )
    parser.add_argument(
        "--block-elements",
        type=int,
        default=attention.BLOCK_ELEMENTS,
        help="the sdpa kernel's block of scores when it recomputes",
    )
    parser.add_argument(
        "--attention-dropout",
        type=float,
        default=None,
        help="override the preset's attention dropout (0: PyTorch's CPU flash kernel, "
        "O(N) memory, serves plain/sdpa in training)",
    )
    parser.add_argument("--json", help="also write the results to this JSON file")
    return parser.parse_args(argv)


def build_models(args, device: torch.device) -> dict:
    """``{"prior/impl": model}`` in training mode, each initialised from ``args.seed``."""
    models = {}
    for name in args.models:
        prior_name, impl = name.split("/")
        config = make_config(
            "tree-transformer",
            args.preset,
            args.vocab,
            prior="none" if prior_name == "plain" else "constituent",
            attn_implementation={"cubic": "eager", "blocks": "sdpa"}.get(impl, impl),
            **({} if args.attention_dropout is None else dict(attention_probs_dropout_prob=args.attention_dropout)),
        )
        torch.manual_seed(args.seed)
        model = MODELS["tree-transformer"](config).train().to(device)
        if impl == "cubic":
            use_cubic_prior(model)
        models[name] = model
    return models


def measure_length(args, models: dict, n: int, device: torch.device, dtype: torch.dtype) -> list[dict]:
    """One row per model for sequences of ``n`` tokens: median step time, its ratio to the plain model
    of the same kernel, peak memory (MiB) and its excess over that plain model."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    batch = max(1, args.tokens // n)
    g = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(5, args.vocab, (batch, n), generator=g)
    labels = torch.where(torch.rand(batch, n, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    ids, labels = ids.to(device), labels.to(device)
    active = [m for m in models if not (m == "tree/cubic" and n > args.skip_cubic_above)]

    def step(name):
        model = models[name]
        model.zero_grad(set_to_none=True)
        with (
            recompute_always(name == "tree/blocks"),
            torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32),
        ):
            loss = model(ids, labels=labels, masked_only=True).loss
        loss.backward()

    for name in active:  # warm-up (and kernels' first-call costs), then the memory step
        step(name)
    memory = {}
    for name in active:
        models[name].zero_grad(set_to_none=True)
        memory[name] = peak_memory_mib(lambda: step(name), device)
    times = {name: [] for name in active}
    for _ in range(args.repeats):
        for name in active:  # alternating the models
            sync()
            t0 = time.perf_counter()
            step(name)
            sync()
            times[name].append(time.perf_counter() - t0)
    median = {name: statistics.median(ts) for name, ts in times.items()}
    rows = []
    for name in active:
        impl = name.split("/")[1]
        base = {"cubic": "plain/eager", "blocks": "plain/sdpa"}.get(impl, f"plain/{impl}")
        rows.append(
            dict(
                N=n,
                batch=batch,
                model=name,
                step_ms=1000 * median[name],
                ratio=median[name] / median[base] if base in median else None,
                peak_mib=memory[name],
                peak_over_plain_mib=memory[name] - memory[base] if base in memory else None,
            )
        )
    return rows


def main(argv=None):
    args = parse_args(argv)
    attention.SAVE_ATTENTION_ELEMENTS, attention.BLOCK_ELEMENTS = args.save_attention_elements, args.block_elements
    # flush denormals before any tensor work, so PyTorch's worker threads inherit it (DESIGN.md §5;
    # the library no longer sets it at import, and the model's forward sets it for the calling thread only)
    prepare_process()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    models = build_models(args, device)
    rows = []
    for n in args.lengths:
        rows += measure_length(args, models, n, device, getattr(torch, args.dtype))
        if args.json:  # after each length: a long run keeps what it measured
            write_json(args, rows)
    print_table(args, rows)


def meta(args) -> dict:
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({os.cpu_count()} cores)"
    return dict(
        preset=args.preset,
        attention_dropout=args.attention_dropout,
        threads=args.threads,
        tokens_per_batch=args.tokens,
        repeats=args.repeats,
        seed=args.seed,
        torch=torch.__version__,
        device=name,
        dtype=args.dtype,
        save_attention_elements=attention.SAVE_ATTENTION_ELEMENTS,
        block_elements=attention.BLOCK_ELEMENTS,
        step="forward+backward MLM step, 15% of positions labelled, logits only there",
        code=code_version(),
    )


def write_json(args, rows):
    with open(args.json, "w") as f:
        json.dump(dict(meta=meta(args), rows=rows), f, indent=1)


def print_table(args, rows):
    m = meta(args)
    dropout = "" if args.attention_dropout is None else f" (attention dropout {args.attention_dropout})"
    print(
        f"preset {args.preset}{dropout}, {m['device']}, {args.dtype}, {args.threads} CPU thread(s), "
        f"~{args.tokens} tokens/batch, median of {args.repeats}, {m['step']}, seed {args.seed}, "
        f"torch {torch.__version__}"
    )
    print(f"{'N':>5} {'batch':>5}  {'model':<12} {'step ms':>9} {'ratio':>6} {'peak MiB':>9} {'vs plain':>9}")
    for r in rows:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}"
        extra = "" if r["peak_over_plain_mib"] is None else f"{r['peak_over_plain_mib']:+.0f}"
        print(
            f"{r['N']:>5} {r['batch']:>5}  {r['model']:<12} {r['step_ms']:>9.1f} {ratio:>6} "
            f"{r['peak_mib']:>9.0f} {extra:>9}"
        )
    print(
        "ratio: time / plain Transformer with the same backend (tree/blocks: / plain/sdpa; "
        "tree/cubic: / plain/eager); vs plain: peak memory minus that plain Transformer's"
    )


if __name__ == "__main__":
    main()
