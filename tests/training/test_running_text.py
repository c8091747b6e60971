"""Running-text language modelling with the AWD-LSTM procedure (the ON-LSTM's paper recipe): the stream
and its windows, the regularisers, NT-ASGD's trigger, the carried state, the learning rate per window,
the best-validation model and an exact resume, each against hand-worked values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from syntaxformer.data.running_text import BpttWindows, batchify, evaluation_windows, token_stream, window
from syntaxformer.data.tokenization import BOUNDARY_ID
from syntaxformer.errors import InputError
from syntaxformer.tasks.run import train
from syntaxformer.tasks.running_text import RunningTextState, RunningTextTrainer, activation_regularisation
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.callbacks import TrainerCallback

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------------ the stream


def test_token_stream_puts_the_boundary_after_every_sentence():
    assert token_stream([[7, 8], [9]]) == [7, 8, BOUNDARY_ID, 9, BOUNDARY_ID]
    assert token_stream([[7], [], [9]], eos_id=1) == [7, 1, 1, 9, 1]


def test_batchify_cuts_contiguous_rows_and_drops_the_remainder():
    rows = batchify(list(range(11)), 3)
    assert rows.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    with pytest.raises(ValueError, match="cannot fill 3 rows"):
        batchify([1, 2, 3, 4, 5], 3)


def test_window_targets_are_one_token_later_and_cut_at_the_end():
    data = torch.arange(12).view(2, 6)
    inputs, targets = window(data, 1, 3)
    assert inputs.tolist() == [[1, 2, 3], [7, 8, 9]] and targets.tolist() == [[2, 3, 4], [8, 9, 10]]
    inputs, targets = window(data, 3, 70)  # only 6 - 1 - 3 = 2 positions have a target
    assert inputs.tolist() == [[3, 4], [9, 10]] and targets.tolist() == [[4, 5], [10, 11]]
    with pytest.raises(ValueError, match="no target"):
        window(data, 5, 3)


class _Draws:
    """A generator stand-in returning fixed values for ``random()`` and ``normal(mean, std)``."""

    def __init__(self, uniform: float, normal_offset: float):
        self.uniform, self.offset, self.means = uniform, normal_offset, []

    def random(self):
        return self.uniform

    def normal(self, mean, std):
        self.means.append((mean, std))
        return mean + self.offset


def test_window_length_rule_of_the_public_loop():
    windows = BpttWindows(1000, bptt=70)
    full = _Draws(0.5, 1.9)
    assert windows.draw_length(full) == 71 and full.means == [(70, 5.0)]  # int() truncates 71.9
    half = _Draws(0.96, -0.5)
    assert windows.draw_length(half) == 34 and half.means == [(35.0, 5.0)]  # bptt / 2 with p = 0.05
    assert windows.draw_length(_Draws(0.5, -80.0)) == 5  # never under 5 tokens


def test_an_epochs_windows_tile_the_stream_and_depend_on_seed_and_epoch():
    windows = BpttWindows(500, bptt=20, seed=4)
    epoch0 = windows.batches(0)
    starts = [s for s, _ in epoch0]
    assert starts[0] == 0 and all(b == a + n for (a, n), b in zip(epoch0, starts[1:]))
    assert starts[-1] < 500 - 2 <= starts[-1] + epoch0[-1][1]
    assert all(n >= 5 for _, n in epoch0)
    assert BpttWindows(500, bptt=20, seed=4).batches(0) == epoch0  # seeded: a resumed run draws the same
    assert windows.batches(1) != epoch0 and BpttWindows(500, bptt=20, seed=5).batches(0) != epoch0
    lengths = np.array([n for e in range(40) for _, n in BpttWindows(10_000, 70, seed=e).batches(0)])
    assert 0.02 < np.mean(lengths < 50) < 0.08  # about 5% of windows are drawn around bptt / 2


def test_evaluation_windows_step_by_bptt_below_the_last_token():
    assert evaluation_windows(10, 4) == [(0, 4), (4, 4), (8, 4)]
    assert evaluation_windows(9, 4) == [(0, 4), (4, 4)]


# ------------------------------------------------------------------------------------------ the loss


def test_activation_regularisation_by_hand():
    dropped = torch.tensor([[[1.0, 2.0], [3.0, 4.0]]])  # mean of squares 30 / 4 = 7.5
    raw = torch.tensor([[[0.0, 0.0], [1.0, 2.0], [1.0, 2.0]]])  # differences (1, 2), (0, 0): mean 5 / 4
    assert float(activation_regularisation(dropped, raw, 2.0, 0.0)) == 15.0
    assert float(activation_regularisation(dropped, raw, 0.0, 1.0)) == 1.25
    assert float(activation_regularisation(dropped, raw, 2.0, 1.0)) == 16.25
    assert float(activation_regularisation(dropped, raw, 0.0, 0.0)) == 0.0


# ------------------------------------------------------------------------------------------ NT-ASGD


def _bare_trainer(tmp_path, **fields) -> RunningTextTrainer:
    """A trainer with a one-layer model and SGD, not built: enough for the optimiser switch."""
    args = TrainArguments(
        out=str(tmp_path), model="on-lstm", bptt=8, optimizer="sgd", lr=2.0, epochs=1, weight_decay=0.1, **fields
    )
    trainer = RunningTextTrainer(args)
    trainer.model = torch.nn.Linear(2, 2)
    trainer.optimizer = trainer.make_optimizer(trainer.model.parameters())
    trainer.scheduler = trainer.make_scheduler()
    trainer.state = RunningTextState()
    return trainer


def test_nt_asgd_switches_when_the_loss_is_above_the_best_before_the_last_nonmono(tmp_path):
    trainer = _bare_trainer(tmp_path, nonmono=2)
    # epoch 4 compares 3.5 with min(5.0) = 5.0, epoch 5 2.9 with min(5.0, 4.0); epoch 6: 4.5 > min(5, 4, 3)
    for epoch, loss in enumerate([5.0, 4.0, 3.0, 3.5, 2.9], start=1):
        trainer.state.epoch = epoch - 1
        trainer.after_epoch_validation(loss)
        assert not trainer.averaging, epoch
    trainer.state.epoch, trainer.state.step = 5, 60
    trainer.after_epoch_validation(4.5)
    assert trainer.averaging and (trainer.state.asgd_since_epoch, trainer.state.asgd_since_step) == (6, 60)
    group = trainer.optimizer.param_groups[0]
    assert (group["lr"], group["t0"], group["lambd"], group["weight_decay"]) == (2.0, 0, 0.0, 0.1)
    assert trainer.state.sgd_valid_losses == [5.0, 4.0, 3.0, 3.5, 2.9, 4.5]


def test_nt_asgd_needs_more_than_nonmono_validations_and_an_sgd_run(tmp_path):
    trainer = _bare_trainer(tmp_path, nonmono=3)
    for loss in (1.0, 2.0, 3.0, 4.0):  # rising, but at most 3 earlier validations (not more than 3)
        trainer.after_epoch_validation(loss)
    assert not trainer.averaging
    trainer.after_epoch_validation(5.0)  # 4 earlier ones, and 5.0 > min(1.0): the first but the last 3
    assert trainer.averaging
    never = _bare_trainer(tmp_path, nonmono=0)
    for loss in (1.0, 2.0, 3.0, 4.0, 5.0):
        never.after_epoch_validation(loss)
    assert not never.averaging


def test_averaging_restarts_after_the_named_epoch(tmp_path):
    trainer = _bare_trainer(tmp_path, nonmono=1, asgd_restart_epoch=4)
    trainer.switch_to_averaging()
    first = trainer.optimizer
    trainer.state.epoch = 2  # epoch 3 ends: no restart
    trainer.after_epoch_validation(1.0)
    assert trainer.optimizer is first
    trainer.state.epoch = 3  # epoch 4 ends
    trainer.after_epoch_validation(1.0)
    assert trainer.optimizer is not first and isinstance(trainer.optimizer, torch.optim.ASGD)


def test_sgd_without_running_text_is_refused():
    with pytest.raises(InputError, match="--optimizer sgd .* give --bptt"):
        TrainArguments(out="x", model="on-lstm", optimizer="sgd", max_steps=1).check()
    with pytest.raises(InputError, match="--bptt must be at least 1"):
        TrainArguments(out="x", model="on-lstm", bptt=0, max_steps=1).check()


# ------------------------------------------------------------------------------------------ a run


@pytest.fixture(scope="module")
def text(tmp_path_factory) -> tuple[Path, Path]:
    """A small training text and validation text: sentences over a vocabulary of 12 words."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]
    folder = tmp_path_factory.mktemp("running-text")
    paths = []
    for name, n in (("train.txt", 80), ("valid.txt", 20)):
        lines = [" ".join(rng.choice(words, size=rng.integers(3, 9))) for _ in range(n)]
        (folder / name).write_text("\n".join(lines) + "\n")
        paths.append(folder / name)
    return paths[0], paths[1]


