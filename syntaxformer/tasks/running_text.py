"""The AWD-LSTM procedure: a causal language model trained on running text with SGD, then NT-ASGD.

Merity, Keskar & Socher, "Regularizing and Optimizing LSTM Language Models", ICLR 2018 (§2: NT-ASGD,
Algorithm 1; §4: variable-length backpropagation through time, activation and temporal activation
regularisation), as the public ON-LSTM code trains (Shen et al., ICLR 2019; yikangshen/Ordered-Neurons
``main.py`` and ``utils.py``, read, not copied; DESIGN.md §3.4). :class:`RunningTextTrainer` is the
task of the training loop that ``train`` runs when ``bptt`` is given:

1. **Running text.** The training sentences in corpus order, each followed by ``<eos>`` (``[CLS]``),
   one stream cut into ``batch_size`` rows (:func:`~syntaxformer.data.running_text.batchify`); an
   epoch is a pass over it in windows of drawn lengths (mean ``bptt``, sometimes ``bptt / 2``;
   :class:`~syntaxformer.data.running_text.BpttWindows`), each predicting the next token everywhere.
   The recurrent state ``(h, c)`` of every layer is carried from window to window (detached: the
   gradient stops at the window's start) and reset at the start of an epoch.
2. **The step.** Loss = mean next-token cross-entropy + ``ar_alpha · mean(h_drop²)`` (the last layer's
   outputs after the output dropout) + ``tar_beta · mean((h_{t+1} − h_t)²)`` (before it); the learning
   rate of a window of n tokens is ``lr · n / bptt`` for that step; gradient clipping ``clip``.
3. **SGD, then NT-ASGD.** With ``optimizer="sgd"``: plain SGD (``weight_decay`` as an L2 term) until an
   end-of-epoch validation loss is higher than the lowest of all SGD-phase validations except the last
   ``nonmono`` ones (and more than ``nonmono`` were made); from then on :class:`torch.optim.ASGD`
   (t0 = 0, λ = 0, the learning rate ``lr``: the average of the weights over all later steps). Under
   ASGD the *averaged* weights are validated, kept as the best model and saved; the training weights
   go on. With ``asgd_restart_epoch`` the averaging starts again after that epoch (the public
   ``--finetuning``).
4. **Validation and selection.** At the end of every epoch (and at step 0), the validation text as
   running text (``eval_batch_size`` rows, windows of ``bptt``, state carried), evaluation mode; the
   mean cross-entropy over every predicted token. With ``keep_best`` the model of the lowest validation
   loss is written to ``OUT/best/`` (:mod:`~syntaxformer.training.best`), and with
   ``final_model="best"`` it is the model saved in OUT at the end (the public code's ``model_save`` /
   ``model_load``; the ON-LSTM ``paper`` recipe sets both); the last weights stay in the checkpoint. A
   run stopped between epochs (``max_steps``, ``max_minutes``, a signal) validates nothing more.

Resume is exact: the windows of an epoch come from ``(seed, epoch)``, dropout from ``(seed, step)``,
and the checkpoint carries the recurrent state, the optimiser (SGD or ASGD with its averages) and the
validation history the switch reads.

Where this differs from the public code (DESIGN.md §3.4): the validation loss is the mean over the
predicted tokens (the public divides the summed window losses by the stream's rows, one more than the
predicted positions); the draws come from seeded generators instead of numpy's global one; training
also validates at step 0 (for the learning curve; that validation takes no part in the switch); the
logged training loss includes the two regularisers.
"""

from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from syntaxformer.data.running_text import BpttWindows, batchify, evaluation_windows, token_stream, window
from syntaxformer.errors import InputError
from syntaxformer.tasks.language_model import Trainer
from syntaxformer.training.batch import TokenBatch
from syntaxformer.training.best import BEST, BEST_RECORD
from syntaxformer.training.loop import TrainerState

logger = logging.getLogger(__name__)


