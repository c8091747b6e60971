"""Structural position representations (Wang, Tu, Wang & Shi, EMNLP 2019; DESIGN.md §3.2): the
hand-computed positions of a small tree, the literal relative-key bias, the plain Transformer as the
zero limit, padding invariance, the eager and sdpa kernels, trees from the data (gold, induced; bad
trees), and a tiny training run with gold trees."""

import json

import pytest
import torch

from syntaxformer.data.trees import NO_TREE, check_tree, drop_tokens, gold_tree_sentences, token_heads
from syntaxformer.errors import InputError
from syntaxformer.models import MODELS, make_config
from syntaxformer.priors import PRIORS, StructuralPositionPrior
from syntaxformer.priors.structural_position import relative_buckets, relative_structural_positions, structural_depths
from syntaxformer.sources.corpus import load_tree_corpus

# A hand-drawn tree over 5 words (0-based heads, -1 = root):
#
#            w3 (root)
#          /        \
#        w1          w4
#       /  \
#     w0    w2
HEADS = [1, 3, 1, -1, 3]
DEPTHS = [2, 1, 2, 0, 1]
# rel(i, j) = abs(i) - abs(j) on one root path, else (abs(i) + abs(j)) * sign(i - j), computed by hand
RELATIVE = [[0, 1, -4, 2, -3], [-1, 0, -1, 1, -2], [4, 1, 0, 2, -3], [-2, -1, -2, 0, -1], [3, 2, 3, 1, 0]]


def test_hand_drawn_tree_positions():
    heads = torch.tensor([HEADS])
    assert structural_depths(heads).tolist() == [DEPTHS]
    assert relative_structural_positions(heads).tolist() == [RELATIVE]
    # the same tree after a [CLS] and before padding: tokens outside the tree get depth 0, relative 0,
    # and their own bucket 2K + 1
    shifted = [NO_TREE] + [h + 1 if h >= 0 else h for h in HEADS] + [NO_TREE, NO_TREE]
    heads = torch.tensor([shifted])
    assert structural_depths(heads).tolist() == [[0] + DEPTHS + [0, 0]]
    rel = relative_structural_positions(heads)[0]
    assert rel[1:6, 1:6].tolist() == RELATIVE
    assert rel[0].abs().sum() == 0 and rel[:, 6:].abs().sum() == 0
    buckets = relative_buckets(heads, max_relative=2)[0]
    assert buckets[1:6, 1:6].tolist() == [[min(max(r, -2), 2) + 2 for r in row] for row in RELATIVE]
    assert (buckets[0] == 5).all() and (buckets[:, 0] == 5).all()
    with pytest.raises(ValueError, match="cycle"):
        structural_depths(torch.tensor([[1, 0, -1]]))


def test_relative_bias_is_the_literal_formula():
    torch.manual_seed(0)
    prior = StructuralPositionPrior(head_dim=4, max_relative=2).double()
    heads = torch.tensor([HEADS])
    q = torch.randn(1, 3, 5, 4, dtype=torch.float64)
    bias = (
        prior(torch.zeros(1, 5, 12, dtype=torch.float64), torch.ones(1, 5, dtype=torch.bool), inputs={"heads": heads})
        .additive_bias(q)
        .detach()
    )
    table = prior.relative_keys.weight.detach()
    for h in range(3):
        for i in range(5):
            for j in range(5):
                r = min(max(RELATIVE[i][j], -2), 2) + 2
                assert abs(float(bias[0, h, i, j]) - float(q[0, h, i] @ table[r]) / 2.0) < 1e-12
    assert PRIORS["structural-position"] is StructuralPositionPrior
    with pytest.raises(InputError, match="structure_inputs"):
        prior(torch.zeros(1, 5, 12), torch.ones(1, 5, dtype=torch.bool))


def _model(prior="structural-position", seed=0):
    torch.manual_seed(seed)
    return MODELS["tree-transformer"](
        make_config("tree-transformer", "tiny", 40, prior=prior, structural_max_relative=3)
    ).eval()


def test_zero_relative_keys_and_zero_fusion_output_is_the_plain_transformer():
    plain, model = _model("none"), _model()
    missing, unexpected = model.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and all("structural_position" in k or "position_fusion" in k for k in missing)
    ids = torch.randint(5, 40, (2, 5))
    structure = {"heads": torch.tensor([HEADS, HEADS])}
    with torch.no_grad():
        assert not torch.allclose(model(ids, structure_inputs=structure).logits, plain(ids).logits, atol=1e-3)
        for layer in model.tree_transformer.layers:
            layer.structural_position.relative_keys.weight.zero_()
        model.tree_transformer.embeddings.position_fusion.fuse_out.weight.zero_()
        model.tree_transformer.embeddings.position_fusion.fuse_out.bias.zero_()
        assert torch.allclose(model(ids, structure_inputs=structure).logits, plain(ids).logits, atol=1e-6)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_padding_does_not_change_real_tokens(impl):
    model = _model()
    model.config._attn_implementation = impl
    ids = torch.randint(5, 40, (1, 5))
    other = torch.randint(5, 40, (1, 8))
    batch = torch.cat([torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], 1), other])
    mask = torch.tensor([[1] * 5 + [0] * 3, [1] * 8])
    heads = torch.tensor([HEADS + [NO_TREE] * 3, [1, -1, 1, 2, 3, 4, 5, 6]])
    with torch.no_grad():
        alone = model(ids, structure_inputs={"heads": torch.tensor([HEADS])}).logits
        padded = model(batch, mask, structure_inputs={"heads": heads}).logits[:1, :5]
    assert torch.allclose(alone, padded, atol=1e-5)


