"""Training: BERT masking, length-bucketed batches, the trainer (resume after a kill, loss); data
parallel: tests/training/test_trainer_ddp.py."""

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

from syntaxformer.cli import main as cli_main
from syntaxformer.data.batching import LengthBucketSampler, pad_batch
from syntaxformer.errors import InputError
from syntaxformer.tasks.language_model import lr_factor
from syntaxformer.tasks.run import train
from syntaxformer.training.mlm import IGNORE_INDEX, mask_tokens

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------- masking


def _batch(B=400, N=60, V=1000, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(N // 2, N + 1, (B,), generator=g)
    am = (torch.arange(N)[None, :] < lengths[:, None]).long()
    ids = torch.randint(4, V, (B, N), generator=g) * am  # pad id 0
    return ids, am


def test_mask_tokens_rate_and_80_10_10():
    ids, am = _batch()
    inputs, labels = mask_tokens(
        ids,
        am,
        mask_token_id=2,
        vocab_size=1000,
        rate=0.15,
        generator=torch.Generator().manual_seed(1),
        special_ids=[0, 1, 2, 3],
    )
    selected = labels != IGNORE_INDEX
    n_real, n_sel = int(am.sum()), int(selected.sum())
    assert abs(n_sel / n_real - 0.15) < 0.01  # ~20k real tokens: sd of the rate ≈ 0.0025
    assert torch.equal(labels[selected], ids[selected])  # labels are the original tokens
    assert torch.equal(inputs[~selected], ids[~selected])  # unselected positions untouched
    masked = (inputs == 2) & selected
    kept = (inputs == ids) & selected
    randomised = selected & ~masked & ~kept
    assert abs(int(masked.sum()) / n_sel - 0.8) < 0.02
    # a random replacement may draw the original token (prob 1/996): "kept" ≈ 0.1 + 0.1/996
    assert abs(int(kept.sum()) / n_sel - 0.1) < 0.015
    assert abs(int(randomised.sum()) / n_sel - 0.1) < 0.015
    assert not ((inputs[randomised] < 4) | (inputs[randomised] >= 1000)).any()  # no special drawn
    assert not (selected & (am == 0)).any()  # padding never selected
    assert (inputs[am == 0] == 0).all()


def test_mask_tokens_public_code_rate_and_at_least_one():
    ids, am = _batch(seed=3)
    _, labels = mask_tokens(ids, am, 2, 1000, rate=0.142857, generator=torch.Generator().manual_seed(0))
    assert abs(int((labels != IGNORE_INDEX).sum()) / int(am.sum()) - 1 / 7) < 0.01
    # very short sentences: each still gets at least one selected token, never padding
    short_am = torch.zeros(500, 6, dtype=torch.long)
    short_am[:, :2] = 1
    short_ids = torch.full((500, 6), 0).masked_fill(short_am.bool(), 7)
    _, labels = mask_tokens(short_ids, short_am, 2, 1000, rate=0.15, generator=torch.Generator().manual_seed(0))
    selected = labels != IGNORE_INDEX
    assert selected.any(dim=1).all() and not selected[:, 2:].any()
    # a sentence of only special tokens has nothing to select
    _, labels = mask_tokens(
        torch.tensor([[3, 0]]),
        torch.tensor([[1, 0]]),
        2,
        10,
        special_ids=[0, 3],
        generator=torch.Generator().manual_seed(0),
    )
    assert (labels == IGNORE_INDEX).all()


def test_mask_tokens_is_deterministic_given_the_generator():
    ids, am = _batch(B=20)
    a = mask_tokens(ids, am, 2, 1000, generator=torch.Generator().manual_seed(5))
    b = mask_tokens(ids, am, 2, 1000, generator=torch.Generator().manual_seed(5))
    c = mask_tokens(ids, am, 2, 1000, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


# ---------------------------------------------------------------------------------------- batching

LENGTHS = [(i * 37) % 50 + 1 for i in range(1003)]


@pytest.mark.parametrize("kw", [dict(batch_size=16), dict(max_tokens=300), dict(batch_size=7, shuffle=False)])
def test_batches_cover_every_sentence_once_per_epoch(kw):
    sampler = LengthBucketSampler(LENGTHS, seed=1, bucket_batches=5, **kw)
    for epoch in (0, 1):
        batches = sampler.batches(epoch)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(len(LENGTHS)))
        if "max_tokens" in kw:
            assert all(len(b) * max(LENGTHS[i] for i in b) <= 300 for b in batches)
        else:
            assert all(len(b) <= kw["batch_size"] for b in batches)
    if kw.get("shuffle", True):
        assert sampler.batches(0) != sampler.batches(1)  # a new order every epoch
    assert sampler.batches(1) == LengthBucketSampler(LENGTHS, seed=1, bucket_batches=5, **kw).batches(1)


def test_bucketing_reduces_padding():
    def padding(batches):
        return sum(len(b) * max(LENGTHS[i] for i in b) - sum(LENGTHS[i] for i in b) for b in batches)

    bucketed = LengthBucketSampler(LENGTHS, batch_size=16, seed=0, bucket_batches=50).batches(0)
    plain = LengthBucketSampler(LENGTHS, batch_size=16, seed=0, bucket_batches=1).batches(0)
    assert padding(bucketed) < padding(plain) / 5


def test_ddp_shards_are_disjoint_and_equal_in_number():
    full = LengthBucketSampler(LENGTHS, batch_size=16, seed=2).batches(0)  # 63 batches
    shards = [LengthBucketSampler(LENGTHS, batch_size=16, seed=2, num_replicas=2, rank=r).batches(0) for r in (0, 1)]
    assert len(full) % 2 == 1 and len(shards[0]) == len(shards[1]) == (len(full) + 1) // 2
    assert shards[0] + shards[1][:-1] == full[0::2] + full[1::2]
    assert shards[1][-1] == full[0]  # the padding repeats the first batch


def test_pad_batch():
    ids, am = pad_batch([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and am.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_lr_schedules():
    assert [lr_factor(s, 4, "constant", None) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert lr_factor(4, 4, "linear", 14) == 1.0 and lr_factor(9, 4, "linear", 14) == 0.5
    assert lr_factor(14, 4, "linear", 14) == 0.0 and lr_factor(20, 4, "cosine", 14, 0.1) == pytest.approx(0.1)
    assert lr_factor(9, 4, "cosine", 14) == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------- trainer

TINY = dict(
    preset="tiny",
    batch_size=16,
    lr=3e-3,
    warmup_steps=3,
    schedule="linear",
    save_every=10,
    eval_every=15,
    log_every=5,
    threads=1,
    quiet=True,
    seed=3,
)
N_STEPS = 30


def _weights(folder) -> dict[str, torch.Tensor]:
    return load_file(str(Path(folder) / "model.safetensors"))


def _record(folder) -> dict:
    return json.loads((Path(folder) / "training.json").read_text())


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    """One uninterrupted tiny run of N_STEPS steps on ptb-sample."""
    out = tmp_path_factory.mktemp("reference")
    train(out=str(out), max_steps=N_STEPS, schedule_steps=N_STEPS, **TINY)
    return out


def test_cpu_training_flushes_denormals(tmp_path):
    # DESIGN.md §5: a CPU run flushes denormals; 1e-30 * 1e-10 would be a float32 denormal
    assert (torch.tensor([1e-30]) * torch.tensor([1e-10])).item() != 0.0  # IEEE before (conftest)
    train(out=str(tmp_path / "run"), max_steps=1, **TINY)
    assert (torch.tensor([1e-30]) * torch.tensor([1e-10])).item() == 0.0


def test_training_writes_a_loadable_model_and_the_loss_falls(reference_run):
    from transformers import AutoTokenizer

    out = reference_run
    for name in ("model.safetensors", "config.json", "tokenizer.json", "training.json", "checkpoint.pt"):
        assert (out / name).is_file(), name
    assert any((out / "tensorboard").iterdir())
    record = _record(out)
    assert record["steps"] == N_STEPS and record["stopped"] == "max_steps" and record["seed"] == 3
    assert record["data"]["train_sentences"] + record["data"]["valid_sentences"] == 3914
    assert record["data"]["train_over_max_length"] == 1  # one ptb-sample sentence has 171 words
    # MLM loss on the held-out slice (same masks each time) falls within 30 tiny steps
    assert record["final_valid_loss"] < record["initial_valid_loss"] - 0.3
    tok = AutoTokenizer.from_pretrained(out)
    assert len(tok) == record["tokenizer"]["vocab_size"]
    from transformers import AutoModelForMaskedLM

    import syntaxformer  # noqa: F401  (registers the model classes)

    model = AutoModelForMaskedLM.from_pretrained(out)
    saved = _weights(out)
    assert type(model).__name__ == "TreeTransformerForMaskedLM" and saved
    for k, v in model.state_dict().items():
        if k in saved:
            assert torch.equal(v, saved[k])


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    """The first 400 ptb-sample sentences as a text file (one sentence per line): quick to load."""
    from syntaxformer.data.corpus import load_corpus

    path = tmp_path_factory.mktemp("corpus") / "ptb-sample-400.txt"
    path.write_text("\n".join(" ".join(s) for s in load_corpus("ptb-sample")[:400]) + "\n")
    return path


@pytest.fixture(scope="module")
def small_reference(tmp_path_factory, small_corpus) -> Path:
    """An uninterrupted tiny run of N_STEPS steps on :func:`small_corpus`."""
    return train(
        out=str(tmp_path_factory.mktemp("small-reference")),
        corpus=str(small_corpus),
        max_steps=N_STEPS,
        schedule_steps=N_STEPS,
        **TINY,
    )


def test_resume_continues_at_the_next_step_with_identical_parameters(tmp_path, small_corpus, small_reference):
    out = tmp_path / "resumed"
    kw = dict(TINY, corpus=str(small_corpus), schedule_steps=N_STEPS)
    # stop at step 13 (a checkpoint there), the lr schedule still decaying towards step 30
    train(out=str(out), max_steps=13, **kw)
    assert torch.load(out / "checkpoint.pt", weights_only=False)["state"]["step"] == 13
    assert [s for s, _ in _record(out)["valid_history"]] == [0, 13]  # step 13 evaluated for the report
    with pytest.raises(InputError, match="--resume"):
        train(out=str(out), max_steps=N_STEPS, **kw)
    with pytest.raises(InputError, match="batch_size"):
        train(out=str(out), max_steps=N_STEPS, resume=True, **{**kw, "batch_size": 8})
    train(out=str(out), max_steps=N_STEPS, resume=True, **kw)
    record = _record(out)
    assert record["steps"] == N_STEPS and record["steps_this_run"] == N_STEPS - 13
    assert record["resumed_from_steps"] == [13]
    ref, got = _weights(small_reference), _weights(out)
    assert ref.keys() == got.keys()
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=0, atol=1e-6, msg=k)
    reference_history = _record(small_reference)["valid_history"]
    # the stop's evaluation is not in the checkpoint: the resumed run's history is the reference's
    assert [s for s, _ in record["valid_history"]] == [s for s, _ in reference_history] == [0, 15, 30]
    for (_, got), (_, value) in zip(record["valid_history"], reference_history):
        assert got == pytest.approx(value, abs=1e-6)


def test_resume_after_kill(tmp_path, small_corpus, small_reference):
    """SIGKILL a training process after its first checkpoint; resume; parameters match a run
    that was never interrupted."""
    reference = small_reference
    out = tmp_path / "killed"
    command = [
        sys.executable,
        "-m",
        "syntaxformer.cli",
        "train",
        "--out",
        str(out),
        "--preset",
        "tiny",
        "--corpus",
        str(small_corpus),
        "--batch-size",
        "16",
        "--lr",
        "3e-3",
        "--warmup-steps",
        "3",
        "--schedule",
        "linear",
        "--save-every",
        "4",
        "--eval-every",
        "15",
        "--log-every",
        "5",
        "--threads",
        "1",
        "--seed",
        "3",
        "--quiet",
        "--max-steps",
        str(N_STEPS),
        "--schedule-steps",
        str(N_STEPS),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (out / "checkpoint.pt").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert not (out / "training.json").exists()
    killed_at = torch.load(out / "checkpoint.pt", weights_only=False)["state"]["step"]
    assert 4 <= killed_at < N_STEPS and killed_at % 4 == 0
    subprocess.run(command + ["--resume"], cwd=ROOT, env=env, check=True, capture_output=True)
    record = _record(out)
    assert record["steps"] == N_STEPS and record["resumed_from_steps"] == [killed_at]
    assert record["steps_this_run"] == N_STEPS - killed_at
    ref, got = _weights(reference), _weights(out)
    assert ref.keys() == got.keys()
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=0, atol=1e-6, msg=k)


def test_cli_input_errors(tmp_path, capsys, small_corpus):
    assert cli_main(["train", "--out", str(tmp_path / "a"), "--preset", "tiny"]) == 1
    assert "stop condition" in capsys.readouterr().err
    assert (
        cli_main(["train", "--out", str(tmp_path / "a"), "--max-steps", "2", "--corpus", str(tmp_path / "missing.txt")])
        == 1
    )
    err = capsys.readouterr().err.strip()
    assert "missing.txt" in err and len(err.splitlines()) == 1
    assert cli_main(["train", "--out", str(tmp_path / "b"), "--max-minutes", "1", "--schedule", "linear"]) == 1
    assert "--max-steps" in capsys.readouterr().err
    assert (
        cli_main(
            [
                "train",
                "--out",
                str(tmp_path / "c"),
                "--max-steps",
                "1",
                "--corpus",
                str(small_corpus),
                "--preset",
                "tiny",
                "--set",
                "hiden_size=8",
            ]
        )
        == 1
    )
    assert "no config field hiden_size" in capsys.readouterr().err


def test_mask_replace_rules():
    # "mask" (public StructFormer code): every selected position becomes [MASK]; "bert": 80/10/10
    from syntaxformer.tasks.language_model import MASK_REPLACE
    from syntaxformer.training.mlm import mask_tokens

    ids = torch.randint(4, 1000, (64, 50), generator=torch.Generator().manual_seed(0))
    am = torch.ones_like(ids)
    for rule, expect_all_masked in (("mask", True), ("bert", False)):
        g = torch.Generator().manual_seed(1)
        inputs, labels = mask_tokens(ids, am, 2, 1000, 0.3, g, (0, 1, 2, 3), **MASK_REPLACE[rule])
        selected = labels != -100
        assert torch.equal(labels[selected], ids[selected])
        all_masked = bool((inputs[selected] == 2).all())
        assert all_masked == expect_all_masked, rule
        assert torch.equal(inputs[~selected], ids[~selected])


@pytest.mark.parametrize("device", ["gpu", "cuda:99"])
def test_bad_device_is_an_input_error_before_any_work(tmp_path, device):
    with pytest.raises(InputError, match="--device"):
        train(out=str(tmp_path / "run"), max_steps=1, device=device)
    assert not (tmp_path / "run").exists()


def test_prior_on_a_model_without_one_is_an_input_error(tmp_path):
    # StructFormer has no `prior` field: --prior none must not be silently recorded as a plain model
    with pytest.raises(InputError, match="no structural-prior option"):
        train(out=str(tmp_path / "run"), model="structformer", preset="tiny", prior="none", max_steps=1, quiet=True)


def test_a_prior_config_the_model_refuses_is_an_input_error(tmp_path):
    # the multi-granularity prior checks its per-head granularities when the layers are built
    with pytest.raises(InputError, match="mgsa_granularities gives 3 heads, the layer has 2"):
        train(
            out=str(tmp_path / "run"),
            preset="tiny",
            prior="multi-granularity",
            overrides={"mgsa_granularities": "word*2,2gram"},
            max_steps=1,
            quiet=True,
        )


def test_tensorboard_callback_without_tensorboard_warns_and_writes_nothing(tmp_path, monkeypatch, caplog):
    """A bare machine without the tensorboard package trains on: one warning, no events, no error."""
    from types import SimpleNamespace

    from syntaxformer.training.callbacks import TensorBoardCallback

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import raises ImportError
    callback = TensorBoardCallback()
    trainer = SimpleNamespace(out=tmp_path, state=SimpleNamespace(step=0))
    with caplog.at_level("WARNING", logger="syntaxformer.training.callbacks"):
        callback.on_train_begin(trainer)
    callback.on_log(trainer, {"train/loss": 1.0})
    callback.close(trainer)
    assert callback.writer is None and not (tmp_path / "tensorboard").exists()
    assert [r.message.split(" (")[0] for r in caplog.records] == ["no TensorBoard events"]


def test_the_checkpoint_period_grows_with_a_long_schedule():
    """Without --save-every: 500 steps, or a twentieth of a longer --max-steps schedule (the paper
    recipe's 60,000 steps: 3,000); --save-every given (0 included) is kept."""
    from syntaxformer.training.arguments import TrainArguments, checkpoint_period

    def period(**kw):
        return checkpoint_period(TrainArguments(out="x", **kw))

    assert [period(max_steps=n) for n in (20, 6000, 10_000, 10_019, 60_000)] == [500, 500, 500, 500, 3000]
    assert period(epochs=100) == period(max_minutes=5.0) == 500
    assert period(max_steps=60_000, save_every=0) == 0 and period(max_steps=60_000, save_every=250) == 250
