"""Hard-concrete gates on a translation model's encoder heads (Voita, Talbot, Moiseev, Sennrich & Titov, ACL 2019, §6).

The trained model is fine-tuned with one stochastic gate per encoder head
(:class:`~syntaxformer.blocks.hard_concrete.HeadGates`, multiplying each head's output through
:class:`~syntaxformer.analysis.translation_heads.GatedHeads`) and the objective ::

    L = label-smoothed cross-entropy (nats per target piece, the training objective)
        + λ · Σ_h (1 − P(g_h = 0))                       # the expected number of open encoder heads

(Voita et al. 2019, eq. 5-6): a fresh gate sample per step (one for the whole batch), Adam on the
model's weights (``lr``) and on the gates' ``log α`` (``gate_lr``, no weight decay), dropout on, a
constant learning rate, ``steps`` batches of at most ``max_tokens`` padded tokens from the training
pairs (:class:`~syntaxformer.data.batching.LengthBucketSampler`, seeded). At the end each gate is
binarised (:func:`~syntaxformer.blocks.hard_concrete.binarise`: open when its test-time value is
above 0.5) and the fine-tuned model is scored with the closed heads' gates at 0 — a layer may lose
every head (its attention then adds only the output projection's bias), which the report counts.

This is a short fine-tuning (a few hundred steps on the CPU), not Voita's training to convergence:
the report names the steps, and the BLEU of the fine-tuned model with every head open beside it.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence

import torch

from syntaxformer.analysis.translation_heads import GatedHeads, TranslationHeadLayout
from syntaxformer.blocks.hard_concrete import LOG_ALPHA_INIT, OPEN_THRESHOLD, TEMPERATURE, HeadGates
from syntaxformer.data.batching import LengthBucketSampler
from syntaxformer.tasks.translation_data import EncodedPairs, make_batch

logger = logging.getLogger(__name__)

#: Defaults of the short fine-tuning (our choices for a CPU budget; Voita et al. train to convergence).
GATE_STEPS = 200
GATE_LR = 0.05
MODEL_LR = 1e-4
GATE_MAX_TOKENS = 2048

PROTOCOL = {
    "objective": "label-smoothed cross-entropy + lambda * sum over encoder heads of (1 - P(g = 0)); "
    "hard-concrete gates (beta, gamma -0.1, zeta 1.1), one sample per step for the whole batch",
    "optimiser": "Adam, constant learning rates (model lr, gates' gate_lr without weight decay), dropout on, "
    "batches of <= max_tokens padded tokens from the training pairs (LengthBucketSampler, seeded)",
    "binarised": f"a gate is open when its test-time value sigma(log alpha)(zeta - gamma) + gamma clipped to "
    f"[0, 1] is > {OPEN_THRESHOLD}; closed heads' gates 0 at scoring (a layer may close every head)",
}


def train_batches(pairs: EncodedPairs, steps: int, max_tokens: int, seed: int):
    """``steps`` training batches of ``pairs`` (length-bucketed, ``max_tokens`` padded tokens, epochs
    reshuffled by ``seed``)."""
    lengths = [max(len(s), len(t) + 1) for s, t in zip(pairs.source, pairs.target)]
    sampler = LengthBucketSampler(lengths, max_tokens=max_tokens, seed=seed)
    epoch, done = 0, 0
    while done < steps:
        for indices in sampler.batches(epoch):
            if done == steps:
                return
            yield make_batch(pairs, indices)
            done += 1
        epoch += 1


def finetune_with_gates(
    model,
    layout: TranslationHeadLayout,
    pairs: EncodedPairs,
    l0: float,
    steps: int = GATE_STEPS,
    lr: float = MODEL_LR,
    gate_lr: float = GATE_LR,
    max_tokens: int = GATE_MAX_TOKENS,
    temperature: float = TEMPERATURE,
    init: float = LOG_ALPHA_INIT,
    seed: int = 0,
):
    """Fine-tune a copy of ``model`` with hard-concrete gates on its encoder heads (module docstring).

    Args:
        model: the trained translation model (unchanged). layout: its encoder heads
            (:func:`~syntaxformer.analysis.translation_heads.translation_head_layout` with ``("encoder",)``).
        pairs: the training pairs (encoded, structures included). l0: λ, nats per expected open head.
        steps, lr, gate_lr, max_tokens: the fine-tuning. temperature, init: the gates' β and initial log α.
        seed: the gates' noise and the batches' order.

    Returns:
        ``(tuned model in evaluation mode, the gates in evaluation mode, log)``: ``log`` the loss without
        the penalty and the expected open heads every ~10% of the steps.
    """
    torch.manual_seed(seed)
    tuned = copy.deepcopy(model).train()
    device = next(tuned.parameters()).device
    gates = HeadGates(layout.layout.kept(), temperature=temperature, init=init).to(device).train()
    optimizer = torch.optim.Adam(
        [dict(params=list(tuned.parameters())), dict(params=list(gates.parameters()), lr=gate_lr, weight_decay=0.0)],
        lr=lr,
    )
    owned = {"encoder": gates()}
    log = []
    with GatedHeads(tuned, owned):
        for step, batch in enumerate(train_batches(pairs, steps, max_tokens, seed), start=1):
            owned["encoder"] = gates()  # a fresh sample, read by the hooks
            loss = tuned(**batch.to(device).features).loss
            penalty = gates.penalty()
            optimizer.zero_grad(set_to_none=True)
            (loss + l0 * penalty).backward()
            optimizer.step()
            if step % max(1, steps // 10) == 0 or step == steps:
                log.append(
                    dict(
                        step=step, loss=round(float(loss.detach()), 4), expected_open=round(float(penalty.detach()), 3)
                    )
                )
                logger.info("gates lambda %g, step %d: %s", l0, step, log[-1])
    return tuned.eval(), gates.eval(), log


def gates_record(gates: HeadGates, layout: TranslationHeadLayout) -> dict:
    """The binarised gates: per head (``[L][H]``) ``log_alpha``, ``p_closed``, ``deterministic`` and
    ``open``; ``kept_per_layer``, ``n_kept``, ``n_heads``, ``layers_without_heads``, ``expected_open``."""
    with torch.no_grad():
        is_open = gates.open_heads().cpu()
        record = dict(
            log_alpha=layout.layout.grid(gates.log_alpha.detach().cpu(), 4),
            p_closed=layout.layout.grid(gates.probability_closed().detach().cpu(), 6),
            deterministic=layout.layout.grid(gates.deterministic().detach().cpu(), 6),
            expected_open=round(float(gates.penalty()), 4),
        )
    kept = [int(row.sum()) for row in is_open]
    record.update(
        open=[[bool(v) for v in row] for row in is_open.tolist()],
        kept_per_layer=kept,
        n_kept=sum(kept),
        n_heads=int(gates.present.sum()),
        layers_without_heads=[layer for layer, k in enumerate(kept) if k == 0],
        temperature=gates.temperature,
        open_threshold=OPEN_THRESHOLD,
    )
    return record


def open_gates(gates: HeadGates) -> torch.Tensor:
    """``(L, H)`` float: 1 at open heads, 0 at closed ones (the binarised gates)."""
    return gates.open_heads().to(torch.float32)


def check_lambdas(lambdas: Sequence[float]) -> list[float]:
    """The λ values, each ≥ 0.

    Raises:
        ValueError: a negative λ.
    """
    for value in lambdas:
        if value < 0:
            raise ValueError(f"--gates: lambda must be >= 0, got {value}")
    return [float(v) for v in lambdas]


__all__ = [
    "GATE_STEPS",
    "GATE_LR",
    "MODEL_LR",
    "GATE_MAX_TOKENS",
    "PROTOCOL",
    "train_batches",
    "finetune_with_gates",
    "gates_record",
    "open_gates",
    "check_lambdas",
]
