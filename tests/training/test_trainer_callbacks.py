"""Things plug into the trainer without editing its loop: callbacks given to ``Trainer`` are called
at the right steps, can evaluate at other steps and stop the run; a subclass changes the objective."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from syntaxformer.tasks.language_model import TRAINING_JSON, Trainer, initial_model
from syntaxformer.training import StopCondition, TrainArguments, TrainerCallback

TINY = dict(
    preset="tiny", batch_size=16, lr=3e-3, log_every=5, eval_every=4, save_every=5, threads=1, quiet=True, seed=2
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from syntaxformer.data.corpus import load_corpus

    path = tmp_path_factory.mktemp("corpus") / "dev-200.txt"
    path.write_text("\n".join(" ".join(s) for s in load_corpus("ptb-sample:dev")[:200]) + "\n")
    return path


class Recorder(TrainerCallback):
    """A custom evaluation: records the step of every hook call and, at each evaluation, the
    validation loss and a number computed from the model (the norm of all its parameters)."""

    def __init__(self):
        self.calls = {name: [] for name in ("begin", "step_end", "log", "evaluate", "save", "end")}
        self.evaluations = []

    def on_train_begin(self, trainer):
        self.calls["begin"].append(trainer.state.step)

    def on_step_end(self, trainer, output):
        self.calls["step_end"].append(trainer.state.step)
        assert output.tokens > 0 and output.lr > 0

    def on_log(self, trainer, scalars):
        if "train/loss" in scalars:
            self.calls["log"].append(trainer.state.step)

    def on_evaluate(self, trainer, metrics):
        self.calls["evaluate"].append(trainer.state.step)
        norm = torch.cat([p.detach().flatten() for p in trainer.model.parameters()]).norm()
        self.evaluations.append((trainer.state.step, metrics["valid/loss"], float(norm)))

    def on_save(self, trainer):
        self.calls["save"].append(trainer.state.step)

    def on_train_end(self, trainer):
        self.calls["end"].append(trainer.state.step)


class EvaluateAt(TrainerCallback):
    """Evaluates at the given steps too (besides the ``eval_every`` ones; at most once a step)."""

    def __init__(self, steps):
        self.steps = set(steps)

    def on_step_end(self, trainer, output):
        if trainer.state.step in self.steps:
            trainer.evaluate()


class StopAt(StopCondition):
    reason = "enough"

    def __init__(self, step):
        self.step = step

    def reached(self, trainer):
        return trainer.state.step >= self.step


def test_callbacks_are_called_at_the_right_steps(tmp_path, corpus):
    recorder = Recorder()
    args = TrainArguments(out=str(tmp_path / "run"), corpus=str(corpus), max_steps=20, **TINY)
    out = Trainer(args, callbacks=[recorder, EvaluateAt([3]), StopAt(11)]).train()
    record = json.loads((out / TRAINING_JSON).read_text())
    assert record["stopped"] == "enough" and record["steps"] == 11
    assert recorder.calls == dict(
        begin=[0], step_end=list(range(1, 12)), log=[5, 10], evaluate=[0, 3, 4, 8, 11], save=[5, 10, 11], end=[11]
    )
    # the custom evaluation saw the validation losses training.json records, and a changing model
    assert [[step, loss] for step, loss, _ in recorder.evaluations] == record["valid_history"]
    norms = [norm for _, _, norm in recorder.evaluations]
    assert len(set(norms)) == len(norms)


def test_the_final_checkpoint_is_written_once_when_current(tmp_path, corpus):
    """Step 20 is evaluated (eval_every 4) and saved (save_every 5) in the loop: the end of the run
    adds no second evaluation and no second checkpoint; a stop between periods saves at the end."""
    recorder = Recorder()
    args = TrainArguments(out=str(tmp_path / "run"), corpus=str(corpus), max_steps=20, **TINY)
    Trainer(args, callbacks=[recorder]).train()
    assert recorder.calls["save"] == [5, 10, 15, 20]
    assert recorder.calls["evaluate"] == [0, 4, 8, 12, 16, 20]
    recorder = Recorder()
    args = TrainArguments(out=str(tmp_path / "stop"), corpus=str(corpus), max_steps=20, **TINY)
    Trainer(args, callbacks=[recorder, StopAt(10)]).train()
    # step 10 was saved in the loop; its evaluation (for the report) comes after and is not checkpointed
    assert recorder.calls["save"] == [5, 10] and recorder.calls["evaluate"] == [0, 4, 8, 10]


class FrozenObjective(Trainer):
    """Another objective through the subclass hook: the masked-LM loss times zero (no gradient)."""

    def compute_loss(self, model, batch):
        return 0.0 * super().compute_loss(model, batch)


def test_a_subclass_changes_the_objective_and_validation_stays_the_mlm_loss(tmp_path, corpus):
    args = TrainArguments(out=str(tmp_path / "frozen"), corpus=str(corpus), max_steps=4, **TINY)
    out = FrozenObjective(args).train()
    record = json.loads((out / TRAINING_JSON).read_text())
    assert record["final_train_loss"] == 0.0
    # Adam with zero gradients never moves: the parameters are the initial ones
    initial = initial_model(args, record["tokenizer"]["vocab_size"]).state_dict()
    saved = load_file(str(out / "model.safetensors"))
    assert all(torch.equal(saved[k], initial[k]) for k in saved)
    # the validation loss is still the masked-LM loss, unchanged since the model is
    losses = [loss for _, loss in record["valid_history"]]
    assert losses[0] > 1 and losses == [losses[0]] * len(losses)


def test_keep_best_writes_the_model_of_the_lowest_validation_loss(tmp_path, corpus):
    from transformers import AutoModelForMaskedLM

    from syntaxformer.errors import InputError

    with pytest.raises(InputError, match="--keep-best needs validation data"):
        TrainArguments(
            out=str(tmp_path / "x"), corpus=str(corpus), max_steps=2, keep_best=True, valid_fraction=0, **TINY
        ).check()
    with pytest.raises(InputError, match="--keep-best with --head-gates"):
        TrainArguments(
            out=str(tmp_path / "x"),
            corpus=str(corpus),
            max_steps=2,
            keep_best=True,
            head_gates=True,
            init_from=str(tmp_path),
            **TINY,
        ).check()
    # a high learning rate on 200 sentences: the validation loss falls, then rises (overfitting)
    args = TrainArguments(
        out=str(tmp_path / "run"), corpus=str(corpus), max_steps=60, keep_best=True, **{**TINY, "lr": 1e-2}
    )
    trainer = Trainer(args)
    out = trainer.train()
    history = json.loads((out / TRAINING_JSON).read_text())["valid_history"]
    step, loss = min(history, key=lambda point: point[1])
    best = json.loads((out / "best" / "best.json").read_text())
    assert best == dict(step=step, valid_loss=loss)
    assert 0 < step < 60, "this run's lowest validation loss is before its last step"
    # the model in best/ has that validation loss; the last model (OUT/) has the last one
    trainer.model.load_state_dict(AutoModelForMaskedLM.from_pretrained(out / "best").state_dict())
    assert trainer.validation_loss() == pytest.approx(loss, abs=1e-6)
    assert (out / "best" / "tokenizer.json").is_file()


def test_a_stop_between_evaluations_resumes_as_the_uninterrupted_run_under_a_plateau_schedule(tmp_path, corpus):
    """A run stopped at step 14 (evaluations every 4) is evaluated there for its report only, after its
    checkpoint: the plateau schedule and the kept best model are not told, so ``--resume`` to step 28
    takes the learning rates, selections and weights of the run that was never stopped."""
    common = dict(
        corpus=str(corpus),
        max_steps=28,
        keep_best=True,
        schedule="plateau",
        plateau_patience=0,
        **{**TINY, "lr": 1e-2, "save_every": 0},
    )
    whole = Trainer(TrainArguments(out=str(tmp_path / "whole"), **common)).train()
    cut, recorder = tmp_path / "cut", Recorder()
    Trainer(TrainArguments(out=str(cut), **common), callbacks=[recorder, StopAt(14)]).train()
    stopped = json.loads((cut / TRAINING_JSON).read_text())
    assert stopped["stopped"] == "enough" and [row[0] for row in stopped["valid_history"]] == [0, 4, 8, 12, 14]
    assert recorder.calls["evaluate"] == [0, 4, 8, 12, 14] and recorder.calls["save"] == [14]
    saved = torch.load(cut / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert [row[0] for row in saved["state"]["valid_history"]] == [0, 4, 8, 12]
    Trainer(TrainArguments(out=str(cut), resume=True, **common)).train()
    straight, resumed = (json.loads((out / TRAINING_JSON).read_text()) for out in (whole, cut))
    assert resumed["valid_history"] == straight["valid_history"] and resumed["resumed_from_steps"] == [14]
    rates = [
        torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=False)["optimizer"]["param_groups"][0]["lr"]
        for out in (whole, cut)
    ]
    assert rates[0] == rates[1] < common["lr"], "the overfitting run halves its rate at least once"
    assert (cut / "best" / "best.json").read_text() == (whole / "best" / "best.json").read_text()
    a, b = load_file(whole / "model.safetensors"), load_file(cut / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_early_stopping_stops_after_patience_evaluations_without_a_lower_loss(tmp_path, corpus):
    from syntaxformer.errors import InputError

    with pytest.raises(InputError, match="--early-stopping needs validation data"):
        TrainArguments(
            out=str(tmp_path / "x"), corpus=str(corpus), max_steps=2, early_stopping=2, valid_fraction=0, **TINY
        ).check()
    # the overfitting run of the keep-best test, with patience 2 evaluations (eval_every 4)
    args = TrainArguments(
        out=str(tmp_path / "run"),
        corpus=str(corpus),
        max_steps=60,
        keep_best=True,
        early_stopping=2,
        **{**TINY, "lr": 1e-2},
    )
    out = Trainer(args).train()
    record = json.loads((out / TRAINING_JSON).read_text())
    history = record["valid_history"]
    best_step, _ = min(history, key=lambda point: point[1])
    assert record["stopped"] == "early_stopping"
    assert record["steps"] == best_step + 2 * TINY["eval_every"] < 60
    assert json.loads((out / "best" / "best.json").read_text())["step"] == best_step


def test_progress_lines_and_the_first_estimate(caplog, monkeypatch):
    """A log (no terminal) gets the planned steps, one estimate from the optimizer steps' time, and a
    progress line a minute naming steps, tokens/s, elapsed and remaining minutes and the last dev F1."""
    from types import SimpleNamespace

    from syntaxformer.training.callbacks import ProgressCallback, StepOutput

    clock = [1000.0]
    monkeypatch.setattr("syntaxformer.training.callbacks.time.monotonic", lambda: clock[0])
    state = SimpleNamespace(step=0, train_seconds=0.0, parse_curve=[])
    trainer = SimpleNamespace(args=SimpleNamespace(max_steps=100), state=state)
    progress = ProgressCallback()
    caplog.set_level("INFO", logger="syntaxformer.training.callbacks")
    progress.on_train_begin(trainer)
    for _ in range(40):  # 40 steps of 1.5 s (1 s of optimizer step each), a curve point at step 20
        clock[0] += 1.5
        state.step += 1
        state.train_seconds += 1.0
        if state.step == 20:
            state.parse_curve.append({"scores": {"layer0": {"sentence_f1": 40.0}, "algorithm1": {"sentence_f1": 45.5}}})
            progress.on_log(trainer, {"train/loss": 5.0, "train/lr": 1e-3, "train/tokens_per_second": 1234.0})
        progress.on_step_end(trainer, StepOutput(torch.tensor(5.0), 1e-3, 64, 1.5))
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "planned: 100 steps (from step 0)"
    assert messages[1] == (
        "estimate: 1.3 minutes of training steps for the remaining 80 (1.00 s a step over the first 20; evaluations extra)"
    )
    assert messages[2] == "progress: step 40 of 100, 1,234 tokens/s, elapsed 1.0 min, remaining 1.5 min, dev F1 45.50"
    assert len(messages) == 3
