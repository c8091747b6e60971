"""Figures (syntaxformer.figures) and the ``syntaxformer show`` command.

Every figure is written as PNG and SVG and read back (PNG signature + matplotlib's reader, SVG with
xml.etree); word labels of a 40-word sentence are checked not to overlap; tree drawings are checked
for word order, node colours and crossing edges; the command runs end to end on tiny randomly
initialised models saved to a temporary folder.
"""

from __future__ import annotations

import itertools
import json
import re
import xml.etree.ElementTree as ET

import matplotlib.colors
import matplotlib.image
import matplotlib.pyplot
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from syntaxformer.decoding.spans import brackets, spans_to_tree, split_by_distance
from syntaxformer.decoding.tree_transformer import algorithm1
from syntaxformer.figures import (
    draw_text_tree,
    plot_attention_heads,
    plot_constituent_priors,
    plot_link_probabilities,
    plot_tree,
    plot_trees,
    save_figure,
    write_index,
)
from syntaxformer.figures.trees import MATCHED, NEUTRAL, UNMATCHED

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def assert_valid_images(paths) -> None:
    """``paths`` = [png, svg], both non-empty and readable as images."""
    png, svg = paths
    data = png.read_bytes()
    assert data.startswith(PNG_SIGNATURE), png
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100, image.shape
    assert image.std() > 0  # not a blank canvas
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg"), root.tag
    assert svg.stat().st_size > 1000


def prior_from_links(links: np.ndarray) -> np.ndarray:
    """C_ij = prod_{k=i}^{j-1} a_k (symmetric, C_ii = 1) for each layer: [L, n-1] -> [L, n, n]."""
    prefix = np.concatenate([np.zeros((len(links), 1)), np.cumsum(np.log(links), axis=1)], axis=1)
    return np.exp(-np.abs(prefix[:, :, None] - prefix[:, None, :]))


def hierarchical(link_hats: np.ndarray) -> np.ndarray:
    """a^l = a^{l-1} + (1 - a^{l-1}) â^l with a^{-1} = 0, over the rows of ``link_hats``."""
    out, previous = np.zeros_like(link_hats), np.zeros(link_hats.shape[1])
    for layer, hat in enumerate(link_hats):
        previous = previous + (1 - previous) * hat
        out[layer] = previous
    return out


def assert_no_overlap(boxes, axis: int) -> None:
    """Consecutive label boxes (in label order) do not overlap along ``axis`` (0: x, 1: y)."""
    spans = sorted((b.get_points()[0][axis], b.get_points()[1][axis]) for b in boxes)
    for (lo1, hi1), (lo2, hi2) in zip(spans, spans[1:]):
        assert hi1 <= lo2 + 0.5, f"labels overlap: {hi1:.1f} > {lo2:.1f}"


def tick_label_boxes(fig, ax, which: str):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = ax.get_xticklabels() if which == "x" else ax.get_yticklabels()
    return [label.get_window_extent(renderer) for label in labels if label.get_text()]


WORDS_40 = [f"word{i:02d}" + "x" * (i % 5) for i in range(40)]


@pytest.fixture(scope="module")
def synthetic_40():
    rng = np.random.default_rng(0)
    links = hierarchical(rng.uniform(0, 1, (4, 39)) ** 3)  # (L=4, n-1)
    return links, prior_from_links(links), rng.dirichlet(np.ones(40) * 0.3, size=(4, 40))


# ---------------------------------------------------------------------------------------------
# heatmaps
# ---------------------------------------------------------------------------------------------


def test_prior_from_links_matches_definition():
    links = np.array([[0.5, 0.2, 0.9]])
    c = prior_from_links(links)[0]
    assert c[0, 0] == pytest.approx(1.0)
    assert c[0, 3] == pytest.approx(0.5 * 0.2 * 0.9)
    assert c[2, 1] == pytest.approx(0.2)