def activation_regularisation(dropped: torch.Tensor, raw: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    """AR + TAR (Merity et al. 2018, §4.6; the public ``main.py``): ``alpha · mean(dropped²) + beta ·
    mean((raw_{t+1} − raw_t)²)``, means over every element.

    Args:
        dropped: ``(B, n, E)`` the last layer's outputs after the output dropout.
        raw: ``(B, n, E)`` the same before dropout (time on dim 1).
        alpha, beta: the weights (0 leaves a term out).
    Returns:
        A scalar tensor (0 when both weights are 0).
    """
    term = dropped.new_zeros(())
    if alpha:
        term = term + alpha * dropped.pow(2).mean()
    if beta:
        term = term + beta * (raw[:, 1:] - raw[:, :-1]).pow(2).mean()
    return term


@dataclass
class RunningTextState(TrainerState):
    """:class:`~syntaxformer.training.loop.TrainerState` with what running text carries across a resume.

    Attributes:
        carried_state: per layer ``[h, c]`` ``(B, H_l)`` after the last window of the current epoch, or
            None at an epoch's start.
        sgd_valid_losses: the end-of-epoch validation losses of the SGD phase (NT-ASGD's trigger reads them).
        asgd_since_epoch, asgd_since_step: the epoch (1-based) after which, and the step at which, averaged
            SGD began; None under SGD.
        epoch_validated_at: the step of the last end-of-epoch validation acted on (a resumed run does
            not act on it twice).
    """

    carried_state: list | None = None
    sgd_valid_losses: list = field(default_factory=list)
    asgd_since_epoch: int | None = None
    asgd_since_step: int | None = None
    epoch_validated_at: int | None = None


class RunningTextTrainer(Trainer):
    """The AWD-LSTM procedure as a task of the training loop (module docstring).

    Attributes (besides :class:`~syntaxformer.tasks.language_model.Trainer`'s):
        train_stream: ``(batch_size, T)`` long, the training text; valid_stream: ``(eval_batch_size, T')``
            or None without validation text.
        sampler: the :class:`~syntaxformer.data.running_text.BpttWindows` of the training stream.

    Raises:
        InputError: (from :meth:`build`) a model that is not a causal LM, several processes,
            ``max_tokens`` instead of ``batch_size``, ``init_from``, or a text too short for the rows.
    """

    state_class = RunningTextState

    def build(self) -> None:
        """:meth:`Trainer.build`, then the streams and windows in place of sentence batches."""
        args = self.args
        if self.world > 1:
            raise InputError("--bptt (running text) trains in one process; run it without torchrun")
        if args.max_tokens is not None or args.init_from is not None:
            raise InputError("--bptt (running text) takes --batch-size rows and no --max-tokens or --model")
        super().build()
        if self.objective.name != "causal-lm":
            raise InputError(f"--bptt trains a causal language model; {args.model} is a {self.objective.name} model")
        try:
            self.train_stream = batchify(token_stream(self.data.train_ids), args.batch_size)
            valid = token_stream(self.data.valid_ids)
            # on the device once: evaluations slice it there
            self.valid_stream = batchify(valid, args.eval_batch_size).to(self.device) if valid else None
        except ValueError as e:
            raise InputError(f"{args.corpus}: {e}") from e
        self.sampler = BpttWindows(self.train_stream.shape[1], args.bptt, args.seed)
        self.valid_batches = []
        if self.state.carried_state is not None:
            self.state.carried_state = [[t.to(self.device) for t in pair] for pair in self.state.carried_state]

    def make_optimizer(self, parameters, decoupled_weight_decay: bool = True) -> torch.optim.Optimizer:
        """SGD (``weight_decay`` an L2 term) with ``optimizer="sgd"``, else the loop's Adam."""
        if self.args.optimizer == "sgd":
            return torch.optim.SGD(parameters, lr=self.args.lr, weight_decay=self.args.weight_decay)
        return super().make_optimizer(parameters, decoupled_weight_decay)

    def periods(self) -> dict[str, int]:
        """Logging and checkpoints every ``log_every`` / ``save_every`` steps; validation only at the end
        of every epoch (:meth:`epoch_batches`), not every ``eval_every`` steps."""
        return {**super().periods(), "evaluate": 0}

    def epoch_batches(self) -> int:
        """The windows of the current epoch: validation and a checkpoint at the end of every epoch."""
        return len(self._batches_of(self.state.epoch))

    # ---------------------------------------------------------------------------------- a step

    #: the windows are made inline (the step scales the learning rate by its window's length)
    prefetchable = False
    #: the loss carries the recurrent state from window to window: no step graph
    step_graphable = False

    def make_batch(self, indices: tuple[int, int]) -> TokenBatch:
        """The window ``indices = (start, length)`` of the training stream: inputs and the next tokens,
        ``(B, n)`` each (no padding)."""
        inputs, targets = window(self.train_stream, *indices)
        return TokenBatch(inputs, torch.ones_like(inputs), targets)

    def training_step(self, indices: tuple[int, int]):
        """The loop's step with the learning rate scaled by the drawn window length over ``bptt``."""
        scale = indices[1] / self.args.bptt
        base = [group["lr"] for group in self.optimizer.param_groups]
        for group, lr in zip(self.optimizer.param_groups, base):
            group["lr"] = lr * scale
        try:
            return super().training_step(indices)
        finally:
            for group, lr in zip(self.optimizer.param_groups, base):
                group["lr"] = lr

    def compute_loss(self, model: torch.nn.Module, batch: TokenBatch) -> torch.Tensor:
        """Cross-entropy of every next token plus the activation regularisers, from the carried state
        (none at an epoch's start); keeps the window's final state, detached, for the next window.
        (The loop runs it under its autocast, bfloat16 with ``bf16``.)"""
        args, state = self.args, self.state
        if state.batch_in_epoch == 0:
            state.carried_state = None
        batch = batch.to(self.device)
        start = None if state.carried_state is None else [tuple(pair) for pair in state.carried_state]
        out = model(input_ids=batch.input_ids, state=start, output_last_hidden=True)
        loss = F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), batch.labels.reshape(-1))
        loss = loss + activation_regularisation(
            out.dropped_hidden_state, out.last_hidden_state, args.ar_alpha, args.tar_beta
        )
        state.carried_state = [[h.detach(), c.detach()] for h, c in out.state]
        return loss

    # ---------------------------------------------------------------------------------- validation

    def validation_loss(self) -> float | None:
        """Mean cross-entropy (nats) of every next token of the validation stream, read as running text
        in windows of ``bptt`` with the state carried; None without validation text. The loop's
        evaluation calls it under its autocast."""
        if self.valid_stream is None:
            return None
        self.model.eval()
        total = torch.zeros((), dtype=torch.float64, device=self.device)  # summed on the device
        count, carried = 0, None
        with torch.no_grad():
            for start, length in evaluation_windows(self.valid_stream.shape[1], self.args.bptt):
                inputs, targets = window(self.valid_stream, start, length)
                out = self.model(input_ids=inputs, state=carried)
                carried = out.state
                logits = out.logits.float()
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")
                total += loss.double()
                count += targets.numel()
        self.model.train()
        return float(total) / count  # the evaluation's one read

    def evaluate(self, for_report: bool = False) -> dict[str, float]:
        """Validation at step 0 and at the end of every epoch (nothing between epochs), with the averaged
        weights under ASGD; then NT-ASGD's trigger (:meth:`after_epoch_validation`; not for an evaluation
        ``for_report``, :meth:`~syntaxformer.training.loop.TrainingLoop.evaluate`)."""
        state = self.state
        at_epoch_end = state.step > 0 and state.batch_in_epoch >= len(self.sampler.batches(state.epoch))
        if state.step > 0 and not at_epoch_end:
            return {}
        with self._averaged_weights():
            metrics = super().evaluate(for_report)
        if at_epoch_end and metrics and not for_report and state.epoch_validated_at != state.step:
            state.epoch_validated_at = state.step
            self.after_epoch_validation(metrics["valid/loss"])
        return metrics

    @property
    def averaging(self) -> bool:
        """Whether averaged SGD (the second phase of NT-ASGD) is running."""
        return isinstance(self.optimizer, torch.optim.ASGD)

    @contextmanager
    def _averaged_weights(self):
        """The model's weights replaced by ASGD's averages inside the block (unchanged under SGD/Adam or
        before ASGD's first step)."""
        params = list(self.model.parameters())
        averages = [self.optimizer.state.get(p, {}).get("ax") for p in params] if self.averaging else []
        if not averages or any(a is None for a in averages):
            yield
            return
        kept = [p.detach().clone() for p in params]
        with torch.no_grad():
            for p, a in zip(params, averages):
                p.copy_(a)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, k in zip(params, kept):
                    p.copy_(k)

    def after_epoch_validation(self, loss: float) -> None:
        """NT-ASGD (Merity et al. 2018, Algorithm 1, as the public ``main.py``): under SGD, switch to ASGD
        when more than ``nonmono`` SGD validations were made and ``loss`` exceeds the lowest of them
        but the last ``nonmono``; then record ``loss``. Under ASGD, restart the averaging after epoch
        ``asgd_restart_epoch``."""
        args, state = self.args, self.state
        epoch = state.epoch + 1  # the epoch just finished, 1-based
        if not self.averaging:
            history = state.sgd_valid_losses
            if args.optimizer == "sgd" and args.nonmono and len(history) > args.nonmono:
                if loss > min(history[: -args.nonmono]):
                    self.switch_to_averaging()
                    state.asgd_since_epoch, state.asgd_since_step = epoch, state.step
                    logger.info("epoch %d (step %d): switching to averaged SGD (NT-ASGD)", epoch, state.step)
            history.append(loss)
        elif args.asgd_restart_epoch == epoch:
            self.switch_to_averaging()
            logger.info("epoch %d: averaged SGD restarted", epoch)

    def switch_to_averaging(self) -> None:
        """A fresh :class:`torch.optim.ASGD` (t0 = 0, λ = 0, ``lr``, ``weight_decay``) and its constant schedule."""
        self.optimizer = torch.optim.ASGD(
            self.model.parameters(), lr=self.args.lr, t0=0, lambd=0.0, weight_decay=self.args.weight_decay
        )
        self.scheduler = self.make_scheduler()

    def resume(self, checkpoint: dict) -> None:
        """The loop's resume, with ASGD in place of SGD first when the checkpoint was averaging."""
        if checkpoint["state"].get("asgd_since_step") is not None:
            self.switch_to_averaging()
        super().resume(checkpoint)

    # ---------------------------------------------------------------------------------- the end

    def report(self) -> dict:
        """:meth:`Trainer.report` with the running text, NT-ASGD's switch and the selected model."""
        record = super().report()
        state, args = self.state, self.args
        best = self.out / BEST / BEST_RECORD
        record["objective_description"] = (
            "causal LM on running text: every next token, windows of mean length bptt with the state carried"
        )
        record["running_text"] = dict(
            bptt=args.bptt,
            rows=self.train_stream.shape[0],
            tokens_per_row=self.train_stream.shape[1],
            valid_tokens=None if self.valid_stream is None else self.valid_stream.numel(),
            optimizer=args.optimizer,
            asgd_since_epoch=state.asgd_since_epoch,
            asgd_since_step=state.asgd_since_step,
            selected=json.loads(best.read_text()) if best.is_file() else None,
        )
        return record


__all__ = ["RunningTextTrainer", "RunningTextState", "activation_regularisation"]
