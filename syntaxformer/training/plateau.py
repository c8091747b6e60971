"""Learning rate reduced on a validation plateau, as the public ON-LSTM logic code trains
(``ReduceLROnPlateau(optimizer, "max", factor=0.5, patience=2, threshold=0)`` stepped once per epoch
on the validation accuracy; Shen et al. 2019, §6.4) and the public StructFormer code (the same rule in
mode ``"min"`` on the validation loss; google-research ``structformer/main.py``).

The project's trainers step their scheduler after every optimizer step; a plateau schedule instead
moves only when a validation score arrives. :class:`PlateauSchedule` is that scheduler (its per-step
``step()`` does nothing), and the loop hands it each evaluation's score of the task's selection metric
(:meth:`~syntaxformer.training.loop.TrainingLoop.evaluate`).
The rule itself is torch's :class:`torch.optim.lr_scheduler.ReduceLROnPlateau`.
"""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)


class PlateauSchedule:
    """Multiply the learning rate by ``factor`` when the validation score has not improved on its
    best for more than ``patience`` consecutive evaluations (torch's rule, ``threshold=0``: any
    increase of the score in mode ``"max"``, any decrease in mode ``"min"``, counts as an improvement).

    Args:
        optimizer: the run's optimizer (its learning rates are changed in place).
        factor: the multiplier, in (0, 1); the public logic and StructFormer code use 0.5.
        patience: evaluations without improvement tolerated; the public code uses 2.
        mode: ``"max"`` (a score such as accuracy) or ``"min"`` (a loss).
    Raises:
        ValueError: factor outside (0, 1), a negative patience or another mode.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, factor: float = 0.5, patience: int = 2, mode: str = "max"):
        if not 0.0 < factor < 1.0 or patience < 0 or mode not in ("min", "max"):
            raise ValueError(
                f"plateau schedule: factor must lie in (0, 1), patience be >= 0 and mode min or max, "
                f"got {factor}, {patience} and {mode!r}"
            )
        self.rule = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode=mode, factor=factor, patience=patience, threshold=0.0
        )
        self.last_step: int | None = None  # the optimizer step of the last score seen

    def step(self) -> None:
        """Called after every optimizer step by the trainer: a plateau schedule does not move there."""

    def observe(self, step: int, score: float) -> None:
        """Hand over the validation ``score`` (better: higher in mode max, lower in mode min) measured at
        optimizer step ``step``.
        A step already observed is ignored, so an evaluation replayed after a resume counts once."""
        if self.last_step is not None and step <= self.last_step:
            return
        before = self.rule.optimizer.param_groups[0]["lr"]
        self.rule.step(score)
        self.last_step = step
        after = self.rule.optimizer.param_groups[0]["lr"]
        if after < before:
            logger.info(
                "step %d: no better validation score than %.4g in %d evaluation(s): learning rate %.3g -> %.3g",
                step,
                self.rule.best,
                self.rule.patience + 1,
                before,
                after,
            )

    def state_dict(self) -> dict:
        """What a checkpoint keeps: torch's rule state (best score, evaluations without improvement,
        ...; not the optimizer) and the last step observed."""
        return dict(rule=self.rule.state_dict(), last_step=self.last_step)

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` (the learning rates themselves come with the optimizer's state)."""
        self.rule.load_state_dict(state["rule"])
        self.last_step = state["last_step"]


__all__ = ["PlateauSchedule"]
