"""The task interface of the training loop (training/loop.py): a toy task — fit one number to the
data by gradient descent on the squared error — trained by the same loop as every other task, with
the result computed by hand and exact resume."""

import json
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from syntaxformer.data.batching import LengthBucketSampler
from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.training.batch import Batch
from syntaxformer.training.checkpoint import CHECKPOINT, read_checkpoint
from syntaxformer.training.loop import TRAINING_JSON, TrainingLoop


@dataclass
class ToyArguments:
    """The options the loop reads (no data or model options: the toy task has none)."""

    out: str
    max_steps: int = 3
    seed: int = 0
    resume: bool = False
    lr: float = 0.1
    clip: float = 0.0
    warmup_steps: int = 0
    schedule: str = "constant"
    schedule_steps: int | None = None
    final_lr_fraction: float = 0.0
    log_every: int = 1
    eval_every: int = 0
    save_every: int = 0
    epochs: int | None = None
    max_minutes: float | None = None
    device: str | None = "cpu"
    quiet: bool = True

    def check(self) -> None:
        pass


@dataclass
class ValueBatch(Batch):
    """values: ``(B,)`` the targets of one batch."""

    values: torch.Tensor

    @property
    def n_tokens(self) -> int:
        return len(self.values)


class OneNumber(nn.Module):
    """w, a single parameter (0 at the start); saves itself as ``w.json``."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))

    def save_pretrained(self, folder, **kwargs) -> None:
        (folder / "w.json").write_text(json.dumps(float(self.w.detach())))


class FitOneNumber(TrainingLoop):
    """The toy task: 4 targets equal to 1.0, batches of 2, loss mean((w - value)²), SGD."""

    def build(self) -> None:
        checkpoint = read_checkpoint(self.args, self.world)
        self.tokenizer = build_word_tokenizer([["x"]])
        self.values = torch.ones(4)
        self.model = OneNumber()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.args.lr)
        self.scheduler = self.make_scheduler()
        if checkpoint is not None:
            self.resume(checkpoint)
        self.ddp_model = self.wrap_for_data_parallel()
        self.sampler = LengthBucketSampler([1] * 4, batch_size=2, seed=self.args.seed)

    def default_callbacks(self):
        return self.stop_conditions()  # no writers

    def make_batch(self, indices):
        return ValueBatch(self.values[indices])

    def compute_loss(self, model, batch):
        return ((model.w - batch.values) ** 2).mean()

    def evaluate(self, for_report=False):
        return {}

    def report(self):
        return dict(steps=self.state.step, w=float(self.model.w.detach()), tokens_seen=self.state.tokens_seen)


def test_the_loop_trains_a_task_it_knows_nothing_of(tmp_path):
    # w ← w − 0.1 · 2 (w − 1): w_k = 1 − 0.8^k, so 0.2, 0.36, 0.488 after 3 steps
    out = FitOneNumber(ToyArguments(out=str(tmp_path / "run"))).train()
    record = json.loads((out / TRAINING_JSON).read_text())
    assert record["steps"] == 3 and record["tokens_seen"] == 3 * 2
    assert record["w"] == pytest.approx(0.488, abs=1e-6)
    assert json.loads((out / "w.json").read_text()) == pytest.approx(0.488, abs=1e-6)
    assert torch.load(out / CHECKPOINT, weights_only=False)["state"]["step"] == 3


def test_a_resumed_toy_run_equals_an_uninterrupted_one(tmp_path):
    out = tmp_path / "resumed"
    FitOneNumber(ToyArguments(out=str(out), max_steps=2)).train()
    assert json.loads((out / "w.json").read_text()) == pytest.approx(0.36, abs=1e-6)
    FitOneNumber(ToyArguments(out=str(out), max_steps=3, resume=True)).train()
    record = json.loads((out / TRAINING_JSON).read_text())
    assert record["w"] == pytest.approx(0.488, abs=1e-6) and record["steps"] == 3
