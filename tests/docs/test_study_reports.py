"""The study reports of ``benchmarks/studies/`` keep what an earlier report recorded: run folders are not kept in
git, so runs trained on different machines must add up in ``records/`` (logic study, prior study)."""

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.studies.logic import logic_study
from benchmarks.studies.nli import nli_study
from benchmarks.studies.priors import prior_study

ROOT = Path(__file__).resolve().parents[2]


def test_logic_report_from_recorded_runs_alone_is_unchanged(tmp_path):
    shutil.copytree(ROOT / "records" / "logic", tmp_path / "records" / "logic")
    before = json.loads((tmp_path / "records" / "logic" / "study.json").read_text())
    seeds = [int(s) for s in before["seeds"]]
    logic_study.write_report(tmp_path / "no-runs", list(before["runs"]), seeds, before["scale"], tmp_path)
    after = json.loads((tmp_path / "records" / "logic" / "study.json").read_text())
    assert after == before
    # the report was written anew from the recorded runs (not left as it was)
    text = (tmp_path / "docs" / "results" / "logic" / "study.md").read_text()
    assert "| on-lstm (last) | 0.003 | 8,000 | bf16 | 0, 1, 2 |" in text
    # the runs' own clocks: a resumed run's minutes are its last process's, its step minutes the sum
    lstm = before["runs"]["lstm"]["0"]["report"]["training"]
    assert len(lstm["resumed_from_steps"]) == 1
    assert (
        f"| lstm | 0 | 1 | {lstm['minutes']:.1f} (the last of 2 processes) | {lstm['train_minutes_total']:.1f} |"
    ) in text
    assert before["runs"], "the shipped study records runs"


def test_logic_summary_refuses_seeds_of_different_precisions():
    """Seeds are averaged only when trained alike: a seed in bf16 beside one in fp32 (a run recorded
    before --precision reads as fp32) is refused, naming the precisions."""
    runs = json.loads((ROOT / "records" / "logic" / "study.json").read_text())["runs"]["lstm"]
    alike = {int(seed): run for seed, run in runs.items()}
    assert logic_study.summarise({"lstm": alike})["lstm"]["precision"] == "fp32"
    report = alike[1]["report"]
    bf16 = dict(
        report, training=dict(report["training"], arguments=dict(report["training"]["arguments"], precision="bf16"))
    )
    with pytest.raises(ValueError, match="precisions"):
        logic_study.summarise({"lstm": {**alike, 1: dict(alike[1], report=bf16)}})


def test_logic_recipe_choice_keeps_rows_and_reads_recorded_runs(tmp_path):
    """records/logic/recipe-choice.json: a run recorded in the study report becomes a row with its validation
    curve and test groups; a second call keeps the first call's rows; a run that differs only in its
    encoder settings is a row of its own."""
    study = ROOT / "records" / "logic" / "study.json"
    run = json.loads(study.read_text())["runs"]["lstm"]["0"]["report"]
    rows = logic_study.recipe_choice([f"{study}:lstm:0"], tmp_path)
    assert [(r["encoder"], r["seed"], r["lr"], r["steps"], r["overrides"]) for r in rows] == [
        ("lstm", 0, 1e-3, 4000, {})
    ]
    assert rows[0]["valid_curve"][4000] == round(run["training"]["valid_history"][-1][2], 2)
    assert rows[0]["test_groups"] == run["groups"]
    table = logic_study.recipe_choice_table(rows)
    assert "| lstm | 0.001 | 0.1 x | 4,000 | - | fp32 | 0 | " in table and f"{run['groups']['7-9']:.1f} |" in table
    # the same run with an encoder setting over the preset, stopped early (training.json only)
    training = dict(run["training"], arguments=dict(run["training"]["arguments"], overrides={"dropout": 0.1}))
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "training.json").write_text(json.dumps(training))
    # and the same run in bf16 (a run recorded before --precision reads as fp32)
    bf16 = dict(run["training"], arguments=dict(run["training"]["arguments"], precision="bf16"))
    (tmp_path / "bf16").mkdir()
    (tmp_path / "bf16" / "training.json").write_text(json.dumps(bf16))
    # and the same run decaying to a zero learning rate
    decay0 = dict(run["training"], arguments=dict(run["training"]["arguments"], final_lr_fraction=0.0))
    (tmp_path / "decay0").mkdir()
    (tmp_path / "decay0" / "training.json").write_text(json.dumps(decay0))
    kept = logic_study.recipe_choice([str(tmp_path / d) for d in ("probe", "bf16", "decay0")], tmp_path)
    assert [
        (r["encoder"], r["seed"], r["overrides"], r["precision"], r["final_lr_fraction"], r["test_groups"] is None)
        for r in kept
    ] == [
        ("lstm", 0, {}, "bf16", 0.1, True),
        ("lstm", 0, {}, "fp32", 0.1, False),
        ("lstm", 0, {}, "fp32", 0.0, True),
        ("lstm", 0, {"dropout": 0.1}, "fp32", 0.1, True),
    ]
    table = logic_study.recipe_choice_table(kept)
    assert "| lstm | 0.001 | 0.1 x | 4,000 | dropout=0.1 | fp32 | 0 | " in table
    assert "| lstm | 0.001 | 0 x | 4,000 | - | fp32 | 0 | " in table
    with pytest.raises(SystemExit, match="neither a run folder"):
        logic_study.recipe_choice([str(tmp_path / "nothing")], tmp_path)