def test_eager_and_sdpa_agree_with_gradients():
    ids = torch.randint(5, 40, (2, 6))
    mask = torch.tensor([[1] * 6, [1] * 5 + [0]])
    heads = torch.tensor([[1, -1, 1, 4, 1, 4], [1, 2, -1, 2, 3, NO_TREE]])
    results = []
    for impl in ("eager", "sdpa"):
        model = _model()
        model.config._attn_implementation = impl
        out = model(ids, mask, structure_inputs={"heads": heads}).logits
        out[mask.bool()].pow(2).mean().backward()
        grads = [
            model.tree_transformer.layers[0].structural_position.relative_keys.weight.grad,
            model.tree_transformer.embeddings.position_fusion.depth_embeddings.weight.grad,
        ]
        results.append((out[mask.bool()].detach(), *grads))
    for a, b in zip(*results):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
    assert results[0][1].abs().sum() > 0 and results[0][2].abs().sum() > 0


def test_word_heads_onto_tokens_and_removed_tokens():
    # [CLS] w0 w1 ##w1 w2, word heads (1-based, 0 = root) w0 -> w1, w1 root, w2 -> w1
    assert token_heads([2, 0, 2], [None, 0, 1, 1, 2]) == [NO_TREE, 2, -1, 2, 2]
    # removing token 3 (1-based) attaches its dependent (token 4) to token 3's head
    assert drop_tokens([2, 0, 2, 3], [True, True, False, True]) == [2, 0, 2]
    assert drop_tokens([0, 1, 1], [False, True, True]) == [0, 0]


def test_bad_trees_name_the_file_and_sentence(tmp_path):
    for heads, n, message in (
        ([2, 0], 3, "2 heads for 3 words"),
        ([2, 5, 0], 3, "head 5"),
        ([2, 3, 1], 3, "cycle"),
        ([1, 0], 2, "not itself"),
    ):
        with pytest.raises(InputError, match=message) as error:
            check_tree(heads, n, "x.conllu", 4)
        assert str(error.value).startswith("x.conllu, sentence 4:") and "\n" not in str(error.value)
    path = tmp_path / "bad.dp"
    path.write_text("A\tDT\t2\ncat\tNN\t0\n\nthe\tDT\t2\ndog\tNN\t3\nbarks\tVBZ\t2\n")
    with pytest.raises(InputError, match=r"bad\.dp, sentence 2: the heads contain a cycle"):
        gold_tree_sentences(str(path))


def _write_dp(sentences, path):
    path.write_text(
        "\n".join("".join(f"{w}\t{t}\t{h}\n" for w, t, h in zip(s.words, s.tags, s.heads)) for s in sentences)
    )


def test_training_with_gold_trees(tmp_path):
    from syntaxformer.data.dependency import read_dependencies
    from syntaxformer.parsing import load_model
    from syntaxformer.tasks.run import train
    from syntaxformer.training.arguments import TrainArguments

    path = tmp_path / "sample.dp"
    _write_dp(read_dependencies("ptb-sample:dev")[:40], path)
    with pytest.raises(InputError, match="needs a dependency tree per sentence"):
        TrainArguments(out=str(tmp_path / "x"), prior="structural-position", corpus=str(path), max_steps=1).check()
    with pytest.raises(InputError, match="takes no structure_inputs"):
        train(
            out=str(tmp_path / "lstm"),
            model="on-lstm",
            preset="tiny",
            corpus=str(path),
            trees="gold",
            max_steps=1,
            quiet=True,
            threads=1,
        )
    with pytest.raises(InputError, match="^--trees: the prior 'none' reads no dependency trees"):
        train(
            out=str(tmp_path / "plain"),
            model="tree-transformer",
            preset="tiny",
            prior="none",
            corpus=str(path),
            trees="gold",
            max_steps=1,
            quiet=True,
            threads=1,
        )
    out = train(
        out=str(tmp_path / "sp"),
        model="tree-transformer",
        preset="tiny",
        prior="structural-position",
        corpus=str(path),
        trees="gold",
        add_cls=True,
        min_freq=1,
        max_steps=3,
        batch_size=8,
        eval_every=0,
        seed=0,
        quiet=True,
        threads=1,
        overrides={"structural_max_relative": 4},
    )
    record = json.loads((out / "training.json").read_text())
    assert record["steps"] == 3 and record["data"]["trees"] == "gold" and record["final_valid_loss"] is not None
    model, tokenizer, _ = load_model(out)
    assert model.config.prior == "structural-position" and model.config.structural_max_relative == 4
    words, trees = gold_tree_sentences(str(path))
    enc = tokenizer([words[0]], is_split_into_words=True)
    heads = torch.tensor([token_heads(trees[0], enc.word_ids(0))])
    assert heads[0, 0] == NO_TREE  # [CLS]
    with torch.no_grad():
        logits = model(torch.tensor(enc["input_ids"]), structure_inputs={"heads": heads}).logits
    assert torch.isfinite(logits).all()
    with pytest.raises(InputError, match="structure_inputs"):
        model(torch.tensor(enc["input_ids"]))


