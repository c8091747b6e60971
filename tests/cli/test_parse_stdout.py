"""``syntaxformer parse`` in a pipe: without ``--out`` (or with ``--out -``) the trees go to standard
output, one bracketed tree per input line in input order, a blank line giving the empty tree ``()``;
``--format conllu`` gives a StructFormer's dependencies in CoNLL-U (``# sent_id`` = the input line);
messages and drawings go to standard error. In process (``syntaxformer.cli.main``) on untrained
``tiny`` models, and once as a real process with the shipped parser."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from syntaxformer.cli import main
from syntaxformer.data.dependency import parse_conllu
from syntaxformer.data.treebank import parse_bracketed

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[2]

#: Two blank lines (one of spaces), a line with punctuation, a one-word line.
TEXT = "The old man sat on the bench\n\nStocks fell , analysts said .\n   \nYes\n"
LINES = [line.split() for line in TEXT.splitlines()]


def _run(capsys, monkeypatch, stdin: str, *argv) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def tt(tiny_model):
    return tiny_model("tree-transformer")


@pytest.fixture(scope="module")
def sf(tiny_model):
    return tiny_model("structformer")


def test_trees_on_stdout_one_per_input_line(capsys, monkeypatch, tt, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, monkeypatch, TEXT, "parse", "--model", tt, "--input", "-")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == len(LINES) == 5
    assert [lines[1], lines[3]] == ["()", "()"]  # the blank lines keep their places
    trees = parse_bracketed(out, "<stdout>")  # the project's reader reads the output back, one tree a line
    assert [t.leaves() for t in trees] == LINES
    assert err == "parsed 3 sentences from <stdin>; 2 blank line(s) kept as ()\n"
    assert list(tmp_path.iterdir()) == []  # no folder written
    # the same trees, byte for byte, as trees.txt with --out; and `--out -` is standard output
    assert _run(capsys, monkeypatch, TEXT, "parse", "--model", tt, "--input", "-", "--out", tmp_path / "o")[0] == 0
    assert (tmp_path / "o" / "trees.txt").read_text(encoding="utf-8") == out
    code, dash, _ = _run(capsys, monkeypatch, TEXT, "parse", "--model", tt, "--input", "-", "--out", "-")
    assert code == 0 and dash == out
    assert not (tmp_path / "-").exists()


def test_draw_goes_to_stderr_when_trees_go_to_stdout(capsys, monkeypatch, tt):
    code, out, err = _run(capsys, monkeypatch, "the old man sat\n", "parse", "--model", tt, "--input", "-", "--draw")
    assert code == 0, err
    assert len(out.splitlines()) == 1 and parse_bracketed(out)[0].leaves() == ["the", "old", "man", "sat"]
    assert "man" in err and "parsed 1 sentences" in err


def test_conllu_on_stdout(capsys, monkeypatch, sf, tmp_path):
    code, out, err = _run(capsys, monkeypatch, TEXT, "parse", "--model", sf, "--input", "-", "--format", "conllu")
    assert code == 0, err
    sentences = parse_conllu(out, "<stdout>")
    assert [list(s.words) for s in sentences] == [words for words in LINES if words]
    assert [line for line in out.splitlines() if line.startswith("# sent_id")] == [
        "# sent_id = 1",
        "# sent_id = 3",
        "# sent_id = 5",
    ]  # the input lines; blank lines have no sentence
    # the same as dependencies.conllu written with --out
    assert _run(capsys, monkeypatch, TEXT, "parse", "--model", sf, "--input", "-", "--out", tmp_path)[0] == 0
    assert (tmp_path / "dependencies.conllu").read_text(encoding="utf-8") == out
    assert len((tmp_path / "trees.txt").read_text(encoding="utf-8").splitlines()) == 5


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--format", "conllu"], "induces no dependency heads"),
        (["--json"], "--json writes OUT/structures.json: give --out DIR"),
        (["--out", "{tmp}", "--format", "trees"], "--format chooses what goes to standard output"),
    ],
)
def test_stdout_options_refused_in_one_line(capsys, monkeypatch, tt, tmp_path, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path / "o")) for a in argv]
    code, out, err = _run(capsys, monkeypatch, TEXT, "parse", "--model", tt, "--input", "-", *argv)
    assert code == 1 and out == ""
    assert err.startswith("syntaxformer parse: error:") and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_a_bad_line_is_named_by_its_line_number(capsys, monkeypatch, tt):
    """A line of only punctuation after a blank line: the error names line 3, not sentence 2."""
    code, out, err = _run(capsys, monkeypatch, "the old man\n\n. ,\n", "parse", "--model", tt, "--input", "-")
    assert code == 1 and out == ""
    assert err == "syntaxformer parse: error: <stdin>:3: nothing to parse: the sentence is only punctuation\n"


def test_shipped_parser_in_a_pipe():
    """``echo "the old man sat on the bench" | syntaxformer parse --input -``, as a process: one tree on
    standard output; on standard error only the summary line."""
    result = subprocess.run(
        [sys.executable, "-m", "syntaxformer.cli", "parse", "--input", "-"],
        input="the old man sat on the bench\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert parse_bracketed(lines[0])[0].leaves() == "the old man sat on the bench".split()
    # no progress bar, no log line (the shipped parser carries its decoder.json): only the summary
    assert result.stderr == "parsed 1 sentences from <stdin>\n"
