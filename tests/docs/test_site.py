"""The documentation's layout holds: ``docs/`` is the site's index and its four sections, every page is in
the MkDocs nav (``mkdocs build --strict`` fails on a page left out of it), every record a page or the
README cites under ``records/`` exists, the README stays short with one results table of at most ten
rows, and the install page shows the README's set-up commands."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
import yaml

from benchmarks.tools.results.core import MARKER

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: what the top level of docs/ holds: the site's index and one folder per kind of page
TOP_LEVEL = {"index.md", "getting-started", "guide", "reference", "results"}
#: a path under records/ as pages write it: a file, a folder, a glob or a pattern (``{a,b}``, ``NAME``)
RECORD_PATH = re.compile(r"(?<![\w/.-])records/[\w./{}*,-]*[\w/}*]")
#: the words pages write in a path for a part that varies (``gates-NAME.json``, ``ARCH-main-RECIPE-seedN.json``)
PLACEHOLDER = re.compile(r"[A-Z]{2,}[A-Za-z]*|(?<=seed)N")


def mkdocs_config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def nav_pages(nav) -> list[str]:
    """Every page the nav names, depth first."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    return [page for value in nav.values() for page in nav_pages(value)]


def expand(path: str) -> list[str]:
    """The globs a cited path stands for: ``{a,b}`` alternatives spelled out, placeholders as ``*``."""
    parts = re.split(r"\{([^{}]*)\}", path)
    choices = [part.split(",") if i % 2 else [part] for i, part in enumerate(parts)]
    return [PLACEHOLDER.sub("*", "".join(combo)) for combo in itertools.product(*choices)]


def cited_records(text: str) -> set[str]:
    """The paths under records/ that ``text`` names (links, includes, code spans, prose); a sentence's
    full stop is not part of a path."""
    return {match.rstrip(".") for match in RECORD_PATH.findall(text)}


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("see `records/induce/manifest.json`.", {"records/induce/manifest.json"}),
        ("(records/heads/gates-NAME.json) and records/logic/", {"records/heads/gates-NAME.json", "records/logic/"}),
        ('--8<-- "records/nli/nli-study.json"', {"records/nli/nli-study.json"}),
        ("docs/records/x.json and myrecords/y.json", set()),
    ],
)
def test_cited_records_finds_the_paths(text, expected):
    assert cited_records(text) == expected


def test_expand_spells_out_alternatives_and_placeholders():
    assert expand("records/induce/tree-transformer-default-seed{0,1,2}.json") == [
        "records/induce/tree-transformer-default-seed0.json",
        "records/induce/tree-transformer-default-seed1.json",
        "records/induce/tree-transformer-default-seed2.json",
    ]
    assert expand("records/induce/ARCH-main-RECIPE-seedN.json") == ["records/induce/*-main-*-seed*.json"]
    assert expand("records/logic/accuracy.{png,svg}") == ["records/logic/accuracy.png", "records/logic/accuracy.svg"]


@pytest.mark.parametrize("page", [ROOT / "README.md", *pages()], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_record_a_page_cites_exists(page):
    """A path under records/ that a page names (a link, a snippet include, a code span) is a file or folder
    of the repository; a glob or pattern matches at least one."""
    missing = [
        cited
        for cited in sorted(cited_records(page.read_text(encoding="utf-8")))
        if not all(any(ROOT.glob(pattern.rstrip("/"))) for pattern in expand(cited))
    ]
    assert not missing, f"{page.relative_to(ROOT)} cites records that do not exist: {missing}"


def test_every_page_is_in_the_nav_and_the_build_refuses_one_left_out():
    config = mkdocs_config()
    listed = nav_pages(config["nav"])
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in pages())
    assert sorted(set(listed)) == on_disk, "pages left out of the nav, or nav entries without a page"
    assert len(listed) == len(set(listed)), "a page is listed twice in the nav"
    assert config["strict"] is True and config["validation"]["omitted_files"] == "warn"


def test_docs_top_level_holds_the_index_and_the_four_sections():
    assert {p.name for p in DOCS.iterdir()} == TOP_LEVEL
    sections = [item for item in mkdocs_config()["nav"] if isinstance(item, dict)]
    assert [next(iter(s)) for s in sections] == ["Home", "Getting started", "Guides", "Reference", "Results"]


def test_the_readme_is_short_with_one_results_table_of_at_most_ten_rows():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    # generated text may be a sentence (the translation model's scores); only one generated part is a table
    tables = [m for m in MARKER.finditer(readme) if any(line.startswith("|") for line in m["body"].splitlines())]
    assert [t["name"] for t in tables] == ["readme-results"]
    assert sum(line.startswith("|---") or line.startswith("|--") for line in readme.splitlines()) == 2  # + commands
    rows = [line for line in tables[0]["body"].splitlines() if line.startswith("| ")][1:]  # the header aside
    assert 0 < len(rows) <= 10


def test_the_install_page_shows_the_readme_set_up_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = [block.strip() for block in re.findall(r"^```sh\n(.*?)^```", readme, re.S | re.M)[:2]]
    install = (DOCS / "getting-started" / "index.md").read_text(encoding="utf-8")
    shown = re.search(r"^```console\n(.*?)^```", install, re.S | re.M)[1].strip().splitlines()
    assert shown == setup
