"""The documentation's examples run as written: every ```sh line and ```python block of every page of
docs/ that has them (the command guides, docs/guide/python.md, ...) runs, in order, in a fresh folder beside a
``shared/data`` mirror, one test per page, in process (``syntaxformer.cli.main``), each command ending
with status 0. Only the length of the work is changed (:func:`shorten`):

* training (``train``, ``induce``, ``compare``, ``logic train``, ``nli train``): ``--max-steps 2`` and
  ``--preset tiny`` (given or added; ``train --model`` keeps the folder's preset, and a line that
  sets config fields with ``--set`` keeps its own, which the fields may need: e.g. a head per
  granularity);
* ``induce`` trains on and scores a two-file treebank (the first :data:`SMALL_FILES` files of
  ptb-sample) unless the line names ``--corpus`` / ``--treebank`` or rescores, and ``perplexity`` scores those files' sentences where the line
  names a part of ptb-sample (as text, as dependency trees with ``--trees gold``, as a treebank with
  ``--phrases gold``), and ``prune`` its F1 on those files unless the line names ``--treebank``;
  ``distill`` one epoch of 20 sentences, its epoch chosen on those files; ``heads``, ``prune``,
  ``probe``, ``logic`` and ``nli vectors`` take their own
  quick-check options (at most :data:`MAX_SENTENCES` sentences, a few pairs, one epoch, one random
  seed);
* ``--device cuda`` runs on the CPU when there is no GPU;
* ``../shared/data/NAME`` is a mirror of the real folder with the first lines of each file
  (:func:`mirror`); without ``../shared/data`` the lines that name it are skipped, and so is every
  later step that uses what a skipped step would have made (its ``--out`` folders, the paths its Python
  code writes, the names it binds), and the page's test ends skipped, naming them and what they needed;
  ``$SYNTAXFORMER_SHARED_DATA`` moves the shared folder (CI points it at an empty one);
* files a page names as the user's own (:data:`USER_FILES`) are written small, and folders another page
  makes (``induce-out``, the priors guide's ``sp``, ...) are made first by that page's line.

Excluded, each with its reason: :data:`EXCLUDED`; marked slow (more than ~20 s even shortened):
:data:`SLOW`.
"""

from __future__ import annotations

import ast
import gzip
import io
import itertools
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import torch
from helpers import shared_data_folder

from syntaxformer.cli import main

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = shared_data_folder()  # ../shared/data, or $SYNTAXFORMER_SHARED_DATA
#: every page of docs/ with a ```sh or ```python block
PAGES = sorted(
    page.relative_to(ROOT).as_posix()
    for page in (ROOT / "docs").rglob("*.md")
    if re.search(r"^ *```(sh|python)$", page.read_text(encoding="utf-8"), re.M)
)
#: lines not run, by their program, and why
EXCLUDED = {"torchrun": "data-parallel training in two processes: tests/training/test_trainer_ddp.py runs it"}
#: files of ptb-sample the shortened ``induce`` scores (and the user's treebank of the guides holds)
SMALL_FILES = 2
#: ``heads``, ``prune`` and ``probe``: at most this many sentences
MAX_SENTENCES = {"heads": 16, "prune": 16, "probe": 100}
#: lines of each mirrored corpus file (a CoNLL-U file: sentences)
MIRROR_LINES = {"multi30k": 60, "ptb-lm": 100, "wikitext-2": 300, "ud-ewt": 60, "sick": 400, "propositional-logic": 200}
#: pages whose shortened run still takes minutes on 2 CPU cores, and why
SLOW = {
    "docs/guide/probe.md": "the shipped parser's features and probes of every layer, and its untrained twin's",
}
#: files the guides name as the user's own
USER_FILES = ("my-treebank.mrg", "my-trees.conllu", "my-text.txt", "sentences.txt")


