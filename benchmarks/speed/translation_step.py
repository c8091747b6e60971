"""Time the translation model's training step against ``torch.nn.Transformer`` of the same size and batch.

Rows, all built in one process and timed on the same batches:

``torch.nn.Transformer``  the reference: ``torch.nn.Transformer`` at the anchor's size (4+4 layers, d 128,
                FFN 256, 4 heads, dropout 0.3, pre-LN ``norm_first=True``, ``batch_first``) with one
                embedding table (× √d, sinusoidal positions, dropout) shared by source, target and the
                tied output projection, and the label-smoothed cross-entropy (ε 0.1) over the same
                vocabulary: :class:`ReferenceTransformer`.
``baseline`` ... ``on-lstm-san``  :class:`~syntaxformer.models.translation.TranslationModel` of each variant
                at the ``anchor`` preset (:data:`~syntaxformer.models.translation.VARIANTS`).

One step, the same for every row: the forward with the label-smoothed loss, ``zero_grad``, backward, one
Adam step (torch's fused Adam, lr 0.005, betas (0.9, 0.98), as ``translation train`` builds it). No
gradient clipping (the anchor's recipe has none) and no schedule (a scalar per step, the same for all).

Data: the Multi30k En→De training pairs (``../shared/data/multi30k/tok/train.lc.norm.tok.{en,de}``), the
joint BPE vocabulary of ``translation train`` (``--vocab-size`` 10,000, learnt on those pairs) and its
batches: :class:`~syntaxformer.data.batching.LengthBucketSampler` with 4,096 padded tokens (the longer
side), epoch 0, seed 0; the first ``--batches`` of them. The structured variants read the source
trees of the parsers ``translation train`` uses by default (structformer-ptb-lm's heads,
ensemble-ptb-lm's phrases at level 1), parsed for the sentences of those batches only and cached in
``--tree-cache``. Without the corpus (``--synthetic``, or the folder absent) the pairs are random ids
with Multi30k-like lengths and the structures right-branching (each word's head the next word; phrases
of two words), and the record says so.

Protocol, per ``--threads`` setting (default ``2,1``; ``torch.set_num_threads``): ``--warmup`` untimed
steps per row, then ``--rounds`` rounds; round r times one step of every row on batch r mod
``--batches``, the rows' order rotated each round. Per row: the median ms per step, target tokens/s
(the round's target tokens, ``</s>`` included, over its time; median over rounds), and two speed
ratios, each "the other's time / this row's" (≥ 1: this row at least as fast): against the reference
and against our baseline, from the medians and paired (median over rounds of the ratio on the same
batch, the steadier figure on a loaded machine); also the process's CPU ms per step
(``time.process_time``, all threads) and the paired ratio of CPU times (with one thread, what the
ratio would be on an idle core). Not a timed test: a machine's load changes the
times, the ratios of one run much less.

Usage::

    python -m benchmarks.speed.translation_step --threads 2,1 --rounds 10 \\
        --out records/benchmarks/translation-step.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from syntaxformer.data.batching import LengthBucketSampler
from syntaxformer.data.parallel import build_subwords, read_aligned
from syntaxformer.models.encoder import sinusoidal_positions
from syntaxformer.models.translation import PAD, PRESETS, VARIANTS, TranslationModel, translation_config
from syntaxformer.runtime import code_version
from syntaxformer.tasks.translation_data import (
    DEFAULT_PARSERS,
    EncodedPairs,
    encode_pairs,
    make_batch,
    piece_structure,
    source_structures,
    wrap_subwords,
)

MULTI30K = Path(os.environ.get("SYNTAXFORMER_SHARED_DATA", "../shared/data")) / "multi30k" / "tok"
REFERENCE = "torch.nn.Transformer"


class ReferenceTransformer(nn.Module):
    """``torch.nn.Transformer`` with a shared, tied embedding table and the label-smoothed loss.

    ``forward(input_ids (B, N), attention_mask (B, N), decoder_input_ids (B, T), labels (B, T))`` →
    the mean label-smoothed cross-entropy (nats per target token), as
    :class:`~syntaxformer.models.translation.TranslationModel` computes it.
    """

    def __init__(self, vocab_size: int, d_model: int, layers: int, heads: int, ffn: int, dropout: float):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        self.register_buffer("positions", sinusoidal_positions(256, d_model), persistent=False)
        self.scale = d_model**0.5
        self.dropout = nn.Dropout(dropout)
        self.transformer = nn.Transformer(
            d_model, heads, layers, layers, ffn, dropout, batch_first=True, norm_first=True
        )

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, N) ids → (B, N, d): √d · E[ids] + sinusoids, dropout."""
        return self.dropout(self.embed(ids) * self.scale + self.positions[: ids.shape[1]])

    def forward(self, input_ids, attention_mask, decoder_input_ids, labels, **unused) -> torch.Tensor:
        source_padding = attention_mask == 0  # (B, N)
        t = decoder_input_ids.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=input_ids.device), 1)  # (T, T)
        hidden = self.transformer(
            self.embed_tokens(input_ids),
            self.embed_tokens(decoder_input_ids),
            tgt_mask=causal,
            src_key_padding_mask=source_padding,
            tgt_key_padding_mask=decoder_input_ids == PAD,
            memory_key_padding_mask=source_padding,
            tgt_is_causal=True,
        )  # (B, T, d)
        logits = F.linear(hidden, self.embed.weight)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100, label_smoothing=0.1)


