"""The shipped parsers' out-of-domain records (``records/out-of-domain/shipped-*.json``, UD English-EWT test)
are what ``benchmarks/studies/out_of_domain/out_of_domain.py`` gives today, and the default StructFormer and the Tree Transformer
``tree-transformer-ptb-lm`` are above right-branching there (the project's target; the page ``docs/results/out-of-domain.md`` says so)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.studies.out_of_domain import out_of_domain
from syntaxformer.pretrained import shipped_parsers

ROOT = Path(__file__).resolve().parents[2]

RECORDS = {name: ROOT / "records" / "out-of-domain" / f"shipped-{name}-ud-ewt-test.json" for name in shipped_parsers()}


@pytest.fixture(scope="module")
def ud_ewt_test(shared_data) -> Path:
    return shared_data / "ud-ewt" / "en_ewt-ud-test.conllu"


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_shipped_parser_reproduces_its_out_of_domain_record(name, ud_ewt_test, tmp_path, capsys):
    record = json.loads(RECORDS[name].read_text())
    threads = torch.get_num_threads()
    try:
        out = tmp_path / "ood.json"
        assert (
            out_of_domain.main(
                ["--model", name, "--name", name, "--ud-ewt", str(ud_ewt_test), "--out", str(out), "--threads", "1"]
            )
            == 0
        )
    finally:
        torch.set_num_threads(threads)
    capsys.readouterr()
    today = json.loads(out.read_text())
    assert today["n_sentences"] == record["n_sentences"] == 1839
    for system in ("parser", "right_branching", "left_branching"):
        for field in ("sentence_f1", "corpus_f1"):
            assert today["constituency"][system][field] == pytest.approx(
                record["constituency"][system][field], abs=0.02
            ), (system, field)
    if record.get("dependencies"):
        assert today["dependencies"]["parser"]["uas"] == pytest.approx(
            record["dependencies"]["parser"]["uas"], abs=0.02
        )


@pytest.mark.parametrize("name", ["tree-transformer-ptb-lm", "structformer-ptb-lm"])
def test_default_and_structformer_are_above_right_branching_out_of_domain(name):
    scores = json.loads(RECORDS[name].read_text())["constituency"]
    assert scores["parser"]["sentence_f1"] > scores["right_branching"]["sentence_f1"]
