"""``--trees`` / ``--phrases`` as values (``syntaxformer/data/structure_source.py``) and the structure a
prior declares it reads (``structure_input``, ``reads_structure``, ``structure_messages``), which drives
the checks of ``train``, ``perplexity`` and ``probe``."""

from __future__ import annotations

import argparse
import copy
import json
import pickle
from dataclasses import asdict

import pytest

from syntaxformer.cli.arguments import parse_structure_sources
from syntaxformer.data.phrases import OTHER
from syntaxformer.data.structure_source import StructureSource
from syntaxformer.errors import InputError
from syntaxformer.models import Capabilities
from syntaxformer.priors import PRIORS, StructuralPrior, structure_reader, structure_readers
from syntaxformer.priors.multi_granularity import MultiGranularityPrior
from syntaxformer.sources.checks import check_model_phrases, check_model_trees, model_structure_input, tree_level
from syntaxformer.training import TrainArguments


def test_gold_and_induced_values():
    gold = StructureSource.parse("gold", "--trees")
    assert gold == "gold" and gold.kind == "gold" and gold.is_gold and not gold.is_induced and gold.model_dir is None
    induced = StructureSource.parse("induced:/runs/sf model", "--phrases")
    assert induced == "induced:/runs/sf model" and induced.kind == "induced" and induced.is_induced
    assert induced.model_dir == "/runs/sf model" and not induced.is_gold
    assert StructureSource.parse("induced:gold").model_dir == "gold"  # the folder may have any name
    assert StructureSource.parse(induced, "--trees") is induced  # idempotent: an already parsed value stays
    assert StructureSource.parse(None) is None


@pytest.mark.parametrize(
    "value, option, message",
    [
        ("silver", "--trees", "--trees must be gold or induced:MODEL_DIR, got 'silver'"),
        ("induced:", "--phrases", "--phrases must be gold or induced:MODEL_DIR, got 'induced:'"),
        ("Gold", "--phrases", "--phrases must be gold or induced:MODEL_DIR, got 'Gold'"),
        ("", "--trees", "--trees must be gold or induced:MODEL_DIR, got ''"),
        ("induced/dir", "--trees", "--trees must be gold or induced:MODEL_DIR, got 'induced/dir'"),
    ],
)
def test_bad_values_are_one_line_errors(value, option, message):
    with pytest.raises(InputError) as error:
        StructureSource.parse(value, option)
    assert str(error.value) == message


def test_the_value_is_its_string_in_json_copies_and_pickles():
    for text in ("gold", "induced:/tmp/x y"):
        value = StructureSource.parse(text)
        assert str(value) == text and json.dumps({"trees": value}) == json.dumps({"trees": text})
        for restored in (copy.deepcopy(value), copy.copy(value), pickle.loads(pickle.dumps(value))):
            assert type(restored) is str and restored == text  # asdict gives strings; a checkpoint needs no class


def test_training_json_and_checkpoint_arguments_are_unchanged(tmp_path):
    """``training.json`` holds ``json(asdict(args))``, ``checkpoint.pt`` pickles ``asdict(args)``: both the
    same bytes whether the options are plain strings or parsed values (``check()`` parses them)."""
    options = dict(out=str(tmp_path), prior="structural-position", trees="induced:/m/sf", max_steps=1)
    plain = TrainArguments(**options)
    parsed = TrainArguments(**options)
    parsed.check()
    assert isinstance(parsed.trees, StructureSource) and parsed.phrases is None and type(plain.trees) is str
    assert json.dumps(asdict(parsed), sort_keys=True) == json.dumps(asdict(plain), sort_keys=True)
    assert pickle.dumps(asdict(parsed)) == pickle.dumps(asdict(plain))
    assert asdict(parsed) == asdict(plain)  # the resume check compares these
    assert (
        parsed.induces_from_masked_inputs
        and not TrainArguments(**{**options, "trees": "gold"}).induces_from_masked_inputs
    )


def test_the_command_line_parses_both_options_once():
    ns = argparse.Namespace(trees="gold", phrases="induced:/m/tt")
    parse_structure_sources(ns)
    assert isinstance(ns.trees, StructureSource) and ns.phrases.model_dir == "/m/tt"
    with pytest.raises(InputError, match=r"^--phrases must be gold or induced:MODEL_DIR, got 'silver'$"):
        parse_structure_sources(argparse.Namespace(trees=None, phrases="silver"))


class ToyTreeReader(StructuralPrior):
    """A prior that reads trees only when its config says so: the checks must follow its declaration."""

    structure_input = "trees"
    structure_messages = {
        "train-missing": "toy {prior} wants trees",
        "eval-missing": "toy model {prior} wants trees",
    }

    @classmethod
    def reads_structure(cls, config):
        return bool(config.get("toy_reads"))