def page_steps(page: str) -> list[tuple[str, object]]:
    """The page's steps in order: ``("python", code)`` per ```python block and ``("sh", segments)`` per
    shell line (continuations joined, comments dropped; ``segments``: its commands split at ``|``,
    ``&&`` and ``;``, each an argument list)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    steps = []
    for indent, language, body in re.findall(r"^( *)```(sh|python)\n(.*?)^\1```", text, re.S | re.M):
        body = "".join(line[len(indent) :] + "\n" for line in body.splitlines())
        if language == "python":
            steps.append(("python", body))
            continue
        for line in body.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
            lexer.whitespace_split = True
            words, segments = list(lexer), [[]]
            for word in words:
                if word in ("|", "&&", ";"):
                    segments.append([])
                else:
                    segments[-1].append(word)
            if words:
                steps.append(("sh", [s for s in segments if s]))
    return steps


def _set(argv: list[str], option: str, value: str) -> None:
    """Give ``option`` the value ``value`` in ``argv`` (replaced, or added at the end)."""
    if option in argv:
        argv[argv.index(option) + 1] = value
    else:
        argv += [option, value]


def shorten(argv: list[str], fixtures: Path) -> list[str]:
    """``argv`` (after ``syntaxformer``) with its work shortened as the module docstring says
    (``fixtures``: the small files :func:`_user_files` writes)."""
    argv = list(argv)
    command = tuple(argv[:2]) if argv[0] in ("logic", "nli", "translation") else (argv[0],)
    training = command in {
        ("train",),
        ("induce",),
        ("compare",),
        ("logic", "train"),
        ("nli", "train"),
        ("translation", "train"),
    }
    if training and "--rescore" not in argv:
        _set(argv, "--max-steps", "2")
        if "--model" not in argv and "--set" not in argv:
            _set(argv, "--preset", "tiny")
    if command == ("induce",) and "--rescore" not in argv:
        for option, small in (("--treebank", "small.mrg"), ("--corpus", "small.txt")):
            if option not in argv:
                argv += [option, str(fixtures / small)]
    if command == ("perplexity",) and argv[argv.index("--corpus") + 1].startswith("ptb-sample"):
        small = "small.conllu" if "--trees" in argv else "small.mrg" if "--phrases" in argv else "small.txt"
        _set(argv, "--corpus", str(fixtures / small))
    if command[0] in MAX_SENTENCES:
        _set(argv, "--max-sentences", str(MAX_SENTENCES[command[0]]))
    if command == ("logic", "train"):
        argv += ["--max-train-pairs", "64", "--max-test-pairs", "8"]
    if command == ("logic", "evaluate"):
        argv += ["--max-test-pairs", "8"]
    if command == ("nli", "vectors"):
        _set(argv, "--epochs", "1")
    if command == ("distill",):
        _set(argv, "--epochs", "1")
        _set(argv, "--max-sentences", "20")
        _set(argv, "--dev-treebank", str(fixtures / "small.mrg"))
    if command == ("prune",):
        _set(argv, "--seeds", "1")
        if "--gates" in argv:
            _set(argv, "--gate-steps", "2")
        if "--treebank" not in argv:
            argv += ["--treebank", str(fixtures / "small.mrg")]
    if "--device" in argv and argv[argv.index("--device") + 1].startswith("cuda") and not torch.cuda.is_available():
        _set(argv, "--device", "cpu")
    return argv


def mirror(name: str, shared: Path) -> bool:
    """``shared/NAME``: the real ``../shared/data/NAME`` with the first lines of each file
    (:data:`MIRROR_LINES`; CoNLL-U: sentences); False when the real folder is absent."""
    source, target = SHARED_DATA / name, shared / name
    if target.exists():
        return True
    if not source.is_dir():
        return False
    for file in sorted(p for p in source.rglob("*") if p.is_file()):
        out = target / file.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        n = MIRROR_LINES.get(name, 300)
        if file.suffix == ".gz":  # gzip text (Multi30k's raw files): the first lines, compressed again
            with gzip.open(file, "rt", encoding="utf-8") as f:
                lines = list(itertools.islice(f, n))
            with gzip.open(out, "wt", encoding="utf-8") as f:
                f.write("".join(lines))
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        if file.suffix == ".conllu":
            out.write_text("\n\n".join(text.split("\n\n")[:n]) + "\n\n", encoding="utf-8")
        else:
            out.write_text("".join(text.splitlines(keepends=True)[:n]), encoding="utf-8")
    return True


def shared_names(step) -> set[str]:
    """The ``../shared/data`` folders a step reads: named in it, or a default of its command (``nli
    vectors``' text, ``nli --corpus sick``)."""
    kind, body = step
    text = body if kind == "python" else " ".join(" ".join(s) for s in body)
    names = set(re.findall(r"\.\./shared/data/([\w.-]+)", text))
    for segment in [] if kind == "python" else body:
        if segment[:3] == ["syntaxformer", "nli", "vectors"] and "--corpus" not in segment:
            names |= {"ptb-lm", "wikitext-2"}
        if segment[:2] == ["syntaxformer", "nli"] and "sick" in segment:
            names.add("sick")
    return names


def _codes(step) -> list[str]:
    """The Python code a step runs: a ```python block, or the code of its ``python -c`` segments."""
    if step[0] == "python":
        return [step[1]]
    return [s[2] for s in step[1] if s[0] in ("python", "python3") and s[1:2] == ["-c"] and len(s) > 2]


#: Python calls whose string arguments are paths the call writes (``export_pretrained(run, "my-parser")``)
WRITERS = re.compile(r"^(export|save|write)")


def _code_writes(code: str) -> tuple[set[str], set[str]]:
    """``(paths, names)`` that Python ``code`` makes: the string arguments of its writer calls
    (:data:`WRITERS`) and the names it binds at module level (assignments, imports, definitions)."""
    tree = ast.parse(code)
    paths = {
        arg.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and WRITERS.match(_call_name(node.func))
        for arg in [*node.args, *(k.value for k in node.keywords)]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    }
    names = {
        node.id
        for statement in tree.body
        for node in ast.walk(statement)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }
    for statement in tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
        elif isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
            names.add(statement.name)
    return paths, names


def _call_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _outputs(step) -> list[str]:
    """The folders and files a step makes: the ``--out`` folders of a shell step's commands, and the
    paths its Python code writes (:func:`_code_writes`)."""
    made = [] if step[0] != "sh" else [s[s.index("--out") + 1] for s in step[1] if "--out" in s]
    return made + sorted(path for code in _codes(step) for path in _code_writes(code)[0])


def _defines(step) -> set[str]:
    """The Python names a step binds (:func:`_code_writes`)."""
    return {name for code in _codes(step) for name in _code_writes(code)[1]}


def _uses(step, names: set[str]) -> set[str]:
    """Those of ``names`` that the step's Python code reads without binding them first in the same code."""
    used = set()
    for code in _codes(step):
        loaded = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        used |= (loaded - _code_writes(code)[1]) & names
    return used


def _reads(step, folder: str) -> bool:
    """Whether ``step`` names ``folder`` or a path inside it (as an argument, ``induced:DIR`` or a
    quoted string of Python code, a ```python block's or a ``python -c`` line's)."""
    if any(re.search(rf"['\"]{re.escape(folder)}[/'\"]", code) for code in _codes(step)):
        return True
    if step[0] == "python":
        return False
    words = [w.removeprefix("induced:") for segment in step[1] for w in segment]
    return any(w == folder or w.startswith(folder + "/") for w in words)


#: folder -> (page, step) of the line that makes it, over every page
PRODUCERS = {
    out: (page, step) for page in reversed(PAGES) for step in reversed(page_steps(page)) for out in _outputs(step)
}


class Runner:
    """Runs steps in a work folder (``work/``, beside ``shared/data`` and ``fixtures/``)."""

    def __init__(self, root: Path, capsys, monkeypatch, made: dict):
        self.work, self.shared, self.fixtures = root / "work", root / "shared" / "data", root / "fixtures"
        self.capsys, self.monkeypatch, self.made = capsys, monkeypatch, made
        self.skipped: list[str] = []
        self.unavailable: set[str] = set()  # folders and files a skipped step would have made
        self.undefined: set[str] = set()  # Python names a skipped step would have bound
        for folder in (self.work, self.shared, self.fixtures):
            folder.mkdir(parents=True, exist_ok=True)
        _user_files(self.work, self.fixtures)
        pretrained = self.work / "syntaxformer" / "pretrained"  # a clone's shipped parsers, by path
        pretrained.parent.mkdir(exist_ok=True)
        pretrained.symlink_to(ROOT / "syntaxformer" / "pretrained", target_is_directory=True)

    def run_page(self, page: str) -> None:
        """Every step of ``page`` in order, making what another page makes first."""
        for step in page_steps(page):
            self.prepare(page, step)
            self.run(page, step)

    def prepare(self, page: str, step, page_run: bool = True) -> None:
        """Copy in (or make, once per session) the folders ``step`` reads that another page's line makes
        (with ``page_run`` False, also those an earlier line of its own page makes: a producer run alone)."""
        for folder, (source, producer) in PRODUCERS.items():
            if (source == page and page_run) or (self.work / folder).exists() or not _reads(step, folder):
                continue
            if producer is step or folder in _outputs(step):
                continue
            if folder not in self.made:
                made = Runner(self.work.parent / f"made-{len(self.made)}", self.capsys, self.monkeypatch, self.made)
                made.prepare(source, producer, page_run=False)
                made.run(source, producer)
                self.made[folder] = None if made.skipped else made.work / folder
            if self.made[folder] is None:
                self.unavailable.add(folder)
            else:
                shutil.copytree(self.made[folder], self.work / folder, symlinks=True)

    def run(self, page: str, step) -> None:
        """One step in the work folder; a line that needs an absent corpus (or what one wrote) is skipped."""
        self.monkeypatch.chdir(self.work)
        text = step[1] if step[0] == "python" else " ".join(shlex.join(s) for s in step[1])
        absent = [n for n in shared_names(step) if not mirror(n, self.shared)]
        missing = sorted(f for f in self.unavailable if _reads(step, f)) + sorted(_uses(step, self.undefined))
        if absent or missing:
            needs = (
                f"../shared/data/{', '.join(absent)}" if absent else f"what a skipped step makes: {', '.join(missing)}"
            )
            self.skipped.append(f"{page}: {text.strip()[:80]} (needs {needs})")
            self.unavailable.update(_outputs(step))
            self.undefined.update(_defines(step))
            return
        if step[0] == "python":
            exec(compile(step[1], page, "exec"), {"__name__": "__guide__"})
            return
        stdin = None
        for segment in step[1]:
            program = segment[0]
            if program == "echo":
                stdin = " ".join(segment[1:]) + "\n"
            elif program in EXCLUDED:
                continue
            elif program in ("python", "python3") and segment[1] == "-c":
                exec(compile(segment[2], f"{page}: python -c", "exec"), {"__name__": "__guide__"})
            else:
                assert program == "syntaxformer", f"{page}: unknown program in {text!r}"
                self._command(page, segment[1:], stdin)

    def _command(self, page: str, argv: list[str], stdin: str | None) -> None:
        argv = shorten(argv, self.fixtures)
        if stdin is not None:
            self.monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(argv)
        printed = self.capsys.readouterr()
        assert code == 0, f"{page}: syntaxformer {shlex.join(argv)} -> {code}: {printed.err[-2000:]}"


def _user_files(work: Path, fixtures: Path) -> None:
    """The user's files the guides name (:data:`USER_FILES`), and the shortened induce's treebank: the
    first :data:`SMALL_FILES` files of ptb-sample (their trees, dependency trees, words)."""
    from syntaxformer.data.embedded import ptb_sample_members
    from syntaxformer.data.preprocess import load_gold_trees

    mrg = "\n".join(text for _, text in ptb_sample_members("combined")[:SMALL_FILES])
    for path in (fixtures / "small.mrg", work / "my-treebank.mrg"):
        path.write_text(mrg, encoding="utf-8")
    rows = []
    for _, text in ptb_sample_members("dependency")[:SMALL_FILES]:
        for sentence in text.strip().split("\n\n"):
            rows += [
                f"{i}\t{word}\t_\t{tag}\t{tag}\t_\t{head}\t{'root' if head == '0' else 'dep'}\t_\t_"
                for i, (word, tag, head) in enumerate((line.split("\t") for line in sentence.splitlines()), 1)
            ] + [""]
    for path in (fixtures / "small.conllu", work / "my-trees.conllu"):
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    words = [" ".join(tree.leaves()) for tree in load_gold_trees(work / "my-treebank.mrg")]
    for path in (fixtures / "small.txt", work / "my-text.txt"):
        path.write_text("\n".join(words) + "\n", encoding="utf-8")
    (work / "sentences.txt").write_text("The old man sat on the bench .\nDogs bark .\n", encoding="utf-8")


@pytest.fixture(scope="module")
def made():
    """Folders one page's line made for another page, by ``--out`` value (None: skipped)."""
    return {}


def test_every_guide_has_a_runnable_block():
    guides = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "guide").glob("*.md")}
    assert guides <= set(PAGES), f"guides without a ```sh or ```python block: {sorted(guides - set(PAGES))}"
    excluded = [
        " ".join(" ".join(s) for s in step[1])
        for page in PAGES
        for step in page_steps(page)
        if step[0] == "sh" and any(s[0] in EXCLUDED for s in step[1])
    ]
    assert excluded == ["torchrun --standalone --nproc_per_node=2 -m syntaxformer.cli train --preset small "
                        "--max-steps 2000 --out tt-ddp"]  # fmt: skip


