"""Data parallel under ``torchrun`` (2 CPU processes, gloo): the same parameters as one process
taking both processes' batches, resume under torchrun, a clear error for another number of
processes on resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from syntaxformer.data.batching import LengthBucketSampler, pad_batch
from syntaxformer.errors import InputError
from syntaxformer.tasks.language_model import TRAINING_JSON, TrainArguments, Trainer, _derived_seed
from syntaxformer.tasks.run import train
from syntaxformer.training.arguments import MASK_REPLACE
from syntaxformer.training.batch import TokenBatch
from syntaxformer.training.mlm import mask_tokens

ROOT = Path(__file__).resolve().parents[2]
NO_DROPOUT = {"hidden_dropout_prob": 0, "attention_probs_dropout_prob": 0}
# Adam's eps 1e-6 (not 1e-9): the attention key bias has a zero gradient in exact arithmetic (the
# softmax over keys ignores a shift), and with eps 1e-9 Adam turns its rounding noise, which differs
# between one and two processes, into steps of the full learning rate.
OPTIONS = dict(
    preset="tiny",
    batch_size=8,
    lr=3e-3,
    eps=1e-6,
    warmup_steps=2,
    schedule="linear",
    schedule_steps=10,
    save_every=3,
    eval_every=3,
    log_every=2,
    threads=1,
    quiet=True,
    seed=1,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from syntaxformer.data.corpus import load_corpus

    path = tmp_path_factory.mktemp("corpus") / "dev-200.txt"
    path.write_text("\n".join(" ".join(s) for s in load_corpus("ptb-sample:dev")[:200]) + "\n")
    return path


def _torchrun(out: Path, corpus: Path, max_steps: int, *extra: str) -> None:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "syntaxformer.cli",
        "train",
        "--out",
        str(out),
        "--corpus",
        str(corpus),
        "--max-steps",
        str(max_steps),
        *extra,
    ]
    for key, value in OPTIONS.items():
        flag = "--" + key.replace("_", "-")
        command += [flag] if value is True else [flag, str(value)]
    for key, value in NO_DROPOUT.items():
        command += ["--set", f"{key}={value}"]
    # its own session, so that a timeout kills the workers too (not only torchrun)
    with subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        start_new_session=True,
    ) as process:
        try:
            _, stderr = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            _, stderr = process.communicate()
            pytest.fail(f"torchrun still running after 300 s:\n{stderr[-3000:]}")
    assert process.returncode == 0, stderr[-3000:]


def _one_process_taking_both_batches(args: TrainArguments, steps: int) -> tuple[dict, dict, Trainer, dict]:
    """What 2 processes compute, in one: at step s, rank r's batch (every 2nd batch from r) masked
    with the generator of (seed, s, r); the loss is the mean of the two batch losses (DDP averages
    the gradients). Returns the parameters after 3 and after ``steps`` steps, the trainer, and the
    real tokens of both ranks' batches up to each of those steps."""
    trainer = Trainer(args)
    trainer.build()
    tokenizer, data = trainer.tokenizer, trainer.data
    shards = [
        LengthBucketSampler(
            [len(x) for x in data.train_ids],
            batch_size=args.batch_size,
            seed=args.seed,
            bucket_batches=args.bucket_batches,
            num_replicas=2,
            rank=r,
        ).batches(0)
        for r in (0, 1)
    ]
    assert len(shards[0]) >= steps
    snapshots, tokens, seen = {}, {}, 0
    for step in range(steps):
        losses = []
        for rank in (0, 1):
            ids, am = pad_batch([data.train_ids[i] for i in shards[rank][step]], tokenizer.pad_token_id)
            seen += int(am.sum())
            generator = torch.Generator().manual_seed(_derived_seed(args.seed, step, rank, 1))
            inputs, labels = mask_tokens(
                ids,
                am,
                tokenizer.mask_token_id,
                len(tokenizer),
                args.mask_rate,
                generator,
                data.special_ids,
                **MASK_REPLACE[args.mask_replace],
            )
            losses.append(trainer.model_loss(trainer.model, TokenBatch(inputs, am, labels)))
        trainer.optimizer.zero_grad()
        ((losses[0] + losses[1]) / 2).backward()
        torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), args.clip)
        trainer.optimizer.step()
        trainer.scheduler.step()
        if step + 1 in (3, steps):
            snapshots[step + 1] = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
            tokens[step + 1] = seen
    return snapshots[3], snapshots[steps], trainer, tokens


def _assert_parameters_close(folder: Path, expected: dict) -> None:
    got = load_file(str(folder / "model.safetensors"))
    assert got.keys() <= expected.keys() and got
    for k in got:
        torch.testing.assert_close(got[k], expected[k], rtol=0, atol=1e-5, msg=k)


def test_two_processes_equal_one_taking_the_same_batches_and_resume_under_torchrun(tmp_path, corpus):
    out = tmp_path / "ddp"
    _torchrun(out, corpus, max_steps=3)
    record = json.loads((out / TRAINING_JSON).read_text())
    assert record["world_size"] == 2 and record["steps"] == 3 and record["stopped"] == "max_steps"
    assert record["data"]["train_sentences"] == 190 and record["data"]["valid_sentences"] == 10
    args = TrainArguments(out=str(tmp_path / "one"), corpus=str(corpus), max_steps=6, overrides=NO_DROPOUT, **OPTIONS)
    after_3, after_6, one, tokens = _one_process_taking_both_batches(args, steps=6)
    _assert_parameters_close(out, after_3)
    # the two ranks' batches differ in length: the count is their sum, not rank 0's twice
    assert record["tokens_seen"] == tokens[3]

    # resume under torchrun: continues at step 4 and ends where the one process does
    _torchrun(out, corpus, 6, "--resume")
    record = json.loads((out / TRAINING_JSON).read_text())
    assert record["steps"] == 6 and record["steps_this_run"] == 3 and record["resumed_from_steps"] == [3]
    _assert_parameters_close(out, after_6)
    assert record["tokens_seen"] == tokens[6]
    # the validation loss over both processes' shares is the one-process validation loss
    assert [s for s, _ in record["valid_history"]] == [0, 3, 6]
    assert record["final_valid_loss"] == pytest.approx(one.validation_loss(), abs=1e-5)

    # resuming with another number of processes is a clear error, before any work
    with pytest.raises(InputError, match="trained with 2 processes, this run has 1"):
        train(
            TrainArguments(out=str(out), corpus=str(corpus), max_steps=8, resume=True, overrides=NO_DROPOUT, **OPTIONS)
        )