def test_prior_study_report_keeps_recorded_and_adds_new(tmp_path):
    root, work = tmp_path, tmp_path / "work"
    records = root / "records" / "priors"
    records.mkdir(parents=True)
    probe = dict(best=50.0, untrained=40.0, layers=[40.0, 50.0], majority=30.0, bag_of_words=45.0)
    earlier = dict(
        measurements=dict(
            constituent={"0": dict(steps=6000, perplexity=100.0, sentence_f1=40.0, probing=dict(TreeDepth=probe))}
        )
    )
    (records / "prior-study.json").write_text(json.dumps(earlier))
    # seed 1 trained here, perplexity measured, nothing else yet
    model = work / "constituent-seed1" / "model"
    model.mkdir(parents=True)
    (model / "training.json").write_text(json.dumps(dict(steps=6000)))
    (work / "constituent-seed1" / "perplexity.json").write_text(json.dumps(dict(perplexity=110.0)))
    args = SimpleNamespace(seeds=[0, 1, 2], max_steps=None)
    prior_study.stage_report(work, root, args)
    study = json.loads((records / "prior-study.json").read_text())
    row = study["systems"]["constituent"]
    assert row["seeds_trained"] == [0, 1]
    assert row["perplexity"]["values"] == [100.0, 110.0] and row["perplexity"]["mean"] == 105.0
    assert row["sentence_f1"]["values"] == [40.0]
    assert row["probing"]["TreeDepth"]["best"]["values"] == [50.0]
    assert study["measurements"]["constituent"]["1"]["perplexity"] == 110.0
    assert (
        "| constituent | ptb-lm | 0, 1 | 105.00 ± 7.07 (n=2) | – | 40.00 (n=1) | 50.0 [40.0] |"
        in (root / "docs" / "results" / "priors" / "study.md").read_text()
    )


def test_prior_study_masked_copy_perplexity_beside_the_sentence_one(tmp_path):
    """A system reading induced trees: the perplexity with each masked copy's trees is its own column;
    a recorded measurement from before that column existed still counts."""
    root, work = tmp_path, tmp_path / "work"
    records = root / "records" / "priors"
    records.mkdir(parents=True)
    earlier = dict(measurements={"sp-induced": {"1": dict(steps=6000, perplexity=93.0, sentence_f1=None, probing={})}})
    (records / "prior-study.json").write_text(json.dumps(earlier))
    base = work / "sp-induced-seed2"
    (base / "model").mkdir(parents=True)
    (base / "model" / "training.json").write_text(json.dumps(dict(steps=6000)))
    (base / "perplexity.json").write_text(json.dumps(dict(perplexity=92.0, induced_from="sentence")))
    (base / "perplexity-masked.json").write_text(json.dumps(dict(perplexity=210.0, induced_from="masked")))
    prior_study.stage_report(work, root, SimpleNamespace(seeds=[0, 1, 2], max_steps=None))
    study = json.loads((records / "prior-study.json").read_text())
    row = study["systems"]["sp-induced"]
    assert row["perplexity"]["values"] == [93.0, 92.0] and row["perplexity_masked_copy"]["values"] == [210.0]
    assert study["measurements"]["sp-induced"]["2"]["perplexity_masked_copy"] == 210.0
    table = (root / "docs" / "results" / "priors" / "study.md").read_text()
    assert "| sp-induced | ptb-lm | 1, 2 | 92.50 ± 0.71 (n=2) | 210.00 (n=1) | – |" in table
    assert prior_study.reads_induced("sp-induced") and prior_study.reads_induced("mgsa-induced")
    assert not any(prior_study.reads_induced(k) for k in ("sp-gold", "mgsa-gold", "constituent", "mgsa-ngram"))