def test_constituent_priors_40_words(tmp_path, synthetic_40):
    links, priors, _ = synthetic_40
    fig = plot_constituent_priors(priors, WORDS_40, model_name="synthetic-model")
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 4
    assert len(fig.axes) == 4 + 1  # one colour bar
    assert [ax.get_title() for ax in panels] == [f"layer {l}" for l in range(4)]
    assert "synthetic-model" in fig._suptitle.get_text()
    ax = panels[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == WORDS_40
    assert [t.get_text() for t in ax.get_yticklabels()] == WORDS_40
    np.testing.assert_allclose(ax.images[0].get_array(), priors[0])
    assert_no_overlap(tick_label_boxes(fig, ax, "x"), axis=0)
    assert_no_overlap(tick_label_boxes(fig, ax, "y"), axis=1)
    assert_valid_images(save_figure(fig, tmp_path / "priors"))


def test_link_probabilities_40_words(tmp_path, synthetic_40):
    links, _, _ = synthetic_40
    fig = plot_link_probabilities(links, WORDS_40, model_name="synthetic-model")
    ax = fig.axes[0]
    assert len(fig.axes) == 2  # chart + colour bar
    assert "synthetic-model" in ax.get_title()
    assert [t.get_text() for t in ax.get_xticklabels()] == WORDS_40
    assert [t.get_text() for t in ax.get_yticklabels()] == [str(l) for l in range(4)]
    # one cell per (layer, gap), values unchanged
    np.testing.assert_allclose(np.asarray(ax.collections[0].get_array()).reshape(4, 39), links)
    assert not ax.texts  # 39 gaps: no per-cell numbers by default
    assert_no_overlap(tick_label_boxes(fig, ax, "x"), axis=0)
    assert_valid_images(save_figure(fig, tmp_path / "links"))


def test_save_figure_same_figure_same_bytes(tmp_path, synthetic_40):
    """Redrawing the same numbers rewrites the same files (no date, fixed SVG ids): a regenerated
    study report changes in git only where its numbers do."""
    links, _, _ = synthetic_40
    first = save_figure(plot_link_probabilities(links, WORDS_40), tmp_path / "a" / "links")
    second = save_figure(plot_link_probabilities(links, WORDS_40), tmp_path / "b" / "links")
    for one, two in zip(first, second):
        assert one.read_bytes() == two.read_bytes(), one.name
    assert b"<dc:date>" not in first[1].read_bytes()


def test_link_probabilities_short_sentence_annotated():
    fig = plot_link_probabilities([[0.25, 0.5], [0.75, 1.0]], ["a", "b", "c"])
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["0.25", "0.50", "0.75", "1.00"]


def test_attention_heads_40_words(tmp_path, synthetic_40):
    _, _, attention = synthetic_40
    fig = plot_attention_heads(attention, WORDS_40, layer=3, model_name="synthetic-model")
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == [f"layer 3, head {h}" for h in range(4)]
    assert "layer 3" in fig._suptitle.get_text() and "synthetic-model" in fig._suptitle.get_text()
    assert panels[0].images[0].get_clim() == (0.0, pytest.approx(attention.max()))
    assert_no_overlap(tick_label_boxes(fig, panels[0], "x"), axis=0)
    assert_valid_images(save_figure(fig, tmp_path / "attention"))


def test_heatmaps_reject_wrong_shapes():
    with pytest.raises(ValueError, match="shape"):
        plot_constituent_priors(np.ones((2, 3, 3)), ["a", "b"])
    with pytest.raises(ValueError, match="shape"):
        plot_link_probabilities(np.ones((2, 3)), ["a", "b"])
    with pytest.raises(ValueError, match="at least 2 words"):
        plot_link_probabilities(np.ones((2, 0)), ["a"])
    with pytest.raises(ValueError, match="shape"):
        plot_attention_heads(np.ones((2, 3)), ["a", "b", "c"], layer=0)


def test_heatmaps_accept_torch_tensors():
    torch = pytest.importorskip("torch")
    fig = plot_link_probabilities(torch.tensor([[0.1, 0.9]]), ["a", "b", "c"])
    np.testing.assert_allclose(np.asarray(fig.axes[0].collections[0].get_array()), [[0.1, 0.9]], rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# trees
# ---------------------------------------------------------------------------------------------

CAT = Tree.fromstring("(S (NP the cat) (VP sat (PP on (NP the mat))))")
RIGHT = spans_to_tree(CAT.leaves(), [(i, 6) for i in range(5)])  # right-branching


def _words_and_nodes(ax):
    words = [t for t in ax.texts if t.get_bbox_patch() is None]
    nodes = [t for t in ax.texts if t.get_bbox_patch() is not None]
    return words, nodes


def test_tree_of_known_tree(tmp_path):
    fig = plot_tree(CAT, title="the cat")
    ax = fig.axes[0]
    words, nodes = _words_and_nodes(ax)
    assert [t.get_text() for t in words] == CAT.leaves()
    assert [t.get_position()[0] for t in words] == [0, 1, 2, 3, 4, 5]
    assert len({t.get_position()[1] for t in words}) == 1  # all words on the bottom row
    labels = {t.get_text(): t.get_position() for t in nodes}
    # a node sits midway between its first and last child, one row above them:
    # NP(the mat) 4.5, PP (3 + 4.5) / 2, VP (2 + 3.75) / 2, S (0.5 + 2.875) / 2
    assert labels["PP"] == (3.75, -2)
    assert labels["VP"] == (2.875, -1)
    assert labels["S"] == (1.6875, 0)
    assert all(
        t.get_bbox_patch().get_facecolor()[:3] == matplotlib.colors.to_rgb(NEUTRAL) for t in nodes
    )  # no reference: grey
    assert_valid_images(save_figure(fig, tmp_path / "tree"))


def test_trees_predicted_beside_gold(tmp_path):
    # gold brackets {(0,2), (2,6), (3,6), (4,6)}; right-branching {(1,6), (2,6), (3,6), (4,6)}
    assert brackets(CAT) == {(0, 2), (2, 6), (3, 6), (4, 6)}
    fig = plot_trees(RIGHT, CAT, title="right-branching vs gold")
    pred_ax, gold_ax = fig.axes[:2]
    assert pred_ax.get_title() == "predicted: 3 of 4 brackets are in gold"
    assert gold_ax.get_title() == "gold: 3 of 4 brackets were found"
    matched = matplotlib.colors.to_rgb(MATCHED)
    unmatched = matplotlib.colors.to_rgb(UNMATCHED)

    def colours(ax):
        return sorted(tuple(t.get_bbox_patch().get_facecolor()[:3]) for t in _words_and_nodes(ax)[1])

    assert colours(pred_ax).count(matched) == 3 and colours(pred_ax).count(unmatched) == 1
    assert colours(gold_ax).count(matched) == 3 and colours(gold_ax).count(unmatched) == 1
    assert_valid_images(save_figure(fig, tmp_path / "trees"))


def test_trees_reject_different_lengths():
    with pytest.raises(ValueError, match="words"):
        plot_trees(CAT, Tree("S", ["a", "b"]))


def _segments(ax):
    return [tuple(map(tuple, line.get_xydata())) for line in ax.lines]


def _cross(s, t) -> bool:
    """Proper crossing of two segments (touching at an endpoint does not count)."""
    (p1, p2), (q1, q2) = s, t
    if {p1, p2} & {q1, q2}:
        return False

    def orient(a, b, c):
        v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        return 0 if abs(v) < 1e-9 else (1 if v > 0 else -1)

    return orient(p1, p2, q1) * orient(p1, p2, q2) < 0 and orient(q1, q2, p1) * orient(q1, q2, p2) < 0


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.floats(0, 1, allow_subnormal=False), min_size=1, max_size=25),
    st.floats(0.0, 1.0, allow_subnormal=False),
)
def test_tree_edges_never_cross(distances, flat_cut):
    """Random trees (binary from distances, with spans above ``flat_cut`` removed so that some
    nodes are n-ary and words hang at different depths): no two drawn edges cross."""
    words = [f"w{i}" for i in range(len(distances) + 1)]
    spans = {(i, j) for i, j in split_by_distance(distances) if (j - i) / len(words) <= flat_cut}
    tree = spans_to_tree(words, spans)
    fig = plot_tree(tree)
    segments = _segments(fig.axes[0])
    assert len(segments) >= len(words)
    for s, t in itertools.combinations(segments, 2):
        assert not _cross(s, t), (tree, s, t)
    matplotlib.pyplot.close(fig)