def test_induced_trees_from_a_structformer_folder(tmp_path):
    from syntaxformer.data.tokenization import build_word_tokenizer, save_tokenizer

    sentences = [["the", "cat", "sat"], ["a", "dog", "barked", "loudly"], ["it", "rains"]]
    corpus = tmp_path / "text.txt"
    corpus.write_text("\n".join(" ".join(s) for s in sentences) + "\n")
    torch.manual_seed(0)
    tokenizer = build_word_tokenizer(sentences)
    model = MODELS["structformer"](make_config("structformer", "tiny", len(tokenizer)))
    model.save_pretrained(tmp_path / "sf")
    save_tokenizer(tokenizer, tmp_path / "sf")
    words, trees = load_tree_corpus(f"induced:{tmp_path / 'sf'}", str(corpus))
    assert words == sentences and [len(t) for t in trees] == [3, 4, 2]
    for number, (w, t) in enumerate(zip(words, trees), start=1):
        check_tree(t, len(w), "induced", number)
    # the model's own maximum-spanning-tree heads of each sentence, parsed alone
    from syntaxformer.parsing import model_structures
    from syntaxformer.structures import DecoderOptions

    model.eval()
    assert trees == [model_structures(model, tokenizer, [s])[0].heads(DecoderOptions()) for s in sentences]
    with pytest.raises(InputError, match="--trees must be"):
        load_tree_corpus("silver", str(corpus))


def test_ptb_sample_gold_words_are_the_corpus_words():
    from syntaxformer.data.corpus import load_corpus

    words, trees = gold_tree_sentences("ptb-sample:test")
    assert words == load_corpus("ptb-sample:test")
    for number, (w, t) in enumerate(zip(words, trees), start=1):
        check_tree(t, len(w), "ptb-sample:test", number)


def test_ud_ewt_gold_trees(shared_data):
    path = shared_data / "ud-ewt" / "en_ewt-ud-dev.conllu"
    if not path.is_file():
        pytest.skip(f"needs {path}, which is absent")
    words, trees = gold_tree_sentences(str(path))
    # the file has 2,001 sentences (README of ../shared/data; 2,001 "# sent_id" lines), 14 of them
    # punctuation only (e.g. sentence 4, "***"), which are dropped
    blocks = [
        [line.split("\t") for line in block.split("\n") if line.split("\t")[0].isdigit()]  # word lines
        for block in path.read_text(encoding="utf-8").strip().split("\n\n")
    ]
    assert len(blocks) == 2001 and sum(all(t[3] == "PUNCT" for t in b) for b in blocks) == 14
    assert len(words) == len(trees) == 2001 - 14
    assert all(len(w) == len(t) for w, t in zip(words, trees))
    # sentence 1, read by eye: "From the AP comes this story :" (":" is PUNCT, attached to 4)
    assert words[0] == ["from", "the", "ap", "comes", "this", "story"]
    assert trees[0] == [3, 3, 4, 0, 6, 4]
    # sentence 3: tokens 9 ("-" of "15-year"), 24 (",") and 29 (".") are PUNCT with no dependents; the
    # tokens after them move down by one, two and three; "15" becomes N; heads read from the file
    assert words[2] == [
        "bush",
        "nominated",
        "jennifer",
        "m.",
        "anderson",
        "for",
        "a",
        "N",
        "year",
        "term",
        "as",
        "associate",
        "judge",
        "of",
        "the",
        "superior",
        "court",
        "of",
        "the",
        "district",
        "of",
        "columbia",
        "replacing",
        "steffen",
        "w.",
        "graae",
    ]
    assert trees[2] == [2, 0, 2, 3, 3, 10, 10, 9, 10, 2, 13, 13, 10, 17, 17, 17, 13, 20, 20, 17, 22, 20, 2, 23, 24, 24]
    assert words[3][:4] == ["bush", "also", "nominated", "a."]  # sentence 5: sentence 4 ("***") was dropped
