"""``syntaxformer logic train`` + ``logic evaluate`` on a fresh clone.

The tests of tests/tasks/test_logic.py need ``../shared/data/propositional-logic``; these write a tiny data
folder of their own (``train0 .. train12``, ``test0 .. test12``; ``RELATION TAB formula TAB formula``;
:func:`helpers.write_logic_folder`) whose relations are computed by truth tables over the variables
``a`` - ``f`` (MacCartney & Manning's 7 relations between the sets of assignments that satisfy each
formula), independent of the code under test. One run trains under ``--bf16`` (bfloat16
autocast, parameters float32).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import TEST_PER_FILE, relation, write_logic_folder
from safetensors.torch import load_file

import syntaxformer.tasks.logic as logic_module
import syntaxformer.workflows.logic as workflow_module
from syntaxformer.cli import main


def test_truth_table_relations_by_hand():
    a = lambda x: x["a"]  # noqa: E731
    b = lambda x: x["b"]  # noqa: E731
    assert relation(a, a) == "="
    assert relation(lambda x: x["a"] and x["b"], a) == "<"
    assert relation(a, lambda x: x["a"] and x["b"]) == ">"
    assert relation(a, lambda x: not x["a"]) == "^"
    assert relation(lambda x: x["a"] and x["b"], lambda x: not x["a"]) == "|"
    assert relation(lambda x: x["a"] or x["b"], lambda x: not x["a"]) == "v"
    assert relation(a, b) == "#"


@pytest.fixture(scope="module")
def logic_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("propositional-logic")
    return folder, write_logic_folder(folder)


def _train(data: Path, out: Path, precision: str) -> int:
    return main(
        [
            "logic",
            "train",
            "--corpus",
            str(data),
            "--out",
            str(out),
            "--architecture",
            "lstm",
            "--preset",
            "tiny",
            "--set",
            "embedding_size=16",
            "--set",
            "hidden_size=16",
            "--bf16" if precision == "bf16" else "--no-bf16",
            "--batch-size",
            "8",
            "--max-steps",
            "3",
            "--eval-every",
            "3",
            "--save-every",
            "3",
            "--seed",
            "1",
            "--device",
            "cpu",
            "--threads",
            "1",
            "--quiet",
            "--json",
        ]
    )


@pytest.fixture(scope="module")
def bf16_run(logic_folder, tmp_path_factory):
    """``logic train --bf16`` for 3 steps, with a forward hook on every ``nn.Linear`` of the
    classifier recording (training mode, autocast enabled, output dtype, weight dtype)."""
    folder, _ = logic_folder
    out = tmp_path_factory.mktemp("logic-bf16") / "run"
    seen: list[tuple[bool, bool, torch.dtype, torch.dtype]] = []
    real_build = logic_module.build_classifier
    real_load = workflow_module.PairClassifier.from_pretrained

    def hooked(model):
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.register_forward_hook(
                    lambda m, i, o: seen.append((m.training, torch.is_autocast_enabled("cpu"), o.dtype, m.weight.dtype))
                )
        return model

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logic_module, "build_classifier", lambda *a, **k: hooked(real_build(*a, **k)))
        mp.setattr(
            workflow_module,
            "PairClassifier",
            SimpleNamespace(from_pretrained=lambda *a, **k: hooked(real_load(*a, **k))),
        )
        capsys_out = _run_capturing(lambda: _train(folder, out, "bf16"))
    return out, capsys_out, seen


def _run_capturing(call):
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = call()
    assert code == 0
    return json.loads(buffer.getvalue())


def test_bf16_training_runs_under_autocast_with_float32_parameters(bf16_run):
    out, report, seen = bf16_run
    training_calls = [s for s in seen if s[0]]
    assert training_calls, "no forward pass in training mode"
    # every linear layer of a training step: autocast on, bfloat16 products, float32 weights
    assert all(autocast and out_dtype == torch.bfloat16 for _, autocast, out_dtype, _ in training_calls)
    assert all(weight == torch.float32 for *_, weight in seen)
    # validation (evaluation mode) under autocast too; the test of the reloaded best model in float32
    # (the option's help: "training and validation under torch.autocast ... test in float32")
    eval_calls = [s for s in seen if not s[0]]
    validation = [s for s in eval_calls if s[1]]
    testing = [s for s in eval_calls if not s[1]]
    assert validation and all(out_dtype == torch.bfloat16 for _, _, out_dtype, _ in validation)
    assert testing and all(out_dtype == torch.float32 for _, _, out_dtype, _ in testing)
    # saved parameters are float32; the report records the precision and the steps
    for name in ("model.safetensors", "best/model.safetensors"):
        tensors = load_file(out / name)
        assert {t.dtype for t in tensors.values()} == {torch.float32}, name
    assert report["training"]["arguments"]["precision"] == "bf16"
    assert json.loads((out / "training.json").read_text())["arguments"]["precision"] == "bf16"
    assert report["training"]["steps"] == 3 and report["training"]["stopped"] == "max_steps"


def test_fp32_training_has_no_autocast(logic_folder, tmp_path, monkeypatch):
    folder, _ = logic_folder
    seen = []
    real_build = logic_module.build_classifier

    def build(*args, **kwargs):
        model = real_build(*args, **kwargs)
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.register_forward_hook(lambda m, i, o: seen.append((torch.is_autocast_enabled("cpu"), o.dtype)))
        return model

    monkeypatch.setattr(logic_module, "build_classifier", build)
    report = _run_capturing(lambda: _train(folder, tmp_path / "run", "fp32"))
    assert seen and all(not autocast and dtype == torch.float32 for autocast, dtype in seen)
    assert report["training"]["arguments"]["precision"] == "fp32"


def test_train_and_evaluate_on_the_fixture(bf16_run, logic_folder, tmp_path):
    folder, relations = logic_folder
    out, report, _ = bf16_run
    training = report["training"]
    # 7 files of 12 pairs, every 10th pair (in file order) held out
    assert training["data"]["train_pairs"] == 76 and training["data"]["valid_pairs"] == 8
    assert training["data"]["train_files"] == [f"train{n}" for n in range(7)]
    assert report["model"] == str(out / "best")
    assert sorted(map(int, report["test"])) == list(range(1, 13))
    for n in range(1, 13):
        cell = report["test"][str(n)]  # JSON keys
        assert cell["pairs"] == TEST_PER_FILE
        assert cell["majority"] == pytest.approx(100 * relations[f"test{n}"].count("#") / TEST_PER_FILE)
        assert cell["accuracy"] == pytest.approx(100 * cell["correct"] / TEST_PER_FILE)
    for name in ("logic.json", "logic.md", "accuracy.png", "best/config.json"):
        assert (out / name).is_file(), name

    # the table path of the command (no --json): the summary line and the accuracy table are printed
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        argv = ["logic", "evaluate", "--model", str(out / "best"), "--corpus", str(folder)]
        assert main([*argv, "--out", str(tmp_path / "eval"), "--device", "cpu"]) == 0
    printed = buffer.getvalue()
    assert "lstm (preset tiny, pooling last, seed 1)" in printed and "| accuracy % |" in printed
    evaluated = json.loads((tmp_path / "eval" / "logic.json").read_text())
    assert {n: v["correct"] for n, v in evaluated["test"].items()} == {
        n: v["correct"] for n, v in report["test"].items()
    }
    assert evaluated["seed"] == 1 and evaluated["training"]["arguments"]["precision"] == "bf16"
    assert (tmp_path / "eval" / "logic.md").is_file()