class _Config:
    def __init__(self, **fields):
        self.__dict__.update(fields)

    def to_dict(self):
        return dict(self.__dict__)


class _Model:
    capabilities = Capabilities(structure_inputs=True)  # what a model declares in its registry entry

    def __init__(self, **fields):
        self.config = _Config(**fields)

    def forward(self, input_ids, structure_inputs=None):
        raise NotImplementedError


def test_a_prior_declaration_drives_the_checks(tmp_path, monkeypatch):
    monkeypatch.setitem(PRIORS, "toy", ToyTreeReader)
    assert structure_readers("trees") == {"structural-position": PRIORS["structural-position"], "toy": ToyTreeReader}
    assert structure_reader({"prior": "toy", "toy_reads": True}) is ToyTreeReader
    assert structure_reader({"prior": "toy"}) is None
    # train: the toy prior reading trees refuses a missing --trees, with its own message
    args = TrainArguments(out=str(tmp_path), prior="toy", overrides={"toy_reads": True}, max_steps=1)
    with pytest.raises(InputError) as error:
        args.check()
    assert str(error.value) == "toy toy wants trees"
    TrainArguments(out=str(tmp_path), prior="toy", max_steps=1).check()  # its config reads none: no trees needed
    # evaluation: the same declaration, read from the model's config
    reading = _Model(prior="toy", toy_reads=True)
    assert model_structure_input(reading) == "trees"
    with pytest.raises(InputError) as error:
        check_model_trees(reading, None)
    assert str(error.value) == "toy model toy wants trees"
    assert check_model_trees(reading, "gold") == "gold"
    with pytest.raises(InputError) as error:  # the message of the prior that does read phrases
        check_model_phrases(reading, "induced:/m")
    assert str(error.value) == (
        "--phrases induced:/m: this _Model (prior toy) has no 'tree' heads and reads no phrases; leave --phrases out"
    )
    with pytest.raises(InputError) as error:
        check_model_trees(_Model(prior="toy"), "gold")
    assert str(error.value) == (
        "--trees gold: this _Model (prior toy) reads no trees; "
        "leave --trees out (only a prior such as structural-position reads them)"
    )


def test_the_structural_position_prior_reads_trees_whatever_its_config(tmp_path):
    with pytest.raises(InputError) as error:
        TrainArguments(out=str(tmp_path), prior="structural-position", max_steps=1).check()
    assert str(error.value) == (
        "--prior structural-position needs a dependency tree per sentence: give --trees gold or --trees induced:MODEL_DIR"
    )
    assert structure_reader({"prior": "structural-position"}) is PRIORS["structural-position"]


def test_multi_granularity_reads_phrases_with_a_tree_head_and_prepares_them():
    mg = MultiGranularityPrior
    assert mg.structure_input == "phrases"
    assert mg.reads_structure({"mgsa_granularities": "word*2,tree,2gram"})
    assert not mg.reads_structure({"mgsa_granularities": "word*2,2gram,3gram"}) and not mg.reads_structure({})
    with pytest.raises(InputError, match="'phrase' is not 'word'"):
        mg.reads_structure({"mgsa_granularities": "word,phrase"})
    assert tree_level({"prior": "multi-granularity", "mgsa_tree_level": 2}) == 2
    assert tree_level({"prior": "multi-granularity"}) == 1 and tree_level({}) == 1
    phrases = [[(0, 2, "NP"), (2, 3, "VP")], [(0, 1, "S"), (1, 2, None)]]
    assert mg.phrase_label_vocabulary({}, phrases) is None  # no label supervision
    labelled = {"mgsa_phrase_loss_weight": 0.5}
    assert mg.phrase_label_vocabulary(labelled, phrases) == ["NP", "S", "VP", OTHER]
    assert mg.phrase_label_vocabulary({**labelled, "mgsa_phrase_labels": ["A", OTHER]}, phrases) == ["A", OTHER]
    assert mg.with_phrase_labels({"hidden_size": 8}, ["NP", OTHER]) == {"hidden_size": 8, "mgsa_num_phrase_labels": 2}
    with pytest.raises(InputError) as error:
        mg.with_phrase_labels({"mgsa_num_phrase_labels": 3}, ["NP", OTHER])
    assert str(error.value) == (
        "mgsa_num_phrase_labels is 3, the phrase labels of the training trees are 2 (NP, other): leave it unset"
    )
    mg.check_structure_source(labelled, StructureSource.parse("gold"))
    with pytest.raises(InputError, match="only --phrases gold has"):
        mg.check_structure_source(labelled, StructureSource.parse("induced:/m"))
    config = _Config()
    mg.save_phrase_labels(config, ("NP", OTHER))
    assert config.mgsa_phrase_labels == ["NP", OTHER]
