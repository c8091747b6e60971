"""README.md works as written: its two set-up commands are the ones CI runs, every shell line calls the
virtual environment's programs (so it runs right after them), every ``syntaxformer`` line names a command
that exists with options its parser accepts, every command of the CLI is in the command table, and every
```python block runs (in a temporary folder; a block reading ``induce-out/model`` gets a tiny model there);
the quick start prints the tree drawing it shows; and neither it nor the docs name a commit of this
repository in prose."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from syntaxformer.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")

#: the set-up commands, exactly (a fresh clone: the main job; the tests, as .ci/run)
SETUP = [
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/syntaxformer induce --out induce-out",
    'python3 -m venv .venv && .venv/bin/pip install -e ".[dev]" && .venv/bin/python -m pytest -n 2 -q',
]


def fenced(language: str) -> list[str]:
    """The bodies of the README's fenced code blocks of ``language``."""
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.S | re.M)


def shell_lines() -> list[str]:
    """Every shell line of the README's ```sh blocks (continuation lines joined, comments dropped)."""
    lines = []
    for block in fenced("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def segments(line: str) -> list[list[str]]:
    """The simple commands of a shell line (split at ``&&``, ``|`` and ``;``), as argument lists."""
    return [shlex.split(part) for part in re.split(r"&&|\|\||[|;]", line) if part.strip()]


def syntaxformer_argv() -> list[list[str]]:
    return [words[1:] for line in shell_lines() for words in segments(line) if words[0].endswith("bin/syntaxformer")]


def test_the_setup_commands_are_in_the_readme_and_in_ci():
    lines = shell_lines()
    assert lines[:2] == SETUP
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    steps = [step.strip() for step in SETUP[1].split("&&")]  # CI runs the same steps, one per line, in order
    assert all(step in ci for step in steps)
    assert [ci.index(step) for step in steps] == sorted(ci.index(step) for step in steps)


def test_every_shell_line_runs_from_the_virtual_environment():
    """No bare ``syntaxformer`` / ``python`` / ``pip``: a fresh shell after the set-up has no activated venv."""
    allowed = {"echo", "cd", "cat"}
    for line in shell_lines():
        for words in segments(line):
            program = words[0]
            if words[:3] == ["python3", "-m", "venv"]:
                continue
            assert program.startswith(".venv/bin/") or program in allowed, f"README shell line {line!r}: {program}"


@pytest.mark.parametrize("argv", syntaxformer_argv(), ids=" ".join)
def test_readme_syntaxformer_lines_parse(argv):
    """The command exists (its --help works) and the line's options and values are ones it accepts."""
    command = argv[:2] if argv[0] in ("logic", "nli") else argv[:1]
    with pytest.raises(SystemExit) as help_exit:
        build_parser().parse_args([*command, "--help"])
    assert help_exit.value.code == 0
    args = build_parser().parse_args(argv)
    assert args.command == argv[0] and callable(args.func)


def test_the_command_table_lists_every_command():
    listed = re.findall(r"^\| `([a-z-]+)` \|", README, re.M)
    assert listed == [c for c in COMMANDS if c in listed] and set(listed) == set(COMMANDS)
    for command in listed:
        with pytest.raises(SystemExit) as help_exit:
            build_parser().parse_args([command, "--help"])
        assert help_exit.value.code == 0


@pytest.mark.parametrize("block", fenced("python"), ids=lambda b: b.strip().splitlines()[-1][:40])
def test_readme_python_blocks_run(block, tmp_path, monkeypatch, tiny_model):
    if "induce-out" in block:  # what `syntaxformer induce --out induce-out` leaves: a model folder
        shutil.copytree(tiny_model("tree-transformer"), tmp_path / "induce-out" / "model")
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README.md", "exec"), {"__name__": "__readme__"})


def test_quick_start_prints_the_tree_it_shows(capsys):
    """The quick start's Python block (the one with ``tree.pretty_print()``) prints the drawing of the
    ```text block that follows it, line for line (trailing spaces aside), and the drawing's bottom line
    is the sentence's tokens in order (each word under its own preterminal)."""
    blocks = re.findall(r"^```python\n(.*?)^```\n(.*?)^```text\n(.*?)^```", README, re.S | re.M)
    code, drawing = next((code, text) for code, between, text in blocks if "tree.pretty_print()" in code)
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    shown = drawing.splitlines()
    assert printed[: len(shown)] == shown
    assert shown[-1].split() == ["The", "old", "man", "sat", "on", "the", "bench", "."]


def test_readme_links_point_to_files_in_the_repository():
    """Relative links (the docs are read in the repository, not on a server) name files that exist."""
    targets = re.findall(r"\]\(([^)\s]+)\)", README)
    relative = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert relative, "the README links to its docs"
    missing = [t for t in relative if not (ROOT / t).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_readme_and_docs_name_no_commit_of_this_repository():
    """The README and the docs are for users: a run's code is named in its JSON report (``code``), not in
    prose. Every 7-40 digit hex word of README.md, docs/ and the READMEs of benchmarks/ that is a commit of this
    repository fails (commits of other repositories, cited as sources, are not commits here)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: commits cannot be told from other hex words")
    pages = [
        ROOT / "README.md",
        *sorted((ROOT / "benchmarks").rglob("README.md")),
        *sorted((ROOT / "docs").rglob("*.md")),
    ]
    words = {
        (page.relative_to(ROOT).as_posix(), word)
        for page in pages
        for word in re.findall(r"\b[0-9a-f]{7,40}\b", page.read_text(encoding="utf-8"))
        if re.search(r"[a-f]", word) and re.search(r"[0-9]", word)
    }
    assert words, "the pages hold hex words to check (the compound-pcfg commits the protocols page cites)"
    found = sorted(
        (page, word)
        for page, word in words
        if subprocess.run(["git", "cat-file", "-e", f"{word}^{{commit}}"], cwd=ROOT, capture_output=True).returncode
        == 0
    )
    assert not found, f"commits of this repository named in prose: {found}"
