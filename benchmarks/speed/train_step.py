"""Time a training step of the default ``induce`` recipe: Tree Transformer vs plain Transformer vs faster paths.

Each variant is the ptb-sample recipe's model (``SAMPLE`` of
:mod:`syntaxformer.recipes.tree_transformer`, the ``default`` recipe's setting on ptb-sample alone: the
``mini`` preset, batch 64, the official constituent variant), built and trained by the project's own :class:`~syntaxformer.tasks.language_model.Trainer` on the
embedded ptb-sample (real batches of its length-bucketed sampler, masked LM with ``masked_only`` logits,
Adam, gradient clipping, the schedule): one timed unit is ``Trainer.training_step`` (masking,
forward, backward, clip, Adam). Every variant starts from the same seed and sees the same batches.

Protocol: the variants are measured *alternately* (the machine's speed drifts; ``--background`` records
its load): round r times one step of every variant on round r's batch, in turn (the order rotated each
round), after ``--warmup`` untimed steps each; the reported time is the median over rounds, and every
ratio is between medians of the same run. The paired ratios (``paired_*``) take, round by round, two
variants' times on that round's batch and report the median of their ratio: the batches' lengths
cancel (a step takes 35-135 ms across rounds), so they are the steadier figure. FLOPs per step come from
``torch.utils.flop_counter.FlopCounterMode`` (forward + backward, one step), the peak from a
2048x2048 float32 matmul on the same threads (median of 5).

Variants (``--variants``, comma-separated; default all):

``tree``        today's Tree Transformer (``prior="constituent"``, the default config, Adam ``fused``,
                the dropout masks of :mod:`syntaxformer.kernels.dropout` for hidden states and attention).
``plain``       the plain Transformer (``prior="none"``), same model otherwise (its attention is
                PyTorch's ``scaled_dot_product_attention``, whose CPU dropout draws ``bernoulli_`` masks).
``tree-torch-dropout``  ``tree`` with ``torch.nn.Dropout`` (its ``bernoulli_`` mask) for the hidden-state
                dropout, as before :mod:`syntaxformer.blocks.dropout`.
``plain-torch-dropout`` ``plain`` likewise.
``tree-rand-attention-mask``  ``tree`` with the attention-dropout mask drawn as ``torch.rand(...) < 1 - p``
                (one float draw per element), as before the attention kernels drew theirs from
                :mod:`syntaxformer.kernels.dropout`.
``tree-last``   ``tree`` as the trainers ran it before the fused Adam and the shared attention masks: Adam
                ``foreach`` and ``torch.rand`` attention masks.
``tree-before``  ``tree`` as the trainers ran it before this work: torch's dropout, ``torch.rand`` attention
                masks and Adam's per-tensor loop.
``tree-fused``  ``kernel="fused"``: the constituent prior's link chain (eqs. 6-8 and ``P``) as
                one autograd function with a hand-written backward (:mod:`syntaxformer.kernels.constituent`).
``tree-compile`` ``tree-fused`` with the model's forward under ``torch.compile`` (skipped when
                compilation fails on this machine; the failure is recorded).
``tree-bf16``   ``tree-fused`` under bfloat16 autocast.
``tree-adam-loop``  ``tree`` with Adam's per-tensor loop (torch's CPU default).
``tree-adam-foreach`` ``tree`` with Adam's multi-tensor form (``foreach=True``).
``structformer`` StructFormer's default ``induce`` recipe (``mini``, batch 64) as the trainers run it today
                (the same dropout masks and fused Adam as ``tree``; its own data path and masking).
``structformer-before`` the same with torch's dropout and Adam's per-tensor loop, as before this work.

Usage::

    python -m benchmarks.speed.train_step --threads 2 --steps 20 --seed 0 --out records/benchmarks/train-step.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from syntaxformer.blocks.dropout import Dropout
from syntaxformer.kernels import attention as attention_kernels
from syntaxformer.priors import attention
from syntaxformer.runtime import code_version
from syntaxformer.tasks.language_model import Trainer
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.workflows.induce import RECIPES, resolve_recipe

LOOP_ADAM = {"fused": False, "foreach": False}
FOREACH_ADAM = {"fused": False, "foreach": True}
VARIANTS = {
    "tree": dict(overrides={}),
    "plain": dict(overrides={"prior": "none"}),
    "tree-fused": dict(overrides={"kernel": "fused"}),
    "tree-compile": dict(overrides={"kernel": "fused"}, compile=True),
    "tree-bf16": dict(overrides={"kernel": "fused"}, bf16=True),
    "tree-adam-loop": dict(overrides={}, adam=LOOP_ADAM),
    "tree-adam-foreach": dict(overrides={}, adam=FOREACH_ADAM),
    "tree-torch-dropout": dict(overrides={}, torch_dropout=True),
    "plain-torch-dropout": dict(overrides={"prior": "none"}, torch_dropout=True),
    "tree-rand-attention-mask": dict(overrides={}, rand_attention_mask=True),
    "tree-last": dict(overrides={}, adam=FOREACH_ADAM, rand_attention_mask=True),
    "tree-before": dict(overrides={}, torch_dropout=True, adam=LOOP_ADAM, rand_attention_mask=True),
    "structformer": dict(overrides={}, model="structformer"),
    "structformer-before": dict(overrides={}, model="structformer", torch_dropout=True, adam=LOOP_ADAM),
}


@contextlib.contextmanager
def attention_masks(name: str):
    """The variant's attention-dropout masks: :mod:`syntaxformer.kernels.dropout`'s, or for
    ``rand_attention_mask`` variants the earlier ``torch.rand(...) < 1 - p`` with scale ``1/(1-p)``."""
    if not VARIANTS[name].get("rand_attention_mask"):
        yield
        return
    modules = (attention, attention_kernels)  # the eager reference and the blockwise kernel
    saved = [(module.drop_mask, module.keep_scale) for module in modules]
    for module in modules:
        module.drop_mask = lambda shape, p, device: torch.rand(shape, device=device) >= 1.0 - p
        module.keep_scale = lambda p, device: 1.0 / (1.0 - p)
    try:
        yield
    finally:
        for module, (mask, scale) in zip(modules, saved):
            module.drop_mask, module.keep_scale = mask, scale


def run_step(name: str, trainer: Trainer, batch):
    """One ``Trainer.training_step`` of the variant (with its attention masks)."""
    with attention_masks(name):
        return trainer.training_step(batch)


def build_trainer(name: str, seed: int, threads: int) -> Trainer:
    """A built Trainer of the default recipe with the variant's config fields (its own temp folder)."""
    spec = VARIANTS[name]
    model = spec.get("model", "tree-transformer")
    # the recipe on ptb-sample's words (the Tree Transformer's former default, ``sample``), as recorded
    fields, recipe_overrides, _ = resolve_recipe(model, "sample" if "sample" in RECIPES[model] else "default")
    overrides = {**recipe_overrides, **spec["overrides"]}
    fields.update(seed=seed, threads=threads, quiet=True, bf16=spec.get("bf16", False))
    args = TrainArguments(
        out=tempfile.mkdtemp(prefix=f"train-step-{name}-"), model=model, overrides=overrides, **fields
    )
    trainer = Trainer(args)
    trainer.build()
    trainer.model.train()
    if spec.get("adam"):  # another Adam implementation: the per-tensor loop, or the multi-tensor form
        for group in trainer.optimizer.param_groups:
            group.update(spec["adam"])
    if spec.get("torch_dropout"):  # the hidden-state dropout as torch's own module (bernoulli_ masks)
        for module in list(trainer.model.modules()):
            for child_name, child in list(module.named_children()):
                if isinstance(child, Dropout):
                    setattr(module, child_name, torch.nn.Dropout(child.p))
    if spec.get("compile"):
        trainer.ddp_model = torch.compile(trainer.model, dynamic=True)
    return trainer


