"""A new task of the training loop, written in one file: a toy classifier (is the sequence mostly
``a`` or mostly ``b``?) supplies its data, batches, loss and validation metrics, and the loop gives it
evaluation once per step, the validation history, the best model in ``OUT/best/``, ``final_model``,
exact resume (an evaluation already in the history is read back, not recomputed) and bf16 autocast.
No registry entry is needed: the loop is a base class (the commands ``logic`` and ``nli`` each name
their own task). tests/training/test_training_loop.py checks the loop's arithmetic on a task without validation."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import PretrainedConfig, PreTrainedModel

from syntaxformer.data.batching import LengthBucketSampler, pad_batch
from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.errors import InputError
from syntaxformer.training import TokenBatch, TrainerCallback, TrainingLoop
from syntaxformer.training.checkpoint import read_checkpoint

# ------------------------------------------------------------------------------------------ the toy task


@dataclass
class ToyArguments:
    """The options the loop reads (periods, stop conditions, optimiser, schedule, precision, output)."""

    out: str
    max_steps: int | None = 40
    epochs: int | None = None
    max_minutes: float | None = None
    batch_size: int = 8
    lr: float = 0.05
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    clip: float = 1.0
    warmup_steps: int = 0
    schedule: str = "constant"
    schedule_steps: int | None = None
    final_lr_fraction: float = 0.0
    plateau_factor: float = 0.5
    plateau_patience: int = 2
    log_every: int = 5
    eval_every: int = 5
    save_every: int = 10
    seed: int = 0
    device: str | None = "cpu"
    resume: bool = False
    bf16: bool = False
    final_model: str = "last"
    keeps_best_model: bool = True

    def check(self) -> None:
        if self.final_model not in ("last", "best"):
            raise InputError(f"final_model must be last or best, got {self.final_model!r}")


class ToyConfig(PretrainedConfig):
    model_type = "toy-majority"

    def __init__(self, vocab_size: int = 6, hidden_size: int = 8, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.hidden_size = vocab_size, hidden_size


class ToyClassifier(PreTrainedModel):
    """Mean of the word embeddings, dropout, a linear layer to 2 classes."""

    config_class = ToyConfig

    def __init__(self, config: ToyConfig):
        super().__init__(config)
        self.embed = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.dropout = torch.nn.Dropout(0.1)
        self.classify = torch.nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask[..., None].float()
        pooled = (self.embed(input_ids) * mask).sum(1) / mask.sum(1)
        return self.classify(self.dropout(pooled))


def toy_pairs(n: int, rng: random.Random) -> list[tuple[list[str], int]]:
    """``n`` sequences of 3-9 (odd) words ``a`` / ``b`` and their label: 1 when ``a`` is the majority."""
    pairs = []
    for _ in range(n):
        words = [rng.choice("ab") for _ in range(rng.choice((3, 5, 7, 9)))]
        pairs.append((words, int(words.count("a") > words.count("b"))))
    return pairs


class MajorityTask(TrainingLoop):
    """The toy task: data, batch, loss and validation metrics; everything else is the loop's.

    ``validations`` lists the steps whose metrics were computed; ``seen`` the (where, autocast on,
    dtype) of every forward pass (its logits) and of every training loss the loop adds a term to."""

    validation_keys = ("valid/loss", "valid/accuracy")
    selection_metric = "valid/accuracy"
    selection_mode = "max"

    def build(self) -> None:
        args = self.args
        torch.manual_seed(args.seed)
        checkpoint = read_checkpoint(args, self.world)
        self.tokenizer = build_word_tokenizer([["a", "b"]])
        rng = random.Random(0)
        self.train_items = self.encode(toy_pairs(160, rng))
        self.valid_items = self.encode(toy_pairs(40, rng))
        self.model = ToyClassifier(ToyConfig(vocab_size=len(self.tokenizer)))
        self.optimizer = self.make_optimizer(self.model.parameters())
        self.scheduler = self.make_scheduler()
        if checkpoint is not None:
            self.resume(checkpoint)
        self.ddp_model = self.model
        self.sampler = LengthBucketSampler([len(x) for x, _ in self.train_items], args.batch_size, seed=args.seed)
        self.validations: list[int] = []
        self.seen: list[tuple[str, bool, torch.dtype]] = []

    def encode(self, pairs):
        vocab = self.tokenizer.get_vocab()
        return [([vocab[w] for w in words], label) for words, label in pairs]

    def collate(self, items) -> TokenBatch:
        ids, mask = pad_batch([x for x, _ in items], self.tokenizer.pad_token_id)
        return TokenBatch(ids, mask, torch.tensor([y for _, y in items]))

    def make_batch(self, indices: list[int]) -> TokenBatch:
        return self.collate([self.train_items[i] for i in indices])

    def default_callbacks(self):
        return self.stop_conditions()  # no writers

    def compute_loss(self, model, batch: TokenBatch) -> torch.Tensor:
        logits = model(batch.input_ids, batch.attention_mask)
        self.seen.append(("train", torch.is_autocast_enabled("cpu"), logits.dtype))
        return F.cross_entropy(logits, batch.labels)

    def training_loss(self, model, batch: TokenBatch) -> torch.Tensor:
        loss = super().training_loss(model, batch)  # where a task adds a penalty term
        self.seen.append(("penalty", torch.is_autocast_enabled("cpu"), loss.dtype))
        return loss

    def validation_metrics(self) -> dict[str, float]:
        self.validations.append(self.state.step)
        batch = self.collate(self.valid_items)
        self.model.eval()
        with torch.no_grad():
            logits = self.model(batch.input_ids, batch.attention_mask)
        self.model.train()
        self.seen.append(("valid", torch.is_autocast_enabled("cpu"), logits.dtype))
        loss = float(F.cross_entropy(logits.float(), batch.labels))
        accuracy = 100.0 * float((logits.argmax(-1) == batch.labels).float().mean())
        return {"valid/loss": loss, "valid/accuracy": accuracy}

    def report(self) -> dict:
        state = self.state
        return dict(steps=state.step, valid_history=state.valid_history, best_step=state.best_step)


class LowestLoss(MajorityTask):
    """The same task selecting on the validation loss (lower is better)."""

    selection_metric = "valid/loss"
    selection_mode = "min"


class Recorder(TrainerCallback):
    """The metrics of every ``on_evaluate``."""

    def __init__(self):
        self.metrics: list[tuple[int, dict]] = []

    def on_evaluate(self, trainer, metrics):
        self.metrics.append((trainer.state.step, dict(metrics)))


def _run(out: Path, task=MajorityTask, callbacks=(), **options) -> MajorityTask:
    loop = task(ToyArguments(out=str(out), **options), callbacks)
    loop.train()
    return loop


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


# ------------------------------------------------------------------------------------------ the tests


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """40 steps, evaluated every 5, with a recording callback."""
    recorder = Recorder()
    loop = _run(tmp_path_factory.mktemp("toy") / "straight", callbacks=[recorder])
    return loop, recorder


def test_evaluation_once_per_step_into_the_history_and_to_the_callbacks(straight):
    loop, recorder = straight
    steps = list(range(0, 41, 5))
    # step 40 is evaluated by the period; the end of the run does not evaluate it again
    assert loop.validations == steps
    history = loop.state.valid_history
    assert [row[0] for row in history] == steps and all(len(row) == 3 for row in history)
    assert recorder.metrics == [(s, {"valid/loss": loss, "valid/accuracy": acc}) for s, loss, acc in history]
    assert loop.state.initial_valid_loss == history[0][1]
    assert json.loads((loop.out / "training.json").read_text())["valid_history"] == history
    # the run learns the task
    assert history[0][2] < 70 and history[-1][2] == 100.0


def test_the_best_model_is_kept_and_the_last_left_in_out(straight):
    loop, _ = straight
    history = loop.state.valid_history
    best_step, _, best_accuracy = max(history, key=lambda row: row[2])  # the earliest of the highest
    assert 0 < best_step < 40, "this run reaches its best accuracy before its last step"
    assert (loop.state.best_step, loop.state.best_value) == (best_step, best_accuracy)
    best = loop.out / "best"
    assert json.loads((best / "best.json").read_text()) == {"step": best_step, "valid_accuracy": best_accuracy}
    assert (best / "tokenizer.json").is_file()
    # OUT/ holds the last model (final_model "last"), OUT/best/ the kept one, which scores as recorded
    last = _weights(loop.out)
    assert all(torch.equal(last[k], v) for k, v in loop.model.state_dict().items())
    kept = ToyClassifier.from_pretrained(best)
    loop.model.load_state_dict(kept.state_dict())
    assert loop.validation_metrics()["valid/accuracy"] == best_accuracy


def test_final_model_best_leaves_the_kept_model_in_out(straight, tmp_path):
    loop = _run(tmp_path / "best", final_model="best")
    assert loop.state.best_step == straight[0].state.best_step
    saved, kept = _weights(loop.out), _weights(loop.out / "best")
    assert saved.keys() == kept.keys() and all(torch.equal(saved[k], kept[k]) for k in saved)
    with pytest.raises(InputError, match="final_model must be last or best"):
        MajorityTask(ToyArguments(out=str(tmp_path / "x"), final_model="first"))


def test_a_task_selecting_on_the_lowest_loss(tmp_path):
    loop = _run(tmp_path / "loss", task=LowestLoss)
    best_step, best_loss, _ = min(loop.state.valid_history, key=lambda row: row[1])
    assert json.loads((loop.out / "best" / "best.json").read_text()) == {"step": best_step, "valid_loss": best_loss}


def test_resume_replays_the_evaluation_and_equals_an_uninterrupted_run(straight, tmp_path):
    whole, _ = straight
    out = tmp_path / "cut"
    first = _run(out, max_steps=20)
    assert first.validations == [0, 5, 10, 15, 20]
    # resumed with nothing left to do: the final evaluation at the checkpoint's step 20 is read back
    # from the history, not recomputed, and handed to the callbacks as it was measured
    recorder = Recorder()
    again = _run(out, callbacks=[recorder], max_steps=20, resume=True)
    assert again.validations == [] and again.state.valid_history == first.state.valid_history
    step, loss, accuracy = whole.state.valid_history[4]
    assert recorder.metrics == [(step, {"valid/loss": loss, "valid/accuracy": accuracy})] and step == 20
    second = _run(out, max_steps=40, resume=True)
    assert second.validations == [25, 30, 35, 40] and second.state.resumed_from == [20, 20]
    assert second.state.valid_history == whole.state.valid_history
    assert (second.state.best_step, second.state.best_value) == (whole.state.best_step, whole.state.best_value)
    for name, folder in (("last", ""), ("best", "best")):
        a, b = _weights(whole.out / folder), _weights(out / folder)
        assert all(torch.equal(a[k], b[k]) for k in a), name


def test_bf16_autocast_covers_the_loss_and_the_validation_not_a_penalty_term(straight, tmp_path):
    loop = _run(tmp_path / "bf16", callbacks=[Recorder()], max_steps=10, bf16=True)
    where = {w for w, _, _ in loop.seen}
    assert where == {"train", "valid", "penalty"}
    assert all(on and dtype == torch.bfloat16 for w, on, dtype in loop.seen if w in ("train", "valid"))
    # a task's penalty term is added outside autocast, to the float32 loss of cross_entropy
    assert all(not on and dtype == torch.float32 for w, on, dtype in loop.seen if w == "penalty")
    assert {t.dtype for t in _weights(loop.out).values()} == {torch.float32}
    # float32: no autocast anywhere
    fp32 = _run(tmp_path / "fp32", max_steps=10)
    assert fp32.seen and all(not on and dtype == torch.float32 for _, on, dtype in fp32.seen)
    # the same steps: bfloat16 rounding moves the validation loss a little, not the run
    bf16_loss, fp32_loss = loop.state.valid_history[-1][1], fp32.state.valid_history[-1][1]
    assert bf16_loss != fp32_loss and bf16_loss == pytest.approx(fp32_loss, rel=5e-2)


# ------------------------------------------------------------------------------------------ earlier checkpoints


def test_states_of_earlier_checkpoints_resume_with_the_one_best_record(tmp_path):
    """Checkpoints written before the loop kept the best model: NLI's ``best_accuracy`` and loss-only
    history, logic's ``best_valid_accuracy`` (-1 when nothing was kept), the LM's best in ``best.json``."""
    from syntaxformer.tasks.logic import LogicTrainerState
    from syntaxformer.tasks.nli import NliTrainerState
    from syntaxformer.training.best import resumed_best
    from syntaxformer.training.loop import TrainerState

    selection = [[0, 0.0, 1.1, 33.3], [4, 1.0, 1.0, 66.7]]
    nli = NliTrainerState.resumed(
        dict(step=4, valid_history=[[0, 1.1], [4, 1.0]], selection=selection, best_step=4, best_accuracy=66.7)
    )
    assert nli.valid_history == [[0, 1.1, 33.3], [4, 1.0, 66.7]] and (nli.best_step, nli.best_value) == (4, 66.7)
    assert nli.resumed_from == [4] and nli.selection == selection
    kept = LogicTrainerState.resumed(dict(step=6, best_valid_accuracy=55.0, best_step=2))
    assert (kept.best_step, kept.best_value) == (2, 55.0)
    none = LogicTrainerState.resumed(dict(step=6, best_valid_accuracy=-1.0, best_step=None))
    assert (none.best_step, none.best_value) == (None, None)
    # the language model's: read back from OUT/best/best.json on a resume, not on a fresh start
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "best.json").write_text(json.dumps({"step": 40, "valid_loss": 4.25}))
    for state, expected in ((TrainerState.resumed(dict(step=50)), (40, 4.25)), (TrainerState(), (None, None))):
        resumed_best(state, tmp_path, "valid/loss")
        assert (state.best_step, state.best_value) == expected