def test_draw_text_tree_keeps_word_order():
    # nltk's own pretty printer prints this tree's words as "d c a b"
    text = draw_text_tree(Tree.fromstring("(S (X (X a b) c) d)"))
    assert text.splitlines()[-1].split() == ["a", "b", "c", "d"]
    ascii_text = draw_text_tree(CAT, unicodelines=False)
    assert ascii_text.splitlines()[-1].split() == CAT.leaves()
    assert ascii_text.splitlines()[0].strip() == "S"
    assert all(ord(c) < 128 for c in ascii_text)


# ---------------------------------------------------------------------------------------------
# a real ptb-sample sentence
# ---------------------------------------------------------------------------------------------


def test_figures_of_a_ptb_sample_sentence(tmp_path, ptb_gold):
    gold = ptb_gold[3]
    words = gold.leaves()
    assert words[:4] == ["a", "form", "of", "asbestos"] and len(words) == 34
    n = len(words)
    # link probabilities that follow the gold tree: the smaller the smallest gold constituent
    # over words k and k+1, the stronger the link, strengthening with depth
    smallest = [min(j - i for i, j in brackets(gold) | {(0, n)} if i <= k and k + 2 <= j) for k in range(n - 1)]
    hats = np.array([[1 - np.exp(-(layer + 1) / s) for s in smallest] for layer in range(3)])
    links = hierarchical(hats)
    predicted = spans_to_tree(words, algorithm1(links, min_layer=0))
    figures = {
        "priors": plot_constituent_priors(prior_from_links(links), words, "gold-derived"),
        "links": plot_link_probabilities(links, words, "gold-derived"),
        "attention": plot_attention_heads(prior_from_links(links)[:2], words, layer=0),
        "trees": plot_trees(predicted, gold, title="ptb-sample #3"),
        "gold": plot_tree(gold),
    }
    for name, fig in figures.items():
        assert_valid_images(save_figure(fig, tmp_path / name))