def _args(out, text, **fields) -> dict:
    return dict(
        out=str(out),
        model="on-lstm",
        preset="tiny",
        corpus=str(text[0]),
        valid=str(text[1]),
        min_freq=1,
        bptt=8,
        batch_size=4,
        eval_batch_size=2,
        optimizer="sgd",
        lr=1.0,
        clip=0.25,
        ar_alpha=2.0,
        tar_beta=1.0,
        seed=5,
        threads=1,
        quiet=True,
        save_every=5,
        log_every=1,
        keep_best=True,
        final_model="best",
        **fields,
    )


class _Record(TrainerCallback):
    """Records each step's learning rate and the trainer's windows and carried state."""

    def __init__(self):
        self.lrs, self.windows, self.carried = [], [], []

    def on_step_end(self, trainer, output):
        self.lrs.append(output.lr)
        epoch_windows = trainer.sampler.batches(trainer.state.epoch)
        self.windows.append(epoch_windows[trainer.state.batch_in_epoch - 1])
        self.carried.append([[t.clone() for t in pair] for pair in trainer.state.carried_state])


def test_the_state_is_carried_between_windows_and_reset_each_epoch(tmp_path, text):
    args = TrainArguments(**_args(tmp_path / "run", text, epochs=2))
    record, received = _Record(), []
    trainer = RunningTextTrainer(args, callbacks=[record])
    trainer.build()
    model, forward = trainer.model, trainer.model.forward

    def recording_forward(*a, **kw):  # the state each training window starts from
        if model.training:
            received.append(kw.get("state"))
        return forward(*a, **kw)

    model.forward = recording_forward
    trainer.build = lambda: None  # built above, with the recording forward
    trainer.train()
    per_epoch = len(trainer.sampler.batches(0))
    assert received[0] is None and received[per_epoch] is None  # each epoch starts from zeros
    for step in (1, 2, per_epoch + 1):
        given = [torch.cat(pair) for pair in received[step]]
        assert all(torch.equal(g, torch.cat(c)) for g, c in zip(given, record.carried[step - 1]))
    # the learning rate of each step is lr x (drawn window length) / bptt
    assert record.lrs == [1.0 * n / 8 for _, n in record.windows]


