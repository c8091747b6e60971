"""Start-up of the command line: a command imports only its own module, and ``parse`` of a small input runs
on one CPU thread with the same trees (benchmarks/speed/parse_startup.py measures the time; no timing here)."""

from __future__ import annotations

import argparse
import gc
import io
import itertools
import sys
import types

import numpy as np
import pytest
import torch

from syntaxformer.cli import COMMANDS, build_parser, command_name, main
from syntaxformer.cli.parse import cpu_threads
from syntaxformer.data.preprocess import load_gold_trees
from syntaxformer.errors import InputError
from syntaxformer.parser import load_parser


def _commands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_command_name_is_the_first_non_option():
    assert command_name(["-v", "parse", "--input", "-", "--out", "x"]) == "parse"
    assert command_name(["--verbose", "induce"]) == "induce"
    assert command_name(["--help"]) is None
    assert command_name([]) is None


def test_a_named_command_registers_only_itself_with_the_same_help():
    one, every = build_parser("parse"), build_parser()
    assert list(_commands(one).choices) == ["parse"]
    assert list(_commands(every).choices) == COMMANDS
    assert _commands(one).choices["parse"].format_help() == _commands(every).choices["parse"].format_help()
    assert one.format_usage() == every.format_usage()


def test_unknown_command_lists_every_command(capsys):
    assert list(_commands(build_parser("pars")).choices) == COMMANDS
    with pytest.raises(SystemExit) as stop:
        main(["pars"])
    assert stop.value.code == 2
    assert "invalid choice: 'pars' (choose from 'induce', 'train', 'parse'," in capsys.readouterr().err


def test_cpu_threads():
    def args(threads=None, batch_size=64):
        return argparse.Namespace(threads=threads, batch_size=batch_size)

    assert cpu_threads(args(), 1) == 1
    assert cpu_threads(args(), 64) == 1
    assert cpu_threads(args(), 65) is None  # more than one batch: PyTorch's default
    assert cpu_threads(args(threads=3), 1) == 3
    assert cpu_threads(args(threads=2), 1000) == 2
    with pytest.raises(InputError, match="--threads must be at least 1, got 0"):
        cpu_threads(args(threads=0), 1)


def test_parse_of_one_sentence_runs_on_one_thread(two_threads, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("The old man sat on the bench .\n"))
    assert main(["parse", "--input", "-", "--out", str(tmp_path)]) == 0
    assert torch.get_num_threads() == 1
    assert (tmp_path / "trees.txt").read_text(encoding="utf-8").count("\n") == 1
    capsys.readouterr()


def test_trees_and_structures_do_not_depend_on_the_thread_count(two_threads):
    """The shipped parser on the first 100 sentences of ptb-sample: 1 and 2 threads give the same trees
    and bit-identical constituency structures (syntactic distances; link probabilities) and dependency
    distributions."""
    parser = load_parser()
    sentences = [t.leaves() for t in itertools.islice(load_gold_trees("ptb-sample"), 100)]
    results = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        trees, _, structures = parser.parse_tokens(sentences, punctuation=False)
        arrays = [(s.distances, s.link_probs, s.dependency_probs) for s in structures]
        results[threads] = ([str(t) for t in trees], arrays)
    assert results[1][0] == results[2][0]
    # the default parser's structure is compared, not only Nones (a StructFormer: its syntactic distances)
    assert structures[0].link_probs is not None or structures[0].distances is not None
    for one, two in zip(results[1][1], results[2][1]):
        assert all((a is None and b is None) or np.array_equal(a, b) for a, b in zip(one, two))


def test_the_entry_point_freezes_the_collector_before_exit(tmp_path, monkeypatch, capsys):
    """``main()`` (argv None: the process is the command) freezes the objects left; ``main(argv)`` does not."""
    monkeypatch.delitem(sys.modules, "triton", raising=False)  # (Triton's own case: the next test)
    monkeypatch.setattr("sys.stdin", io.StringIO("The old man sat on the bench .\n"))
    assert gc.get_freeze_count() == 0
    assert main(["parse", "--input", "-", "--out", str(tmp_path / "a"), "--threads", "1"]) == 0
    assert gc.get_freeze_count() == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("The old man sat on the bench .\n"))
    monkeypatch.setattr("sys.argv", ["syntaxformer", "parse", "--input", "-", "--out", str(tmp_path / "b")])
    try:
        assert main() == 0
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert (tmp_path / "a" / "trees.txt").read_text() == (tmp_path / "b" / "trees.txt").read_text()
    capsys.readouterr()


def test_the_entry_point_leaves_the_collector_once_triton_is_imported(tmp_path, monkeypatch, capsys):
    """Triton's bindings print a leak report at exit for every object a frozen collector kept: no freeze."""
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))
    monkeypatch.setattr("sys.stdin", io.StringIO("The old man sat on the bench .\n"))
    monkeypatch.setattr("sys.argv", ["syntaxformer", "parse", "--input", "-", "--out", str(tmp_path / "b")])
    try:
        assert main() == 0
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
    capsys.readouterr()
