"""``--resume`` runs no code from the checkpoint: ``OUT/checkpoint.pt`` is read with
``torch.load(weights_only=True)`` (:func:`syntaxformer.training.checkpoint.load_checkpoint`). A file
holding any other pickled object, a damaged one and one that is no training checkpoint are refused in
one :class:`InputError` line naming the file; the writer stores plain values, so the trainer's own
checkpoint (with a structure source among its options) loads and resumes."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.serialization import get_unsafe_globals_in_checkpoint

from syntaxformer.cli import main
from syntaxformer.data.structure_source import StructureSource
from syntaxformer.errors import InputError
from syntaxformer.tasks.run import train
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.checkpoint import CHECKPOINT, load_checkpoint, read_checkpoint, write_checkpoint

torch.set_num_threads(1)


class Payload:
    """An object whose unpickling creates a file: what a malicious checkpoint would run."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


class Settings:
    """A plain instance of a class of the program that wrote the file."""

    def __init__(self):
        self.lr = 0.1


def _blob(**extra) -> dict:
    return dict(
        model=torch.nn.Linear(2, 2).state_dict(),
        optimizer={"state": {}, "param_groups": [{"lr": 0.1, "betas": (0.9, 0.98), "params": [0, 1]}]},
        scheduler={"last_epoch": 3, "lr_lambdas": [None]},
        state={"step": 3, "valid_history": [[2, 5.5]]},
        args={"out": "run", "seed": 0},
        world_size=1,
        **extra,
    )


def test_a_pickled_object_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / CHECKPOINT
    torch.save(_blob(extra=Payload(marker)), path)
    with pytest.raises(InputError) as error:
        load_checkpoint(path)
    assert str(error.value) == (
        f"{path}: refused: the checkpoint holds a pickled io.open, not a tensor or plain value; loading it "
        "would run code from the file"
    )
    assert not marker.exists()  # nothing of the file ran


def test_an_instance_of_a_class_is_refused_by_resume(tmp_path):
    torch.save(_blob(settings=Settings()), tmp_path / CHECKPOINT)
    with pytest.raises(InputError, match=r"holds a pickled \S*Settings, not a tensor or plain value") as error:
        read_checkpoint(TrainArguments(out=str(tmp_path), resume=True), world=1)
    assert str(error.value).startswith(str(tmp_path / CHECKPOINT)) and "\n" not in str(error.value)


def test_train_resume_prints_the_refusal_in_one_line(tmp_path, capsys):
    torch.save(_blob(settings=Settings()), tmp_path / CHECKPOINT)
    argv = ["train", "--out", str(tmp_path), "--resume", "--corpus", "ptb-sample:dev", "--preset", "tiny"]
    argv += ["--max-steps", "2"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"syntaxformer train: error: {tmp_path / CHECKPOINT}: refused: the checkpoint holds a")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "content, message",
    [
        (lambda path: path.write_bytes(b"not a checkpoint"), "not a readable checkpoint (damaged"),
        (lambda path: _truncated(path), "not a readable checkpoint (truncated or damaged: "),
        (lambda path: torch.save(torch.zeros(3), path), "not a training checkpoint: no state, args, world_size"),
        (lambda path: torch.save({"model": {}, "state": {}}, path), "not a training checkpoint: no args, world_size"),
    ],
)
def test_damaged_or_foreign_files_are_one_line(tmp_path, content, message):
    path = tmp_path / CHECKPOINT
    content(path)
    with pytest.raises(InputError) as error:
        load_checkpoint(path)
    assert str(error.value).startswith(f"{path}: {message}") and "\n" not in str(error.value)


def test_a_truncated_checkpoint_names_the_first_sentence_of_torchs_reason(tmp_path):
    """torch's message runs on ("This is an internal miniz error..."): only its first sentence, whole."""
    path = tmp_path / CHECKPOINT
    _truncated(path)
    with pytest.raises(InputError) as error:
        load_checkpoint(path)
    assert str(error.value) == (
        f"{path}: not a readable checkpoint (truncated or damaged: PytorchStreamReader failed reading zip archive: "
        "failed finding central directory)"
    )


