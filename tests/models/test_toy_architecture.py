"""Adding a model is one file and one registry line: a toy architecture, registered in one place
(:func:`register` below, the line a model adds to ``models/__init__.py``), goes through the unchanged
``train``, ``parse``, ``logic train`` and ``nli train`` commands.

The toy is as small as the interfaces allow: an embedding table with a linear mixing layer (the
sentence encoder), a masked-LM head over it that induces syntactic distances (one learned score per
word), and a sentence-pair classifier that pools the encoder's outputs and classifies the pair.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from helpers import write_logic_folder
from torch import nn
from transformers import AutoModelForMaskedLM, AutoTokenizer, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, MaskedLMOutput, SequenceClassifierOutput

from syntaxformer.cli import main
from syntaxformer.data.corpus import load_corpus
from syntaxformer.decoding.spans import spans_to_tree, split_by_distance, to_bracketed, with_preterminals
from syntaxformer.models import (
    ENCODERS,
    MODELS,
    PAIR_MODELS,
    REGISTRY,
    Architecture,
    EncoderUse,
    LanguageModelUse,
    PairClassifierUse,
    register,
    unregister,
)
from syntaxformer.structures import SyntacticDistances

NAME = "toy-architecture"


class ToyConfig(PretrainedConfig):
    model_type = "syntaxformer-toy-architecture"

    def __init__(
        self,
        vocab_size: int = 10,
        hidden_size: int = 8,
        pad_token_id: int = 0,
        char_ngram_sizes=(3,),
        char_ngram_buckets: int = 16,
        freeze_word_embeddings: bool = False,
        **kwargs,
    ):
        kwargs.setdefault("num_labels", 3)
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.char_ngram_sizes, self.char_ngram_buckets = list(char_ngram_sizes), char_ngram_buckets
        self.freeze_word_embeddings = freeze_word_embeddings


class ToyPreTrained(PreTrainedModel):
    config_class = ToyConfig

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.1)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)


class ToyModel(ToyPreTrained):
    """The sentence encoder: ``tanh(W e(w))``; input_ids (B, N) -> last_hidden_state (B, N, D)."""

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.mix = nn.Linear(config.hidden_size, config.hidden_size)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, **kwargs):
        return BaseModelOutput(last_hidden_state=torch.tanh(self.mix(self.embeddings(input_ids))))


class ToyForMaskedLM(ToyPreTrained):
    """Masked LM over the encoder; the distance of the gap before word i is a learned score of word i."""

    objective = "masked-lm"
    induces_structure = True

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.mix = nn.Linear(config.hidden_size, config.hidden_size)
        self.head = nn.Linear(config.hidden_size, config.vocab_size)
        self.distance = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, labels=None, **kwargs):
        logits = self.head(torch.tanh(self.mix(self.embeddings(input_ids))))  # (B, N, V)
        loss = None if labels is None else F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits)

    @torch.no_grad()
    def induce(self, input_ids, attention_mask):
        scores = self.distance(self.embeddings(input_ids)).squeeze(-1)  # (B, N)
        lengths = attention_mask.sum(-1).tolist()
        return [[SyntacticDistances(scores[b, 1:t].double().cpu().numpy())] for b, t in enumerate(lengths)]


class ToyForPairClassification(ToyPreTrained):
    """Both sentences through the encoder, mean-pooled, ``[u; v; u*v; |u-v|]`` -> a linear layer."""

    main_input_name = "premise_ids"

    def __init__(self, config):
        super().__init__(config)
        self.encoder = ToyModel(config)
        self.classifier = nn.Linear(4 * config.hidden_size, config.num_labels)
        self.post_init()

    def _vector(self, ids, mask):
        hidden = self.encoder(ids).last_hidden_state  # (B, N, D)
        m = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1)  # (B, D)

    def forward(self, premise_ids, premise_mask, hypothesis_ids, hypothesis_mask, labels=None, **kwargs):
        u, v = self._vector(premise_ids, premise_mask), self._vector(hypothesis_ids, hypothesis_mask)
        logits = self.classifier(torch.cat([u, v, u * v, (u - v).abs()], dim=-1))  # (B, C)
        loss = None if labels is None else F.cross_entropy(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)


TINY = {"tiny": dict(hidden_size=8)}


@pytest.fixture
def toy():
    """The toy architecture in the registry for one test: the one line a new model adds."""
    arch = register(
        Architecture(
            NAME,
            ToyConfig,
            language_model=LanguageModelUse(ToyForMaskedLM, TINY),
            encoder=EncoderUse(ToyModel, {"tiny": dict(hidden_size=8)}, pooling="mean"),
            pair_classifier=PairClassifierUse(ToyForPairClassification, TINY),
        )
    )
    yield arch
    unregister(NAME)
    assert NAME not in REGISTRY and NAME not in MODELS and NAME not in ENCODERS and NAME not in PAIR_MODELS


def test_the_toy_is_in_every_view_of_the_registry(toy):
    assert toy.uses() == ("language_model", "encoder", "pair_classifier")
    assert MODELS[NAME] is ToyForMaskedLM and ENCODERS[NAME] is toy and PAIR_MODELS[NAME] is toy


def test_the_toy_trains_and_parses(toy, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(s) for s in load_corpus("ptb-sample")[:64]) + "\n")
    out = tmp_path / "lm"
    args = ["train", "--architecture", NAME, "--preset", "tiny", "--corpus", str(corpus), "--max-steps", "3"]
    assert main(args + ["--batch-size", "8", "--seed", "0", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["model_type"] == ToyConfig.model_type
    assert json.loads((out / "training.json").read_text())["steps"] == 3
    sentences = ["the cat sat on the mat", "dogs bark"]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n")
    parse = ["parse", "--model", str(out), "--input", str(tmp_path / "in.txt"), "--out", str(tmp_path / "parsed")]
    assert main(parse) == 0
    # the trees are the toy's own distances, split greedily (the one decoder), computed here by hand
    model = AutoModelForMaskedLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    expected = []
    for words in (s.split() for s in sentences):
        ids = torch.tensor(tokenizer.convert_tokens_to_ids(words))
        with torch.no_grad():
            scores = model.distance(model.embeddings(ids)).squeeze(-1)[1:].tolist()
        expected.append(to_bracketed(with_preterminals(spans_to_tree(words, split_by_distance(scores)))))
    assert (tmp_path / "parsed" / "trees.txt").read_text().splitlines()[:2] == expected


def test_the_toy_trains_on_the_logic_task(toy, tmp_path):
    write_logic_folder(tmp_path / "logic")
    out = tmp_path / "logic-out"
    args = ["logic", "train", "--corpus", str(tmp_path / "logic"), "--architecture", NAME, "--preset", "tiny"]
    assert main(args + ["--max-steps", "3", "--seed", "0", "--out", str(out)]) == 0
    report = json.loads((out / "logic.json").read_text())
    assert report["encoder"] == NAME


def test_the_toy_trains_on_nli(toy, sick_file, tmp_path, capsys):
    out = tmp_path / "nli"
    args = ["nli", "train", "--corpus", str(sick_file), "--architecture", NAME, "--recipe", "tiny", "--max-steps", "3"]
    assert main(args + ["--batch-size", "2", "--seed", "0", "--out", str(out), "--quiet", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == NAME and report["steps"] == 3 and report["scores"]["test"]["n"] == 3
