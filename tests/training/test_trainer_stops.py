"""The trainer's stops other than ``max_steps``: SIGTERM (a clean checkpoint; resuming equals the
uninterrupted run), ``epochs`` and ``max_minutes`` (the stop reason in ``training.json``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from syntaxformer.tasks.language_model import CHECKPOINT, TRAINING_JSON
from syntaxformer.tasks.run import train

ROOT = Path(__file__).resolve().parents[2]

#: A tiny run on the first 200 sentences of ptb-sample:dev (190 for training, 10 held out).
TINY = dict(
    preset="tiny",
    batch_size=16,
    lr=3e-3,
    warmup_steps=2,
    schedule="linear",
    schedule_steps=200,
    save_every=5,
    eval_every=7,
    log_every=3,
    threads=1,
    quiet=True,
    seed=4,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from syntaxformer.data.corpus import load_corpus

    path = tmp_path_factory.mktemp("corpus") / "dev-200.txt"
    path.write_text("\n".join(" ".join(s) for s in load_corpus("ptb-sample:dev")[:200]) + "\n")
    return path


def _record(folder: Path) -> dict:
    return json.loads((folder / TRAINING_JSON).read_text())


def _cli(out: Path, corpus: Path, max_steps: int) -> list[str]:
    """The ``syntaxformer train`` command of :data:`TINY`."""
    options = dict(TINY, out=out, corpus=corpus, max_steps=max_steps)
    command = [sys.executable, "-m", "syntaxformer.cli", "train"]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        command += [flag] if value is True else [flag, str(value)]
    return command


def test_sigterm_saves_a_clean_checkpoint_and_resuming_equals_the_uninterrupted_run(tmp_path, corpus):
    out = tmp_path / "signalled"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        _cli(out, corpus, max_steps=100_000),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / CHECKPOINT).exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # never leave a 100,000-step run behind
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert "SIGTERM received" in err
    # a clean stop: training.json, the model and a checkpoint of the same step, no partial file
    record = _record(out)
    stopped_at = record["steps"]
    assert record["stopped"] == "signal" and 5 <= stopped_at < 100_000
    checkpoint = torch.load(out / CHECKPOINT, weights_only=False)
    assert checkpoint["state"]["step"] == stopped_at and not list(out.glob("*.tmp"))
    saved = load_file(str(out / "model.safetensors"))
    assert all(torch.equal(saved[k], v) for k, v in checkpoint["model"].items() if k in saved)
    # resume for a few more steps; the parameters equal those of a run never interrupted
    total = stopped_at + 4
    train(out=str(out), corpus=str(corpus), max_steps=total, resume=True, **TINY)
    reference = tmp_path / "reference"
    train(out=str(reference), corpus=str(corpus), max_steps=total, **TINY)
    resumed, uninterrupted = _record(out), _record(reference)
    assert resumed["resumed_from_steps"] == [stopped_at] and resumed["stopped"] == "max_steps"
    assert resumed["steps"] == uninterrupted["steps"] == total
    got, ref = load_file(str(out / "model.safetensors")), load_file(str(reference / "model.safetensors"))
    assert got.keys() == ref.keys()
    for k in ref:
        assert torch.equal(got[k], ref[k]), k
    assert resumed["valid_history"][-1] == uninterrupted["valid_history"][-1]


def test_epochs_stop(tmp_path, corpus):
    # 190 training sentences in batches of 16: 12 batches an epoch
    out = train(out=str(tmp_path / "epochs"), corpus=str(corpus), epochs=2, max_steps=1000, **TINY)
    record = _record(out)
    assert record["stopped"] == "epochs" and record["steps"] == 24 and record["epochs"] == 2.0
    assert record["tokens_seen"] == 2 * record["data"]["train_tokens"]
    # max_steps first: the other reason
    record = _record(train(out=str(tmp_path / "steps"), corpus=str(corpus), epochs=2, max_steps=13, **TINY))
    assert record["stopped"] == "max_steps" and record["steps"] == 13 and record["epochs"] == 1 + 1 / 12


def test_max_minutes_stop(tmp_path, corpus, step_clock):
    """With the ``step_clock`` fixture (0.7 s a step) a cap of 0.05 minutes (3 s) is passed by step 5
    (3.5 s; step 4 is at 2.8 s), so the run stops after exactly 5 steps, at 3.5 s."""
    out = train(out=str(tmp_path / "minutes"), corpus=str(corpus), max_minutes=0.05, **dict(TINY, schedule="constant"))
    record = _record(out)
    assert record["stopped"] == "max_minutes"
    assert record["steps"] == 5 and record["minutes"] == round(3.5 / 60, 3)
    assert torch.load(out / CHECKPOINT, weights_only=False)["state"]["step"] == 5