def multi30k_batches(vocab_size: int, n_batches: int, max_tokens: int) -> tuple:
    """``(tokenizer, batches, words)``: the joint BPE vocabulary, the first ``n_batches`` training
    batches (index lists into the pairs) and every pair's ``(source words, target words)``."""
    pairs = read_aligned(MULTI30K / "train.lc.norm.tok.en", MULTI30K / "train.lc.norm.tok.de")
    tokenizer = wrap_subwords(build_subwords([side for pair in pairs for side in pair], vocab_size))
    words = [(s.split(), t.split()) for s, t in pairs]
    encoded = encode_pairs(tokenizer, [s for s, _ in words], [t for _, t in words])
    lengths = [max(len(s), len(t) + 1) for s, t in zip(encoded.source, encoded.target)]
    batches = LengthBucketSampler(lengths, max_tokens=max_tokens, seed=0).batches(0)[:n_batches]
    return tokenizer, batches, words


def subset_pairs(tokenizer, words, indices: list[int], kind: str | None, cache: Path) -> EncodedPairs:
    """The pairs ``indices`` encoded (with their sources' structure of ``kind``, parsed and cached)."""
    source = [words[i][0] for i in indices]
    target = [words[i][1] for i in indices]
    structures = source_structures(source, kind, cache=cache) if kind else None
    return encode_pairs(tokenizer, source, target, kind, structures)


