"""Rules of the repository's text: code, tests, benchmarks and docs say what they mean, not which issue
of this project asked for them. A line citing an issue or pull request by number fails, unless it cites
another repository (a source): it names ``of that repo``, a ``GitHub issue``, a github.com address or an
``owner/repo#N`` reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the folders and files whose text is checked
CHECKED = ("syntaxformer", "tests", "benchmarks", "docs", "records", "README.md", "ARCHITECTURE.md")
#: the text files among them (binary files, e.g. model weights and PNGs, are not read)
SUFFIXES = {".py", ".md", ".json", ".svg", ".yml", ".yaml", ".toml", ".txt", ".sh", ".cfg", ".html", ".css", ".js"}

#: a citation by number: issue N, issues N and M, Issue N, item M, issue #N, #N items M-K, PR N, pull request #N
ISSUE_NUMBER = re.compile(
    r"\bissues?[ \t]*#?[0-9]+|#[0-9]+[ \t]+items?\b|\b(?:PR|pull request)[ \t]*#?[0-9]+", re.IGNORECASE
)
#: a line that cites another repository's issue: a source, not this project's history
OTHER_REPOSITORY = re.compile(r"of that repo|GitHub issue|github\.com/|\b[\w.-]+/[\w.-]+#[0-9]+", re.IGNORECASE)


def issue_numbers(text: str) -> list[tuple[int, str]]:
    """``(line number, citation)`` of every citation of this project's issues in ``text``."""
    return [
        (number, match.group(0))
        for number, line in enumerate(text.splitlines(), start=1)
        if not OTHER_REPOSITORY.search(line)
        for match in ISSUE_NUMBER.finditer(line)
    ]


def checked_files(root: Path) -> list[Path]:
    """The text files of :data:`CHECKED` under ``root``, caches left out."""
    files = []
    for name in CHECKED:
        path = root / name
        candidates = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        files += [
            f
            for f in candidates
            if f.is_file() and f.suffix in SUFFIXES and not {"__pycache__", ".pytest_cache"} & set(f.parts)
        ]
    return files


#: the examples and their citations with "~" removed (written apart here, so that this file cites nothing)
@pytest.mark.parametrize(
    "line, found",
    [
        ("(issue ~15 item 2 chooses recipes)", ["issue ~15"]),
        ("Training-step speed (issues ~3 and 5).", ["issues ~3"]),
        ("Issue ~38, item 1 (Throughput).", ["Issue ~38"]),
        ("Natural-language inference (#~14 items 2-3): readers", ["#~14 items"]),
        ("as asked in issue #~40 and in PR ~41", ["issue #~40", "PR ~41"]),
        ("after pull request ~9", ["pull request ~9"]),
        ("A public reproduction (issue #~12 of that repo): four seeds", []),
        ('"source": "yaushian/Tree-Transformer, GitHub issue ~12: four seeds"', []),
        ("not reproducible between processes (huggingface/tokenizers#1794); see issue ~3", []),
        ("see https://github.com/owner/repo/issues/7 (issue ~7)", []),
        ('Task #1: Masked LM; plot_trees(title="ptb-sample #3"); color: #212529', []),
        ("Where this page and an issue disagree, the issue wins.", []),
        ('"issue": 191, "issues": 246,', []),
    ],
)
def test_issue_citations_by_example(line, found):
    assert [citation for _, citation in issue_numbers(line.replace("~", ""))] == [c.replace("~", "") for c in found]


def test_no_issue_numbers_of_this_project():
    """No line of syntaxformer/, tests/, benchmarks/, docs/, records/, README.md or ARCHITECTURE.md cites this
    project's issues by number: a page or a docstring says what it means without them."""
    files = checked_files(ROOT)
    assert {f.relative_to(ROOT).parts[0] for f in files} == set(CHECKED)
    found = [
        f"{f.relative_to(ROOT).as_posix()}:{number}: {citation}"
        for f in files
        for number, citation in issue_numbers(f.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not found, "issue numbers of this project (say what they mean instead):\n" + "\n".join(found)


#: the longest function or method (lines, its decorators excluded) the project's style allows
LONGEST_FUNCTION = 80


def test_no_function_is_longer_than_the_style_allows():
    """The style rule "no function over ~80 lines", for the package and the benchmarks."""
    import ast

    too_long = []
    for folder in ("syntaxformer", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > LONGEST_FUNCTION:
                        too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not too_long, "functions over 80 lines: " + "; ".join(too_long)