def _truncated(path: Path) -> None:
    torch.save(_blob(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_the_writer_stores_plain_values(tmp_path):
    """A structure source, a path, numpy scalars and a tuple: stored as the string, the numbers and a
    tuple, so the file loads with weights_only; the model's state dict keeps its metadata."""
    path = tmp_path / CHECKPOINT
    blob = _blob()
    blob["args"].update(trees=StructureSource("induced:some/model"), init_from=Path("a/b"), betas=(0.9, 0.98))
    blob["state"].update(best=np.float64(1.5), epoch=np.int64(2))
    write_checkpoint(path, blob)
    assert get_unsafe_globals_in_checkpoint(path) == []
    loaded = load_checkpoint(path)
    assert loaded["args"] == {
        "out": "run",
        "seed": 0,
        "trees": "induced:some/model",
        "init_from": "a/b",
        "betas": (0.9, 0.98),
    }
    assert type(loaded["args"]["trees"]) is str and type(loaded["args"]["init_from"]) is str
    assert loaded["state"]["best"] == 1.5 and type(loaded["state"]["best"]) is float
    assert loaded["state"]["epoch"] == 2 and type(loaded["state"]["epoch"]) is int
    assert isinstance(loaded["model"], OrderedDict) and loaded["model"]._metadata == blob["model"]._metadata
    assert all(torch.equal(loaded["model"][k], v) for k, v in blob["model"].items())
    assert not (tmp_path / "checkpoint.pt.tmp").exists()


#: A tiny run on ptb-sample:dev, checkpointed every 2 steps.
TINY = dict(corpus="ptb-sample:dev", preset="tiny", batch_size=8, save_every=2, threads=1, quiet=True, seed=0)


def test_a_trainer_checkpoint_with_a_structure_source_loads_and_resumes(tmp_path):
    """A run reading gold trees (a structure source among its options): its checkpoint holds nothing
    ``weights_only`` refuses, and the run resumes from it."""
    kw = dict(
        TINY,
        out=str(tmp_path),
        prior="structural-position",
        trees="gold",
        overrides={"structural_max_relative": 4},
        schedule_steps=4,
    )
    train(max_steps=2, **kw)
    path = tmp_path / CHECKPOINT
    assert get_unsafe_globals_in_checkpoint(path) == []
    checkpoint = read_checkpoint(TrainArguments(**{**kw, "max_steps": 4, "resume": True}), world=1)
    assert checkpoint["state"]["step"] == 2 and checkpoint["args"]["trees"] == "gold"
    train(max_steps=4, resume=True, **kw)
    assert load_checkpoint(path)["state"]["step"] == 4 and load_checkpoint(path)["state"]["resumed_from"] == [2]


def test_a_trainer_checkpoint_with_a_learning_curve_loads(tmp_path):
    """A run scoring a learning curve: its points in the checkpoint's state are plain values too."""
    train(out=str(tmp_path), max_steps=2, eval_treebank="ptb-sample:dev", eval_every=2, **TINY)
    path = tmp_path / CHECKPOINT
    assert get_unsafe_globals_in_checkpoint(path) == []
    assert load_checkpoint(path)["state"]["parse_curve"]


def test_resume_check_counts_a_relative_and_an_absolute_path_to_one_file_as_the_same_option(tmp_path, monkeypatch):
    from dataclasses import asdict

    from syntaxformer.training.checkpoint import check_resume

    (tmp_path / "data").mkdir()
    for name in ("a.txt", "b.txt"):
        (tmp_path / "data" / name).write_text("the cat sat\n")
    monkeypatch.chdir(tmp_path / "data")
    first = TrainArguments(out=str(tmp_path / "run"), corpus=str(tmp_path / "data" / "a.txt"), resume=True)
    blob = {"args": asdict(first), "world_size": 1}
    check_resume(TrainArguments(out=first.out, corpus="a.txt", resume=True), blob, 1, tmp_path / "c.pt")
    check_resume(TrainArguments(out=first.out, corpus="../data/a.txt", resume=True), blob, 1, tmp_path / "c.pt")
    with pytest.raises(InputError, match=r"other options \(corpus: '.*a\.txt' -> 'b\.txt'\)"):
        check_resume(TrainArguments(out=first.out, corpus="b.txt", resume=True), blob, 1, tmp_path / "c.pt")