def test_the_saved_model_is_the_best_on_validation_and_resume_is_exact(tmp_path, text):
    whole = Path(train(**_args(tmp_path / "whole", text, epochs=3)))
    record = json.loads((whole / "training.json").read_text())
    epoch_ends = [(step, loss) for step, loss in record["valid_history"] if step > 0]
    assert len(epoch_ends) == 3
    best_step, best_loss = min(epoch_ends, key=lambda x: x[1])
    assert record["running_text"]["selected"] == {"step": best_step, "valid_loss": best_loss}
    assert _weights(whole) == _weights(whole / "best")
    # a run stopped mid-epoch and resumed ends with the uninterrupted run's weights and history
    part = tmp_path / "part"
    train(**_args(part, text, epochs=3, max_steps=epoch_ends[0][0] + 3))
    resumed = Path(train(**_args(part, text, epochs=3, resume=True)))
    assert json.loads((resumed / "training.json").read_text())["valid_history"] == record["valid_history"]
    last = torch.load(whole / "checkpoint.pt", weights_only=True)["model"]
    again = torch.load(resumed / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(last[k], again[k]) for k in last)


def test_an_averaging_checkpoint_resumes_under_averaged_sgd(tmp_path, text):
    args = TrainArguments(**_args(tmp_path / "run", text, max_steps=3))
    trainer = RunningTextTrainer(args)
    trainer.build()
    trainer.switch_to_averaging()
    trainer.state.asgd_since_step = 0
    trainer._begin()
    for indices in trainer.sampler.batches(0)[:3]:
        trainer.training_step(indices)
    trainer.save()
    averages = {n: trainer.optimizer.state[p]["ax"].clone() for n, p in trainer.model.named_parameters()}
    again = RunningTextTrainer(TrainArguments(**_args(tmp_path / "run", text, max_steps=3, resume=True)))
    again.build()
    assert again.averaging and again.state.step == 3
    assert all(torch.equal(again.optimizer.state[p]["ax"], averages[n]) for n, p in again.model.named_parameters())


def _weights(folder: Path) -> dict:
    return {k: v.tolist() for k, v in load_file(folder / "model.safetensors").items()}