def matmul_peak_gflops(size: int = 2048, repeats: int = 5) -> float:
    """Measured float32 matmul rate (GFLOP/s): median of ``repeats`` ``size``² products."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return 2 * size**3 / statistics.median(times) / 1e9


def step_flops(name: str, trainer: Trainer, batch) -> int:
    """FLOPs of one training step (forward + backward; Adam's elementwise work is not counted)."""
    with FlopCounterMode(display=False) as counter:
        run_step(name, trainer, batch)
    return counter.get_total_flops()


def paired_ratio(numerator: list[float], denominator: list[float]) -> float:
    """Median over rounds of ``numerator[r] / denominator[r]`` (both variants timed on round r's batch)."""
    return round(statistics.median(a / b for a, b in zip(numerator, denominator)), 3)


def measure(names: list[str], steps: int, warmup: int, seed: int, threads: int) -> dict:
    """Build every variant, warm each up, then time ``steps`` rounds of one step per variant."""
    torch.set_num_threads(threads)
    trainers, errors = {}, {}
    for name in names:
        try:
            trainers[name] = build_trainer(name, seed, threads)
        except Exception as e:  # noqa: BLE001 - a variant that cannot run is recorded, not fatal
            errors[name] = f"{type(e).__name__}: {e}"
    batches = next(iter(trainers.values())).sampler.batches(0)
    for name, trainer in list(trainers.items()):
        try:
            for i in range(warmup):
                run_step(name, trainer, batches[i % len(batches)])
        except Exception as e:  # noqa: BLE001 - e.g. torch.compile without a working C compiler
            errors[name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            del trainers[name]
    order = list(trainers)
    times = {name: [] for name in order}
    losses = {name: [] for name in order}
    for r in range(steps):
        batch = batches[(warmup + r) % len(batches)]
        for name in order[r % len(order) :] + order[: r % len(order)]:
            t0 = time.perf_counter()
            out = run_step(name, trainers[name], batch)
            times[name].append(time.perf_counter() - t0)
            losses[name].append(out.loss)
    flops = {name: step_flops(name, t, batches[0]) for name, t in trainers.items() if name not in ("tree-compile",)}
    return dict(times=times, losses=losses, flops=flops, errors=errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20, help="timed rounds (one step of every variant each)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--background", default="two background training jobs, 1 thread each (shared 2-core machine)")
    parser.add_argument("--out", type=Path)
    a = parser.parse_args()
    names = a.variants.split(",")
    result = measure(names, a.steps, a.warmup, a.seed, a.threads)
    peak = matmul_peak_gflops()
    ms = {n: 1000 * statistics.median(t) for n, t in result["times"].items()}
    times = result["times"]
    rows = {}
    for name, value in ms.items():
        flops = result["flops"].get(name, result["flops"].get("tree-fused"))
        rows[name] = dict(
            ms_per_step=round(value, 1),
            ms_per_step_min=round(1000 * min(result["times"][name]), 1),
            ratio_to_plain=round(value / ms["plain"], 3) if "plain" in ms else None,
            ratio_to_tree=round(value / ms["tree"], 3) if "tree" in ms else None,
            speedup_over_tree=round(ms["tree"] / value, 3) if "tree" in ms else None,
            paired_ratio_to_plain=paired_ratio(times[name], times["plain"]) if "plain" in ms else None,
            paired_speedup_over_tree=paired_ratio(times["tree"], times[name]) if "tree" in ms else None,
            gflop_per_step=round(flops / 1e9, 2) if flops else None,
            share_of_peak=round(flops / (value / 1000) / 1e9 / peak, 3) if flops else None,
            mean_loss=round(statistics.mean(result["losses"][name]), 4),
        )
    report = dict(
        benchmark="train_step",
        data="ptb-sample (embedded), the default induce recipe's training text and vocabulary",
        protocol=(
            "Trainer.training_step (masking, forward, backward, clip, Adam) of the default induce recipe "
            f"(mini, batch 64, masked_only); {a.warmup} warm-up steps per variant, then {a.steps} rounds of one "
            "step per variant, interleaved (order rotated each round); median ms per variant; ratios of medians "
            "of this run, and paired ratios (the median over rounds of the two variants' times on the round's "
            "batch: batches of different lengths cancel)"
        ),
        seed=a.seed,
        threads=a.threads,
        background_load=a.background,
        torch=torch.__version__,
        python=platform.python_version(),
        cpu=platform.processor() or platform.machine(),
        code=code_version(),
        matmul_peak_gflops=round(peak, 1),
        variants=rows,
        errors=result["errors"],
        losses={n: [round(x, 4) for x in v] for n, v in result["losses"].items()},
    )
    text = json.dumps(report, indent=2)
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