def test_every_training_line_has_a_stop_condition():
    """``train`` stops at once without ``--max-steps``, ``--epochs`` or ``--max-minutes``: no page shows
    one without (the shortened runs add ``--max-steps``, so this is checked on the lines as written)."""
    for page in PAGES:
        for kind, body in page_steps(page):
            for segment in body if kind == "sh" else []:
                start = segment.index("syntaxformer.cli") if "syntaxformer.cli" in segment else 0
                if segment[start] in ("syntaxformer", "syntaxformer.cli") and segment[start + 1 : start + 2] == [
                    "train"
                ]:
                    assert {"--max-steps", "--epochs", "--max-minutes"} & set(segment), f"{page}: {segment}"


@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW else p for p in PAGES])
def test_page_runs(page, tmp_path, capsys, monkeypatch, made):
    runner = Runner(tmp_path, capsys, monkeypatch, made)
    runner.run_page(page)
    if runner.skipped:
        pytest.skip(f"ran the rest; skipped what needs an absent corpus or a skipped step: {'; '.join(runner.skipped)}")


def test_a_skipped_step_skips_what_uses_its_outputs(tmp_path, capsys, monkeypatch):
    """A step that needs an absent corpus is skipped, and so is every later step that reads its ``--out``
    folder (as an argument or in ``python -c`` code), a path its Python code writes, or a name it binds;
    a step that needs none of them runs."""
    steps = [
        ("sh", [["syntaxformer", "induce", "--corpus", "../shared/data/no-such-corpus/a.txt", "--out", "run-a"]]),
        (
            "sh",
            [
                [
                    "python",
                    "-c",
                    "from syntaxformer.pretrained import export_pretrained; export_pretrained('run-a', 'mine')",
                ]
            ],
        ),
        ("python", "import syntaxformer\nparser = syntaxformer.load_parser('mine')\n"),
        ("python", "print(parser)\n"),
        ("sh", [["syntaxformer", "parse", "--model", "mine/", "--input", "sentences.txt"]]),
        ("python", "ran = [1]\nassert ran == [1]\nprint('independent step ran')\n"),
    ]
    runner = Runner(tmp_path, capsys, monkeypatch, {})
    for step in steps:
        runner.run("page.md", step)
    needs = [entry.rsplit(" (needs ", 1)[1] for entry in runner.skipped]
    assert needs == [
        "../shared/data/no-such-corpus)",
        "what a skipped step makes: run-a)",
        "what a skipped step makes: mine)",
        "what a skipped step makes: parser)",
        "what a skipped step makes: mine)",
    ]
    assert "independent step ran" in capsys.readouterr().out
