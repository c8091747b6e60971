"""The Neural and Compound PCFGs (syntaxformer/models/pcfg.py): proper rule probabilities, the compound
variant's KL, the curriculum, a tiny grammar that learns a toy language, long sentences, and the model as
a parser and an ensemble member (its span marginals, structures.SpanMarginals)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.decoding.spans import left_branching, right_branching
from syntaxformer.models import REGISTRY
from syntaxformer.models.pcfg import (
    COMPOUND_PRESETS,
    PRESETS,
    CompoundPcfgConfig,
    CompoundPcfgForLanguageModel,
    NeuralPcfgConfig,
    NeuralPcfgForLanguageModel,
)
from syntaxformer.parser import BaselineVoter, EnsembleParser, Parser
from syntaxformer.structures import DecoderOptions, SpanMarginals


def tiny(compound: bool = False, vocab: int = 12, **fields):
    torch.manual_seed(0)
    if compound:
        return CompoundPcfgForLanguageModel(
            CompoundPcfgConfig(vocab_size=vocab, **{**COMPOUND_PRESETS["tiny"], **fields})
        )
    return NeuralPcfgForLanguageModel(NeuralPcfgConfig(vocab_size=vocab, **{**PRESETS["tiny"], **fields}))


def framed(sentences, pad=0, boundary=2):
    n = max(len(s) for s in sentences) + 2
    ids = torch.full((len(sentences), n), pad)
    for i, s in enumerate(sentences):
        ids[i, : len(s) + 2] = torch.tensor([boundary, *s, boundary])
    return ids, (torch.arange(n)[None] < torch.tensor([len(s) + 2 for s in sentences])[:, None]).long()


def test_registered_with_their_recipes():
    assert REGISTRY["neural-pcfg"].language_model.model_class is NeuralPcfgForLanguageModel
    assert REGISTRY["compound-pcfg"].language_model.presets["paper"] == dict(
        nonterminals=30, preterminals=60, symbol_dim=256, z_dim=64
    )
    from syntaxformer.recipes import get_recipe

    paper = get_recipe("compound-pcfg", "paper").train
    assert (paper["lr"], paper["betas"], paper["clip"], paper["optimizer"]) == (1e-3, (0.75, 0.999), 3.0, "adam")


@pytest.mark.parametrize("compound", [False, True])
def test_rule_probabilities_sum_to_one(compound):
    model = tiny(compound)
    words = torch.tensor([[4, 5, 6], [7, 8, 9]])
    z = None if not compound else torch.randn(2, model.config.z_dim)
    emissions, rules, roots = model.grammar(words, z)
    rows = 1 if z is None else 2
    assert rules.shape == (rows, 3, 7, 7) and roots.shape == (rows, 3) and emissions.shape == (2, 3, 4)
    torch.testing.assert_close(rules.exp().sum((-1, -2)), torch.ones(rows, 3))
    torch.testing.assert_close(roots.exp().sum(-1), torch.ones(rows))
    vocab = model.vocab_mlp(
        model.preterminal_emb if z is None else torch.cat([model.preterminal_emb, z[0].expand(4, -1)], -1)
    )
    torch.testing.assert_close(vocab.log_softmax(-1).exp().sum(-1), torch.ones(4))


def test_the_kl_is_zero_when_the_posterior_is_the_prior():
    model = tiny(compound=True)
    torch.nn.init.zeros_(model.enc_params.weight)
    torch.nn.init.zeros_(model.enc_params.bias)  # mean 0, log-variance 0: q(z|x) = N(0, I)
    ids, mask = framed([[4, 5, 6], [7, 8]])
    out = model(ids, mask, labels=ids)
    assert out.kl.tolist() == [0.0, 0.0]
    model.eval()
    out = model(ids, mask, labels=ids)
    # evaluation: nats per word and end of sentence, n + 1 each
    assert out.loss.item() == pytest.approx(-(out.log_likelihood.sum() / 7).item())


def test_the_curriculum_drops_long_sentences_in_training_only():
    model = tiny(curriculum_start=3, curriculum_increment=1, curriculum_final=4)
    ids, mask = framed([[4, 5, 6], [4, 5, 6, 7, 8], [9]])
    model.train()
    out = model(ids, mask, labels=ids)
    assert torch.isfinite(out.log_likelihood).tolist() == [True, False, False]  # 5 words > 3; one word: never
    model.set_epoch(5)
    assert model.curriculum_length() == 4
    model.eval()
    assert torch.isfinite(model(ids, mask).log_likelihood).tolist() == [True, True, False]


def test_a_tiny_grammar_learns_a_toy_language():
    # sentences "x y" pairs nested to the right: (a (b (a b))) ... a deterministic language whose
    # likelihood a grammar of 3 nonterminals can raise far above its start
    torch.manual_seed(0)
    sentences = [[4, 5, 4, 5], [4, 5], [4, 5, 4, 5, 4, 5], [6, 7, 6, 7], [6, 7]]
    model = tiny(vocab=8)
    ids, mask = framed(sentences)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.1)
    model.train()
    start = model(ids, mask, labels=ids).loss.item()
    for _ in range(60):
        optimiser.zero_grad()
        model(ids, mask, labels=ids).loss.backward()
        optimiser.step()
    model.eval()
    per_word = model(ids, mask, labels=ids).loss.item()
    assert start / 4 > 2.0 and per_word < 0.9  # nats per word: from ~log 8 to under log 2.5


@pytest.mark.slow
def test_a_200_word_sentence_parses():
    model = tiny(compound=True, induce_viterbi=True).eval()
    words = torch.randint(4, 12, (1, 200))
    (structure,) = model.induce(words, torch.ones_like(words))[0]
    spans = structure.spans()
    assert len(spans) == 199 and (0, 200) in spans and len(structure.viterbi) == 199
    assert structure.marginals.sum() == pytest.approx(199, rel=1e-3)


def test_span_marginals_decode_and_serialise():
    marginals = np.zeros((5, 5))
    for span, p in {(0, 4): 1.0, (1, 4): 0.6, (0, 2): 0.4, (2, 4): 0.5, (1, 3): 0.3, (0, 3): 0.1}.items():
        marginals[span] = p
    structure = SpanMarginals(marginals, viterbi={(0, 4), (0, 2), (2, 4)})
    assert structure.spans() == {(0, 4), (1, 4), (2, 4)}  # 0.6 + 0.5 beats 0.4 + 0.5, 0.6 + 0.3 and 0.1 + 0.4
    assert structure.decoders()["viterbi"]() == {(0, 4), (0, 2), (2, 4)}
    assert structure.to_json()["viterbi_spans"] == [[0, 2], [0, 4], [2, 4]]
    from syntaxformer.errors import InputError

    with pytest.raises(InputError, match="span marginals"):
        structure.spans(DecoderOptions(layer=1))


def test_a_pcfg_parses_and_votes_in_an_ensemble():
    tokenizer = build_word_tokenizer([["the", "old", "man", "sat"], ["dogs", "bark"]])
    model = tiny(compound=True, vocab=len(tokenizer)).eval()
    assert model.induce(torch.tensor([[4, 5, 6]]), torch.ones(1, 3, dtype=torch.long))[0][0].viterbi is None
    model.config.induce_viterbi = True
    parser = Parser(model, tokenizer, DecoderOptions(), name="pcfg")
    words = [["the", "old", "man", "sat"], ["dogs", "bark"], ["the"]]
    spans, heads, structures = parser.word_parses(words)
    assert [len(s) for s in spans] == [3, 1, 0] and heads == [None, None, None]
    assert isinstance(structures[0].constituency, SpanMarginals)
    assert str(parser.parse("The old man sat .")).count("(X") == 5 + 2
    # with a right-branching voter of twice its weight, the ensemble gives the right-branching tree
    ensemble = EnsembleParser([parser, BaselineVoter("right-branching")], [1.0, 2.0])
    assert ensemble.word_parses(words[:1])[0][0] == right_branching(4)


def test_a_pcfg_refuses_past_its_length_and_abstains_in_an_ensemble():
    from syntaxformer.errors import InputError
    from syntaxformer.models.pcfg import MAX_PARSE_WORDS

    tokenizer = build_word_tokenizer([["the", "old", "man", "sat"]])
    parser = Parser(tiny(vocab=len(tokenizer)).eval(), tokenizer, DecoderOptions(), name="pcfg")
    assert parser.max_words == MAX_PARSE_WORDS == 300
    parser.max_words = 3
    words = [["the", "old", "man"], ["the", "old", "man", "sat"]]
    with pytest.raises(InputError) as refused:
        parser.word_parses(words)
    assert str(refused.value) == "sentence 2: pcfg: a sentence of 4 words; this parser takes at most 3"
    # beside a left-branching voter of a tenth of its weight: the PCFG's tree where it votes, the
    # voter's where it abstains (its structures None there)
    ensemble = EnsembleParser([parser, BaselineVoter("left-branching")], [1.0, 0.1])
    assert ensemble.max_words is None
    spans, _, structures = ensemble.word_parses(words)
    assert spans[0] == parser.word_parses(words[:1])[0][0]
    assert spans[1] == left_branching(4) and structures[1][0] is None and structures[0][0] is not None
    alone = EnsembleParser([parser])
    assert alone.max_words == 3
    with pytest.raises(InputError, match="sentence 2: pcfg: a sentence of 4 words; its members take at most 3"):
        alone.word_parses(words)


def test_show_draws_the_tree_and_the_span_marginals(tmp_path):
    from syntaxformer.cli import main
    from syntaxformer.data.tokenization import save_tokenizer

    tokenizer = build_word_tokenizer([["the", "old", "man", "sat"]])
    model = tiny(compound=True, vocab=len(tokenizer))
    model.save_pretrained(tmp_path / "model")
    save_tokenizer(tokenizer, tmp_path / "model")
    code = main(["show", "--model", str(tmp_path / "model"), "--out", str(tmp_path / "show"), "the old man"])
    assert code == 0
    assert {p.name for p in (tmp_path / "show").glob("*.png")} == {"s1-tree.png", "s1-span-marginals.png"}


def test_long_sentences_parse_in_groups_and_recomputed_products_alike(monkeypatch):
    # the memory rules change how sentences are grouped and whether the products are kept, never a marginal
    import syntaxformer.models.pcfg as pcfg

    model = tiny(compound=True).eval()
    lengths = [120, 7, 60, 2]
    words = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    mask = torch.zeros_like(words)
    generator = torch.Generator().manual_seed(0)
    for row, n in enumerate(lengths):
        words[row, :n] = torch.randint(4, 10, (n,), generator=generator)
        mask[row, :n] = 1
    plain = model.induce(words, mask)
    assert [len(g) for g in model._induce_groups(torch.arange(4), torch.tensor(lengths))] == [4]
    monkeypatch.setattr(pcfg, "INDUCE_WIDTH_FLOATS", 60 * 60 / 4 * model._products_per_span() * 2)
    monkeypatch.setattr(pcfg, "INDUCE_KEEP_FLOATS", 0)
    assert [g.tolist() for g in model._induce_groups(torch.arange(4), torch.tensor(lengths))] == [[0], [1, 2], [3]]
    grouped = model.induce(words, mask)
    for row, n in enumerate(lengths):
        assert grouped[row][0].marginals.shape == (n + 1, n + 1)
        np.testing.assert_allclose(grouped[row][0].marginals, plain[row][0].marginals, atol=1e-5)
        assert grouped[row][0].marginals[0, n] == pytest.approx(1.0, abs=1e-4)  # float32 over 120 words