# ---------------------------------------------------------------------------------------------
# index.html
# ---------------------------------------------------------------------------------------------


def test_write_index(tmp_path):
    paths = save_figure(plot_tree(CAT), tmp_path / "s1-tree")
    page = write_index(
        tmp_path,
        "a <title>",
        [("sentence 1: the cat & co", [("tree", paths[0])])],
        meta="model m; seed 0",
        notes=["a note"],
    )
    text = page.read_text()
    assert page == tmp_path / "index.html"
    assert '<img src="s1-tree.png"' in text and '<a href="s1-tree.svg">' in text
    assert "a &lt;title&gt;" in text and "the cat &amp; co" in text and "a note" in text
    assert len(re.findall("<img ", text)) == 1


# ---------------------------------------------------------------------------------------------
# the show command, end to end on tiny random models
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory, ptb_gold):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from syntaxformer.data.tokenization import build_word_tokenizer
    from syntaxformer.models import MODELS, make_config

    corpus = [t.leaves() for t in ptb_gold[:50]]
    folders = {}
    for name, model, overrides, add_cls in [
        ("constituent", "tree-transformer", {"prior": "constituent"}, True),
        ("none", "tree-transformer", {"prior": "none"}, True),
        ("structformer", "structformer", {}, False),
    ]:
        tokenizer = build_word_tokenizer(corpus, add_cls=add_cls)
        torch.manual_seed(0)
        config = make_config(model, "tiny", len(tokenizer), **overrides)
        folder = tmp_path_factory.mktemp(f"tiny-{name}")
        MODELS[model](config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[name] = folder
    return folders


def _show(capsys, *argv) -> tuple[int, dict]:
    from syntaxformer.cli import main

    status = main(["show", *map(str, argv), "--json"])
    out = capsys.readouterr().out
    return status, (json.loads(out) if status == 0 else {})


def _check_index(out_dir, result) -> list[str]:
    text = (out_dir / "index.html").read_text()
    pngs = [f for entry in result["sentences"] for f in entry["files"] if f.endswith(".png")]
    for png in pngs:
        assert f'src="{png.rsplit("/", 1)[-1]}"' in text
    for path in (f for entry in result["sentences"] for f in entry["files"]):
        assert (out_dir / path.rsplit("/", 1)[-1]).stat().st_size > 0
    return pngs


def test_show_tree_transformer(tmp_path, capsys, tiny_models):
    out = tmp_path / "figs"
    status, result = _show(
        capsys,
        "--model",
        tiny_models["constituent"],
        "--out",
        out,
        "The cat sat",
        "--treebank",
        "ptb-sample",
        "--index",
        "0",
        "--gold",
        "--layers",
        "0,2",
        "--seed",
        "1",
    )
    assert status == 0
    assert result["prior"] == "constituent" and result["seed"] == 1
    assert result["attention_layers"] == [0, 2]
    first, second = result["sentences"]
    assert first["words"] == ["the", "cat", "sat"]  # normalised as the treebank
    assert second["words"][:2] == ["pierre", "vinken"]
    names = sorted(f.rsplit("/", 1)[-1] for f in first["files"])
    assert names == sorted(
        f"s1-{kind}.{ext}"
        for kind in ("tree", "priors", "links", "attention-layer0", "attention-layer2")
        for ext in ("png", "svg")
    )
    assert Tree.fromstring(second["tree"]).leaves() == second["words"]
    pngs = _check_index(out, result)
    assert len(pngs) == 10
    for png in pngs[:5]:
        assert_valid_images([out / png.rsplit("/", 1)[-1], out / png.rsplit("/", 1)[-1].replace(".png", ".svg")])


def test_show_plain_transformer_draws_attention_only(tmp_path, capsys, tiny_models):
    out = tmp_path / "plain"
    status, result = _show(
        capsys,
        "--model",
        tiny_models["none"],
        "--out",
        out,
        "--treebank",
        "ptb-sample",
        "--index",
        "2",
        "--gold",
        "--layers",
        "1",
    )
    assert status == 0 and result["prior"] == "none" and result["decoder"] is None
    (entry,) = result["sentences"]
    names = sorted(f.rsplit("/", 1)[-1] for f in entry["files"])
    assert names == ["s1-attention-layer1.png", "s1-attention-layer1.svg", "s1-gold.png", "s1-gold.svg"]
    _check_index(out, result)


def test_show_structformer_tree_and_attention(tmp_path, capsys, tiny_models):
    out = tmp_path / "sf"
    status, result = _show(capsys, "--model", tiny_models["structformer"], "--out", out, "the cat sat on the mat")
    assert status == 0 and result["model_type"] == "structformer"
    assert result["decoder"] == "top-down split at the largest syntactic distance"
    (entry,) = result["sentences"]
    names = sorted(f.rsplit("/", 1)[-1] for f in entry["files"])
    assert names == sorted(
        f"s1-{kind}.{ext}"
        for kind in ("tree", "distances", "attention-layer0", "attention-layer1")
        for ext in ("png", "svg")
    )
    assert Tree.fromstring(entry["tree"]).leaves() == ["the", "cat", "sat", "on", "the", "mat"]
    _check_index(out, result)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["the cat", "--index", "0"], "need --treebank"),
        (["--treebank", "ptb-sample"], "needs at least one --index"),
        (["--treebank", "ptb-sample", "--index", "3914"], "out of range"),
        (["the cat", "--layers", "5"], "0-based"),
        (["the cat", "--min-layer", "9"], "--min-layer 9 out of range"),
        (["the cat", "--min-layer", "1", "--layer", "0"], "exclude each other"),
        (["the cat", "--device", "gpu"], "not a torch device"),
        ([], "give sentences"),
    ],
)
def test_show_bad_input(tmp_path, capsys, tiny_models, argv, message):
    from syntaxformer.cli import main

    status = main(["show", "--model", str(tiny_models["constituent"]), "--out", str(tmp_path), *argv])
    assert status == 1
    assert message in capsys.readouterr().err


def test_show_missing_model(tmp_path, capsys):
    from syntaxformer.cli import main

    assert main(["show", "--model", str(tmp_path / "nope"), "--out", str(tmp_path), "a b"]) == 1
    assert "not a model folder" in capsys.readouterr().err
