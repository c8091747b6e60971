"""The model registry and the structure interface: a new model = its file + one registry entry.

A toy model that induces syntactic distances (the distance of the gap before a word is that word's
token id) is registered here and parsed by the unchanged ``parse`` command: nothing outside the model
and its registry entry knows it.
"""

import pytest
import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from syntaxformer.cli import main
from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.decoding.spans import spans_to_tree, split_by_distance, to_bracketed, with_preterminals
from syntaxformer.models import REGISTRY, Architecture, LanguageModelUse, make_config, register, unregister
from syntaxformer.structures import SyntacticDistances


class ToyConfig(PretrainedConfig):
    model_type = "syntaxformer-toy"

    def __init__(self, vocab_size: int = 10, hidden_size: int = 4, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.hidden_size = vocab_size, hidden_size


class ToyForMaskedLM(PreTrainedModel):
    config_class = ToyConfig
    induces_structure = True

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, **kwargs):
        return self.embeddings(input_ids)

    def induce(self, input_ids, attention_mask):
        lengths = attention_mask.sum(-1).tolist()
        return [[SyntacticDistances(input_ids[b, 1:t].double().cpu().numpy())] for b, t in enumerate(lengths)]


@pytest.fixture
def toy_model():
    entry = register(
        Architecture("toy", ToyConfig, language_model=LanguageModelUse(ToyForMaskedLM, {"tiny": dict(hidden_size=4)}))
    )
    yield entry
    unregister("toy")


def test_a_registered_toy_model_parses_through_the_cli(toy_model, tmp_path):
    sentences = [["the", "cat", "sat", "on", "the", "mat"], ["dogs", "bark"]]
    tokenizer = build_word_tokenizer(sentences)
    config = make_config("toy", "tiny", len(tokenizer))
    torch.manual_seed(0)
    ToyForMaskedLM(config).save_pretrained(tmp_path / "toy")
    tokenizer.save_pretrained(tmp_path / "toy")
    (tmp_path / "in.txt").write_text("\n".join(" ".join(s) for s in sentences) + "\n")
    assert (
        main(
            [
                "parse",
                "--model",
                str(tmp_path / "toy"),
                "--input",
                str(tmp_path / "in.txt"),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    expected = []
    for words in sentences:
        ids = tokenizer.convert_tokens_to_ids(words)
        tree = spans_to_tree(words, split_by_distance([float(i) for i in ids[1:]]))
        expected.append(to_bracketed(with_preterminals(tree)))
    assert (tmp_path / "out" / "trees.txt").read_text().split("\n")[:2] == expected
    # Tree Transformer decoder options are refused for distances, never ignored
    assert (
        main(
            [
                "parse",
                "--model",
                str(tmp_path / "toy"),
                "--input",
                str(tmp_path / "in.txt"),
                "--out",
                str(tmp_path / "out2"),
                "--layer",
                "0",
            ]
        )
        == 1
    )


def test_registry_entries_and_errors(toy_model):
    assert set(REGISTRY) >= {"tree-transformer", "structformer", "toy"}
    with pytest.raises(ValueError, match="already registered"):
        register(Architecture("toy", ToyConfig, language_model=LanguageModelUse(nn.Module, {})))
    with pytest.raises(ValueError, match="unknown preset"):
        make_config("toy", "huge", 10)


def test_induce_refuses_a_model_that_induces_nothing_before_training(tmp_path, capsys):
    # a plain Transformer induces no trees: refused at once, nothing trained or written
    argv = ["induce", "--architecture", "tree-transformer", "--prior", "none", "--out", str(tmp_path / "x")]
    assert main([*argv, "--quiet"]) == 1
    assert "induces no structure" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert (
        main(
            [
                "induce",
                "--architecture",
                "structformer",
                "--variant",
                "official",
                "--out",
                str(tmp_path / "y"),
                "--quiet",
            ]
        )
        == 1
    )
    assert not (tmp_path / "y").exists()


def test_induce_refuses_decoder_options_the_structure_does_not_take(tmp_path, capsys):
    # StructFormer gives syntactic distances: --layer (a link-probability decoder) is refused at once
    assert (
        main(["induce", "--architecture", "structformer", "--layer", "0", "--out", str(tmp_path / "z"), "--quiet"]) == 1
    )
    assert "Tree Transformer decoder option" in capsys.readouterr().err
    assert not (tmp_path / "z").exists()
