"""The results tables of README.md and docs/results/*.md are what the JSON reports say: every marked table is
regenerated in memory by ``benchmarks/tools/results_tables.py`` and compared with the page."""

from pathlib import Path

import pytest

from benchmarks.tools import results_tables
from benchmarks.tools.results import core, induce_paper

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("page", results_tables.PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_tables_match_the_reports(page):
    text = page.read_text(encoding="utf-8")
    assert text == results_tables.render(text, str(page)), (
        f"{page.relative_to(ROOT)}: a results table differs from the reports; "
        "run `.venv/bin/python -m benchmarks.tools.results_tables` and review the diff"
    )


def test_every_table_is_on_a_page_and_every_marker_names_a_table():
    used = [
        m["name"]
        for page in results_tables.PAGES
        for m in results_tables.MARKER.finditer(page.read_text(encoding="utf-8"))
    ]
    assert sorted(set(used)) == sorted(results_tables.TABLES)
    assert "readme-results" in [m["name"] for m in results_tables.MARKER.finditer((ROOT / "README.md").read_text())]


def test_render_rewrites_only_between_markers_and_refuses_unknown_names():
    stale = "before\n<!-- results:compare -->\n| old | table |\n<!-- /results:compare -->\nafter\n"
    rendered = results_tables.render(stale)
    assert rendered.startswith("before\n<!-- results:compare -->\n| model | prior |")
    assert rendered.endswith("\n<!-- /results:compare -->\nafter\n")
    assert "| old | table |" not in rendered
    assert results_tables.render(rendered) == rendered
    with pytest.raises(KeyError, match="no table named 'nothing'"):
        results_tables.render("<!-- results:nothing -->\n<!-- /results:nothing -->\n", "page.md")


def test_mean_and_sample_sd_by_hand():
    # 38.37, 39.79, 39.95: mean 39.37, sample sd sqrt(((-1.0)^2 + 0.42^2 + 0.58^2) / 2) = 0.8669...
    assert results_tables.mean_sd([38.37, 39.79, 39.95]) == "39.37 ± 0.87"
    assert results_tables.mean_sd([40.2066]) == "40.21"
    assert results_tables.mean_sd([]) == "–"
    assert results_tables.span([17.86, 24.67, 24.71]) == "17.9–24.7"


def test_a_longer_run_is_paired_only_with_the_run_it_continues():
    def run(seed, steps, resumed_from=(), curve=()):
        points = [{"step": step, "scores": {"distance": {"sentence_f1": f1}}} for step, f1 in curve]
        return {
            "seed": seed,
            "training": {"steps": steps, "resumed_from_steps": list(resumed_from)},
            "curve": {"points": points},
        }

    shorter = [run(0, 20, curve=[(0, 16.2), (10, 30.5), (20, 29.5)]), run(1, 20, curve=[(0, 16.2), (10, 31.0)])]
    assert results_tables.shorter_twin(run(1, 40, [20]), shorter) is shorter[1]  # resumed from its last step
    assert results_tables.shorter_twin(run(1, 40, [15]), shorter) is None  # resumed from another run
    same_run = run(0, 40, curve=[(0, 16.2), (10, 30.5), (20, 29.5), (30, 33.3)])
    assert results_tables.shorter_twin(same_run, shorter) is shorter[0]  # the same curve, run again from the start
    parted = run(0, 40, curve=[(0, 16.2), (10, 30.5), (20, 29.4), (30, 33.3)])
    assert results_tables.shorter_twin(parted, shorter) is None  # parted at step 20
    assert results_tables.shorter_twin(run(2, 40, [20], [(0, 16.2)]), shorter) is None  # no run of its seed


def test_longer_runs_without_any_shorter_twin_have_no_twin_column(monkeypatch):
    """Three runs of one length, none continuing a shorter run: the table has no "test F1 at N epochs"
    column, and every row has as many cells as the header."""
    import copy
    import json

    report = json.loads((ROOT / "records/induce/structformer-paper-mini-cpu-42ep-seed0.json").read_text())
    runs = []
    for seed in (0, 1, 2):
        run = copy.deepcopy(report)
        run["seed"] = seed
        runs.append(run)
    groups = {"longer": runs, "shorter": [], "shipped": [runs[0]]}
    monkeypatch.setattr(induce_paper, "group", groups.__getitem__)
    lines = results_tables.longer_runs("longer", "shorter", "shipped", (26, 30)).splitlines()
    header = lines[0].split(" | ")
    assert header[0] == "| seed" and header[-1] == "training |"
    assert not any(cell.startswith("test F1 at") for cell in header)
    assert all(line.count(" | ") == lines[0].count(" | ") for line in lines[2:])
    assert lines[2].startswith("| 0 (shipped) | ") and lines[-1].startswith("| seeds 0, 1, 2 | ")


def test_longer_runs_of_one_run_have_no_mean_row(monkeypatch):
    """A group of one run: the header, the rule and that run's row, no "seeds ..." mean row."""
    import json

    report = json.loads((ROOT / "records/induce/structformer-paper-mini-cpu-42ep-seed0.json").read_text())
    groups = {"longer": [report], "shorter": [], "shipped": [report]}
    monkeypatch.setattr(induce_paper, "group", groups.__getitem__)
    lines = results_tables.longer_runs("longer", "shorter", "shipped", (26, 30)).splitlines()
    assert len(lines) == 3
    assert lines[2].startswith("| 0 (shipped) | ")


def test_tree_transformer_paper_table_reads_the_recipe_decoder_where_the_curve_has_it(monkeypatch):
    """The dev columns are the curve's Algorithm 1 from layer 2 with the descend rule (the recipe's decoder)
    where the curve scores it, else under the paper's rule; the last row is the mean over the seeds."""
    import copy
    import json

    report = json.loads((ROOT / "records/induce/tree-transformer-paper-mini-cpu-seed0.json").read_text())
    runs = []
    for seed in (0, 1):
        run = copy.deepcopy(report)
        run["seed"] = seed
        for point in run["curve"]["points"]:
            point["scores"]["algorithm1_m2"] = {"sentence_f1": 30.0 + seed}
        runs.append(run)
    monkeypatch.setattr(induce_paper, "group", {"tt-paper-cpu": runs}.__getitem__)
    rows = [line.split(" | ") for line in results_tables.induce_tree_transformer_paper().splitlines()]
    steps = sum(cell.startswith("dev, step") for cell in rows[0])
    assert steps == 5
    assert rows[2][1 : 1 + steps] == ["30.00"] * steps
    assert rows[3][1 : 1 + steps] == ["31.00"] * steps
    assert rows[4][0] == "| seeds 0, 1" and rows[4][1] == "30.50 ± 0.71"  # sd of 30, 31: sqrt(0.5)
    for seed, run in enumerate(runs):
        for point in run["curve"]["points"]:
            point["scores"]["algorithm1_m2_descend"] = {"sentence_f1": 40.0 + seed}
    rows = [line.split(" | ") for line in results_tables.induce_tree_transformer_paper().splitlines()]
    assert rows[2][1 : 1 + steps] == ["40.00"] * steps
    assert rows[4][1] == "40.50 ± 0.71"


def test_tree_transformer_paper_table_shows_at_most_five_curve_steps(monkeypatch):
    """Nine common curve points (steps 1,000 .. 9,000): every second one, back from the last."""
    import json

    report = json.loads((ROOT / "records/induce/tree-transformer-paper-mini-cpu-seed0.json").read_text())
    scores = report["curve"]["points"][-1]["scores"]
    report["curve"]["points"] = [{"step": 1000 * k, "scores": scores} for k in range(10)]
    monkeypatch.setattr(induce_paper, "group", {"tt-paper-cpu": [report]}.__getitem__)
    header = results_tables.induce_tree_transformer_paper().splitlines()[0].split(" | ")
    assert [cell for cell in header if cell.startswith("dev, step")] == [f"dev, step {k},000" for k in (1, 3, 5, 7, 9)]


def test_the_manifest_lists_each_induce_group_once_with_one_label_each():
    """``records/induce/manifest.json``: each group once, in the file's order, its reports named one way (a glob
    under records/induce/ or one report's path), and a ``short`` label only where the README labels the group
    differently (each label written once)."""
    import json

    listed = json.loads((ROOT / "records/induce/manifest.json").read_text(encoding="utf-8"))["groups"]
    assert list(core.INDUCE) == [g["key"] for g in listed]
    for key, entry in core.INDUCE.items():
        assert ("reports" in entry) != ("report" in entry), key
        assert entry.get("short") != entry["label"], key