def test_prior_study_report_only_runs_no_stage(tmp_path, monkeypatch):
    root, work = tmp_path, tmp_path / "work"
    records = root / "records" / "priors"
    records.mkdir(parents=True)
    earlier = dict(measurements=dict(gaussian={"0": dict(steps=6000, perplexity=112.0, sentence_f1=None, probing={})}))
    (records / "prior-study.json").write_text(json.dumps(earlier))
    ran = []
    monkeypatch.setitem(prior_study.STAGES, "train", lambda *a: ran.append(a))
    # no --ptb-lm text is needed: nothing is trained or measured
    assert (
        prior_study.main(
            ["--report-only", "--ptb-lm", str(tmp_path / "absent"), "--work", str(work), "--root", str(root)]
        )
        == 0
    )
    assert ran == []
    study = json.loads((records / "prior-study.json").read_text())
    assert study["systems"]["gaussian"]["perplexity"]["values"] == [112.0]
    assert (
        "| gaussian | ptb-lm | 0 | 112.00 (n=1) | – |"
        in (root / "docs" / "results" / "priors" / "study.md").read_text()
    )


def _nli_report(seed: int, accuracy: float, commit: str) -> dict:
    """A run's report.json as ``nli train`` writes it, with only the fields the summary reads."""
    per_class = {label: {"recall": accuracy} for label in ("entailment", "neutral", "contradiction")}
    return dict(
        data={"source": "sick", "format": "sick-tsv"},
        seed=seed,
        parameters=10,
        trainable_parameters=4,
        steps=100,
        epochs=2.0,
        word_vectors="learned",
        train_minutes=1.0,
        train_pairs_per_second=50.0,
        threads=1,
        device="cpu",
        torch="2.13.0",
        code={"version": "0.1.0", "commit": commit, "modified": False},
        scores={"test": {"accuracy": accuracy, "per_class": per_class}, "valid": {"accuracy": accuracy - 1}},
    )


def test_nli_summary_names_the_data_and_the_runs_code(tmp_path):
    for seed, (accuracy, commit) in enumerate([(80.0, "aaa"), (82.0, "bbb")]):
        folder = tmp_path / "runs" / f"gaussian-seed{seed}"
        folder.mkdir(parents=True)
        (folder / "report.json").write_text(json.dumps(_nli_report(seed, accuracy, commit)))
    args = SimpleNamespace(
        systems=["gaussian"],
        seeds=[0, 1],
        out=str(tmp_path / "runs"),
        root=str(tmp_path),
        recipe="default",
        inference_threads=0,
        repeats=1,
    )
    result = nli_study.summarise(args)
    assert result["data"] == {"source": "sick", "format": "sick-tsv"}
    assert [c["commit"] for c in result["code"]] == ["aaa", "bbb"]
    assert result["torch"] == ["2.13.0"]
    assert result["systems"]["gaussian"]["accuracy"] == (81.0, pytest.approx(2**0.5))
    written = json.loads((tmp_path / "records" / "nli" / "nli-study.json").read_text())
    assert written["code"] == result["code"]
    assert "Code: aaa, bbb." in (tmp_path / "docs" / "results" / "nli" / "study.md").read_text()


def test_translation_study_difference_to_the_baseline_over_seeds():
    from benchmarks.tools.results.translation import _against

    def seed(difference, p_value):
        return {"test_2016_flickr": {"difference": difference, "p_value": p_value}}

    one = {"against_baseline": {"seed 0": seed(-4.8, 0.001)}}
    assert _against(one) == "-4.80 (p = 0.001)"
    three = {"against_baseline": {"seed 0": seed(-4.8, 0.001), "seed 1": seed(0.3, 0.2), "seed 2": seed(-1.2, 0.04)}}
    assert _against(three) == "-1.90 (p < 0.05: 2 below, 0 above, of 3 seeds)"
    mixed = {"against_baseline": {"seed 0": seed(-2.0, 0.001), "seed 1": seed(1.0, 0.002)}}
    assert _against(mixed) == "-0.50 (p < 0.05: 1 below, 1 above, of 2 seeds)"
    assert _against({}) == ""


def test_translation_study_takes_the_runs_target_language():
    from benchmarks.studies.translation.summarise import _target_language

    def run(target):
        return {"report": {"data": {"target": f"tok/train.lc.norm.tok.{target}"}}}

    assert _target_language({("baseline", 0): run("fr"), ("baseline", 1): run("fr")}) == "fr"
    assert _target_language({}) == "de"
    with pytest.raises(SystemExit, match="several languages"):
        _target_language({("baseline", 0): run("fr"), ("baseline", 1): run("de")})