def synthetic_pairs(vocab_size: int, n: int, kind: str | None, seed: int = 0) -> EncodedPairs:
    """``n`` random pairs of Multi30k-like lengths (source 8-20 pieces + ``</s>``, target 8-22), with
    right-branching structures: each word's head the next word (the last the root), phrases of two."""
    rng = random.Random(seed)
    source, target, structures = [], [], [] if kind else None
    for _ in range(n):
        ns, nt = rng.randint(8, 20), rng.randint(8, 22)
        source.append([rng.randrange(4, vocab_size) for _ in range(ns)] + [2])
        target.append([rng.randrange(4, vocab_size) for _ in range(nt)])
        if kind:  # one piece a word; </s> outside the tree
            word_values = [i + 2 for i in range(ns - 1)] + [0] if kind == "heads" else [i // 2 for i in range(ns)]
            structures.append(piece_structure(kind, word_values, [*range(ns), None]))
    return EncodedPairs(source, target, structures, kind)


def build_rows(names: list[str], vocab_size: int, seed: int) -> dict[str, nn.Module]:
    """``{row: model}`` at the anchor size, each from ``seed``, in training mode."""
    size = PRESETS["anchor"]
    rows = {}
    for name in names:
        torch.manual_seed(seed)
        if name == REFERENCE:
            rows[name] = ReferenceTransformer(
                vocab_size, size["d_model"], size["layers"], size["heads"], size["ffn"], size["dropout"]
            )
        else:
            rows[name] = TranslationModel(translation_config(name, "anchor", vocab_size))
        rows[name].train()
    return rows


def make_step(model: nn.Module):
    """The row's training step: ``step(batch) -> loss`` (forward, zero_grad, backward, fused Adam)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005, betas=(0.9, 0.98), eps=1e-8, fused=True)

    def step(batch) -> float:
        out = model(**batch.features)
        loss = out if isinstance(out, torch.Tensor) else out.loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return step


def paired(numerator: list[float], denominator: list[float]) -> float:
    """Median over rounds of ``numerator[r] / denominator[r]``."""
    return round(statistics.median(a / b for a, b in zip(numerator, denominator)), 3)


def measure(names, batches: dict, vocab_size: int, threads: int, rounds: int, warmup: int, seed: int) -> dict:
    """One threads setting: build the rows, warm them up, time ``rounds`` interleaved rounds."""
    torch.set_num_threads(threads)
    models = build_rows(names, vocab_size, seed)
    steps = {name: make_step(model) for name, model in models.items()}
    n_batches = len(next(iter(batches.values())))
    for name in names:
        for i in range(warmup):
            steps[name](batches[name][i % n_batches])
    times = {name: [] for name in names}
    cpu = {name: [] for name in names}
    losses = {name: [] for name in names}
    tokens = []
    for r in range(rounds):
        b = r % n_batches
        tokens.append(batches[REFERENCE][b].n_tokens)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0, c0 = time.perf_counter(), time.process_time()
            losses[name].append(steps[name](batches[name][b]))
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    ms = {name: 1000 * statistics.median(t) for name, t in times.items()}
    rows = {}
    for name in names:
        rows[name] = dict(
            parameters=sum(p.numel() for p in models[name].parameters()),
            ms_per_step=round(ms[name], 1),
            ms_per_step_min=round(1000 * min(times[name]), 1),
            cpu_ms_per_step=round(1000 * statistics.median(cpu[name]), 1),
            target_tokens_per_second=round(statistics.median(n / t for n, t in zip(tokens, times[name]))),
            speed_vs_reference=round(ms[REFERENCE] / ms[name], 3),
            speed_vs_reference_paired=paired(times[REFERENCE], times[name]),
            speed_vs_reference_cpu=paired(cpu[REFERENCE], cpu[name]),
            speed_vs_baseline=round(ms["baseline"] / ms[name], 3) if "baseline" in ms else None,
            speed_vs_baseline_paired=paired(times["baseline"], times[name]) if "baseline" in ms else None,
            mean_loss=round(statistics.mean(losses[name]), 4),
        )
    return dict(threads=threads, rows=rows, seconds={n: [round(t, 4) for t in v] for n, v in times.items()})


def load_batches(names, a) -> tuple[dict, int, dict]:
    """``{row: [TranslationBatch]}`` (the same pairs for every row; a structured row's with its
    structures), the vocabulary size and the record of the data."""
    kinds = {name: None if name == REFERENCE else VARIANTS[name].structure for name in names}
    if not a.synthetic and (MULTI30K / "train.lc.norm.tok.en").is_file():
        tokenizer, index_batches, words = multi30k_batches(a.vocab_size, a.batches, a.max_tokens)
        chosen = sorted({i for b in index_batches for i in b})
        where = {i: k for k, i in enumerate(chosen)}
        encoded = {kind: subset_pairs(tokenizer, words, chosen, kind, a.tree_cache) for kind in set(kinds.values())}
        local = [[where[i] for i in b] for b in index_batches]
        data = dict(
            data="Multi30k En-De training pairs (../shared/data/multi30k/tok/train.lc.norm.tok.{en,de})",
            vocabulary=len(tokenizer),
            batches=f"LengthBucketSampler, {a.max_tokens} padded tokens, epoch 0, seed 0, the first {a.batches}",
            source_structures={
                k: f"{DEFAULT_PARSERS[k]} (parsed for the batches' {len(chosen)} sentences)" for k in DEFAULT_PARSERS
            },
        )
        vocab_size = len(tokenizer)
    else:
        vocab_size = a.vocab_size
        n = a.max_tokens // 22
        encoded = {kind: synthetic_pairs(vocab_size, n * a.batches, kind) for kind in set(kinds.values())}
        local = [list(range(k * n, (k + 1) * n)) for k in range(a.batches)]
        data = dict(
            data="synthetic: random ids, Multi30k-like lengths (no corpus found)",
            vocabulary=vocab_size,
            batches=f"{n} pairs a batch, {a.batches} batches",
            source_structures="synthetic right-branching (heads: the next word; phrases of two words)",
        )
    batches = {name: [make_batch(encoded[kinds[name]], b) for b in local] for name in names}
    data["batch_shapes"] = [
        dict(
            pairs=int(b.input_ids.shape[0]),
            source=int(b.input_ids.shape[1]),
            target=int(b.labels.shape[1]),
            target_tokens=b.n_tokens,
        )
        for b in batches[REFERENCE]
    ]
    return batches, vocab_size, data


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="2,1", help="torch threads settings, comma-separated")
    parser.add_argument("--rounds", type=int, default=12, help="timed rounds (one step of every row each)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batches", type=int, default=6, help="distinct batches, cycled over the rounds")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--vocab-size", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="our variants (comma-separated)")
    parser.add_argument("--synthetic", action="store_true", help="random pairs even when the corpus is there")
    parser.add_argument("--tree-cache", type=Path, default=Path("runs/tree-cache"))
    parser.add_argument("--background", default="", help="the machine's load, for the record")
    parser.add_argument("--out", type=Path)
    a = parser.parse_args(argv)
    names = [REFERENCE, *a.variants.split(",")]
    batches, vocab_size, data = load_batches(names, a)
    runs = []
    for threads in (int(t) for t in a.threads.split(",")):
        runs.append(measure(names, batches, vocab_size, threads, a.rounds, a.warmup, a.seed))
        print(json.dumps({"threads": threads, "rows": runs[-1]["rows"]}, indent=1), flush=True)
    report = dict(
        benchmark="translation_step",
        **data,
        protocol=(
            "one training step (forward with the label-smoothed loss, zero_grad, backward, fused Adam) of "
            f"each row at the anchor size; per threads setting {a.warmup} warm-up steps per row, then "
            f"{a.rounds} rounds of one step per row on the round's batch, order rotated each round; "
            "median ms; speed ratios = the other row's time / this row's (>= 1: this row at least as fast), "
            "of medians and paired (median over rounds of the same-batch ratio)"
        ),
        seed=a.seed,
        device="cpu",
        cpu=platform.processor() or platform.machine(),
        cores=os.cpu_count(),
        background_load=a.background or f"load average at the end {os.getloadavg()}",
        torch=torch.__version__,
        python=platform.python_version(),
        code=code_version(),
        runs=runs,
    )
    text = json.dumps(report, indent=2)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
