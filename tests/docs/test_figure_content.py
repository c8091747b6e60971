"""What the figures show, read back from the rendered pixels (syntaxformer/figures).

tests/docs/test_figures.py checks the artists' arrays, labels and that the PNG is not blank; here each
figure is rendered to a PNG (Agg, in memory), read back with ``matplotlib.image.imread``, and the
colour at every cell centre is mapped back through the documented colour scale (viridis on
[0, 1], or [0, max] for attention) to a value that must equal the input to 0.02:

* ``plot_constituent_priors`` of a hand-built prior ``C_ij = prod_{k=i}^{j-1} a_k`` on 5 words, two
  layers: word i's row is the i-th from the top, word j's column the j-th from the left, tick labels
  sit on their row / column, and the colour bar runs from viridis(0) at the bottom to viridis(1);
* ``plot_attention_heads`` of a non-symmetric matrix (queries = rows, keys = columns);
* ``plot_link_probabilities``: one row per layer, layer 0 at the bottom, cell k between the labels
  of words k and k+1; the annotations sit in their cells with the cell's value;
* ``plot_tree``: the tree read back from the drawn edges and text labels equals the tree drawn.

Cells are located from the axes' window extent and the documented geometry (not from the axes'
data transform), so a transposed, flipped or shifted heatmap fails.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib import colormaps  # noqa: E402
from nltk import Tree  # noqa: E402

from syntaxformer.figures import plot_attention_heads, plot_constituent_priors, plot_link_probabilities, plot_tree  # noqa: E402

DPI = 100
VIRIDIS = colormaps["viridis"]
#: viridis sampled finely: value grid and its RGB colours
GRID = np.linspace(0.0, 1.0, 2001)
GRID_RGB = VIRIDIS(GRID)[:, :3]
WORDS = ["the", "cat", "sat", "on", "mats"]


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def render(fig) -> np.ndarray:
    """The figure as a PNG at DPI, read back: ``(height, width, 3)`` floats in [0, 1], row 0 at
    the top. Afterwards the artists' window extents are those of this rendering."""
    fig.set_dpi(DPI)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    buffer.seek(0)
    image = matplotlib.image.imread(buffer)
    width, height = fig.get_size_inches() * DPI
    assert image.shape[:2] == (int(height), int(width))  # Agg truncates fractional pixels
    return image[:, :, :3]


def colour_at(image: np.ndarray, x: float, y: float, half: int = 2) -> np.ndarray:
    """Median RGB of a (2 half + 1)^2 patch around display point (x, y) (origin bottom left)."""
    col, row = int(round(x)), int(round(image.shape[0] - y))
    patch = image[row - half : row + half + 1, col - half : col + half + 1].reshape(-1, 3)
    return np.median(patch, axis=0)


def decode(rgb: np.ndarray, vmax: float = 1.0) -> float:
    """The value whose viridis colour on [0, vmax] is nearest to ``rgb``; the colour must be a
    viridis colour (not background, text or an edge)."""
    distance = np.linalg.norm(GRID_RGB - rgb, axis=1)
    assert distance.min() < 0.02, f"{rgb} is no viridis colour"
    return float(GRID[distance.argmin()] * vmax)


def extent(artist):
    return artist.get_window_extent()


def centre(box) -> tuple[float, float]:
    return (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2


def prior_by_loops(links) -> np.ndarray:
    """C[l, i, j] = product of a[l, k] for k from min(i, j) to max(i, j) - 1 (1 on the diagonal)."""
    links = np.asarray(links, dtype=float)
    layers, n = links.shape[0], links.shape[1] + 1
    c = np.ones((layers, n, n))
    for l in range(layers):
        for i in range(n):
            for j in range(n):
                for k in range(min(i, j), max(i, j)):
                    c[l, i, j] *= links[l, k]
    return c


def heatmap_cells(image, ax, n_rows: int, n_cols: int, vmax: float = 1.0) -> np.ndarray:
    """Values decoded at the centres of an ``n_rows x n_cols`` grid filling the axes, row 0 at the
    top (an ``imshow`` heatmap with limits at the outer cell edges)."""
    box = extent(ax)
    out = np.zeros((n_rows, n_cols))
    for i in range(n_rows):
        for j in range(n_cols):
            x = box.x0 + (j + 0.5) * box.width / n_cols
            y = box.y1 - (i + 0.5) * box.height / n_rows
            out[i, j] = decode(colour_at(image, x, y), vmax)
    return out


# ---------------------------------------------------------------------------------------------
# constituent priors
# ---------------------------------------------------------------------------------------------

#: layer 0's links, and layer 1 = layer 0 + (1 - layer 0) * â (the hierarchical constraint)
LINKS = np.array([[0.9, 0.3, 0.7, 0.5], [0.9 + 0.1 * 0.5, 0.3 + 0.7 * 0.2, 0.7 + 0.3 * 0.6, 0.5 + 0.5 * 0.1]])


def test_prior_by_loops_by_hand():
    c = prior_by_loops(LINKS)
    assert c[0, 0, 4] == pytest.approx(0.9 * 0.3 * 0.7 * 0.5)
    assert c[1, 3, 1] == pytest.approx(0.44 * 0.88)
    assert (c[:, range(5), range(5)] == 1).all()


def test_constituent_prior_pixels_follow_the_prior():
    priors = prior_by_loops(LINKS)  # (2, 5, 5)
    fig = plot_constituent_priors(priors, WORDS, model_name="hand-built")
    try:
        image = render(fig)
        panels = [ax for ax in fig.axes if ax.images]
        assert [ax.get_title() for ax in panels] == ["layer 0", "layer 1"]
        for layer, ax in enumerate(panels):
            box = extent(ax)
            assert abs(box.width - box.height) <= 1.5  # square cells (aspect equal, 5 x 5)
            recovered = heatmap_cells(image, ax, 5, 5)
            np.testing.assert_allclose(recovered, priors[layer], atol=0.02, err_msg=f"layer {layer}")
            # word i labels row i (from the top) and column i (from the left)
            for i, (xlabel, ylabel) in enumerate(zip(ax.get_xticklabels(), ax.get_yticklabels())):
                assert xlabel.get_text() == ylabel.get_text() == WORDS[i]
                assert centre(extent(xlabel))[0] == pytest.approx(box.x0 + (i + 0.5) * box.width / 5, abs=2.0)
                assert centre(extent(ylabel))[1] == pytest.approx(box.y1 - (i + 0.5) * box.height / 5, abs=2.0)
                assert extent(xlabel).y1 <= box.y0 and extent(ylabel).x1 <= box.x0
        # the two layers differ where their links differ, e.g. C[., 1, 2] = 0.3 vs 0.44
        assert heatmap_cells(image, panels[1], 5, 5)[1, 2] - heatmap_cells(image, panels[0], 5, 5)[
            1, 2
        ] == pytest.approx(0.14, abs=0.03)

        # the shared colour bar: viridis(v) at height v of the bar, on [0, 1]
        bar = fig.axes[-1]
        assert not bar.images and bar not in panels
        bar_box = extent(bar)
        for v in np.linspace(0.05, 0.95, 10):
            rgb = colour_at(image, (bar_box.x0 + bar_box.x1) / 2, bar_box.y0 + v * bar_box.height, half=1)
            assert decode(rgb) == pytest.approx(v, abs=0.02)
    finally:
        plt.close(fig)


def test_attention_head_pixels_put_queries_on_rows():
    """A non-symmetric attention matrix: query i = row i from the top, key j = column j from the
    left, colour scale [0, max]."""
    attention = np.array(
        [
            [[0.10, 0.60, 0.05, 0.00], [0.30, 0.00, 0.20, 0.10], [0.00, 0.45, 0.15, 0.35], [0.25, 0.05, 0.50, 0.40]],
            [[0.40, 0.00, 0.00, 0.00], [0.10, 0.20, 0.30, 0.15], [0.05, 0.10, 0.25, 0.55], [0.35, 0.30, 0.20, 0.10]],
        ]
    )
    fig = plot_attention_heads(attention, WORDS[:4], layer=1)
    try:
        image = render(fig)
        panels = [ax for ax in fig.axes if ax.images]
        assert len(panels) == 2
        for head, ax in enumerate(panels):
            recovered = heatmap_cells(image, ax, 4, 4, vmax=0.60)
            np.testing.assert_allclose(recovered, attention[head], atol=0.02 * 0.60, err_msg=f"head {head}")
    finally:
        plt.close(fig)


# ---------------------------------------------------------------------------------------------
# link probabilities
# ---------------------------------------------------------------------------------------------

#: three layers over 6 words (5 gaps), all values distinct
LINK_PROBS = np.array([[0.05, 0.40, 0.15, 0.70, 0.30], [0.35, 0.55, 0.25, 0.80, 0.45], [0.60, 0.75, 0.50, 0.95, 0.65]])
LINK_WORDS = ["stocks", "fell", "on", "the", "big", "board"]


def link_cell_centre(box, layer: int, gap: int, layers: int, n: int) -> tuple[float, float]:
    """Documented geometry: x limits (-0.5, n-0.5), word k at x = k, gap k fills [k, k+1];
    row l fills [l - 0.5, l + 0.5] of the limits (-0.5, L-0.5), layer 0 at the bottom."""
    x = box.x0 + (gap + 1.0) / n * box.width
    y = box.y0 + (layer + 0.5) / layers * box.height
    return x, y


def test_link_probability_pixels_follow_the_links():
    layers, n = LINK_PROBS.shape[0], len(LINK_WORDS)
    fig = plot_link_probabilities(LINK_PROBS, LINK_WORDS, annotate=False)
    try:
        image = render(fig)
        ax = fig.axes[0]
        assert not ax.texts
        box = extent(ax)
        recovered = np.array(
            [
                [decode(colour_at(image, *link_cell_centre(box, l, k, layers, n))) for k in range(n - 1)]
                for l in range(layers)
            ]
        )
        np.testing.assert_allclose(recovered, LINK_PROBS, atol=0.02)
        # word k's label sits at x = k: between cell k-1 and cell k, under the words it links
        for k, label in enumerate(ax.get_xticklabels()):
            assert label.get_text() == LINK_WORDS[k]
            assert centre(extent(label))[0] == pytest.approx(box.x0 + (k + 0.5) / n * box.width, abs=2.0)
        # layer labels from the bottom up
        for l, label in enumerate(ax.get_yticklabels()):
            assert label.get_text() == str(l)
            assert centre(extent(label))[1] == pytest.approx(box.y0 + (l + 0.5) / layers * box.height, abs=2.0)
        # left of word 0 and right of the last word: no cell (the axes background, white)
        for l in range(layers):
            y = box.y0 + (l + 0.5) / layers * box.height
            for x in (box.x0 + 0.25 / n * box.width, box.x1 - 0.25 / n * box.width):
                np.testing.assert_allclose(colour_at(image, x, y), [1.0, 1.0, 1.0], atol=0.02)
    finally:
        plt.close(fig)


def test_link_probability_annotations_sit_in_their_cells():
    fig = plot_link_probabilities(LINK_PROBS, LINK_WORDS)  # 5 gaps: annotated by default
    try:
        render(fig)
        ax = fig.axes[0]
        box = extent(ax)
        layers, n = LINK_PROBS.shape[0], len(LINK_WORDS)
        assert len(ax.texts) == LINK_PROBS.size
        found = {}
        for text in ax.texts:
            x, y = centre(extent(text))
            gap = int(np.floor((x - box.x0) / box.width * n - 0.5))
            layer = int(np.floor((y - box.y0) / box.height * layers))
            cx, cy = link_cell_centre(box, layer, gap, layers, n)
            assert x == pytest.approx(cx, abs=2.0) and y == pytest.approx(cy, abs=2.0)
            found[layer, gap] = text.get_text()
            # readable on the cell: black on bright cells (> 0.6), white on dark ones
            expected = "black" if LINK_PROBS[layer, gap] > 0.6 else "white"
            assert matplotlib.colors.same_color(text.get_color(), expected), (layer, gap)
        assert found == {(l, k): f"{LINK_PROBS[l, k]:.2f}" for l in range(layers) for k in range(n - 1)}
    finally:
        plt.close(fig)


# ---------------------------------------------------------------------------------------------
# trees
# ---------------------------------------------------------------------------------------------

TREES = [
    Tree.fromstring("(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))))"),
    Tree.fromstring("(S (X a (X b c d)) (X e) f)"),  # n-ary, a unary node, words at many depths
    Tree.fromstring("(S (X (X (X w0 w1) w2) w3) w4)"),  # left-branching
]


def tree_from_drawing(ax) -> Tree:
    """Rebuild the tree from the axes: node labels are the boxed texts, words the unboxed ones,
    solid lines the edges (parent above child), dashed lines drop a word to the bottom row."""
    nodes = {tuple(np.round(t.get_position(), 6)): t.get_text() for t in ax.texts if t.get_bbox_patch() is not None}
    words = {round(t.get_position()[0], 6): t.get_text() for t in ax.texts if t.get_bbox_patch() is None}
    children: dict[tuple, list[tuple]] = {}
    for line in ax.lines:
        (x0, y0), (x1, y1) = np.round(line.get_xydata(), 6)
        if line.get_linestyle() != "-":
            assert x0 == x1 and x0 in words  # a drop line, straight down to its word
            continue
        parent, child = ((x0, y0), (x1, y1)) if y0 > y1 else ((x1, y1), (x0, y0))
        assert parent in nodes, parent
        children.setdefault(parent, []).append(child)

    def build(position):
        if position not in nodes:  # the end of an edge that is no node: a word
            return words[position[0]]
        return Tree(nodes[position], [build(c) for c in sorted(children.get(position, []))])

    roots = [p for p in nodes if not any(p in cs for cs in children.values())]
    assert len(roots) == 1, roots
    return build(roots[0])


@pytest.mark.parametrize("tree", TREES, ids=["cat", "n-ary", "left"])
def test_tree_drawing_encodes_the_tree(tree):
    fig = plot_tree(tree)
    try:
        image = render(fig)
        ax = fig.axes[0]
        assert tree_from_drawing(ax) == tree
        # the words, read left to right in the rendering, are the leaves in order, on one row,
        # without overlapping, inside the image
        words = sorted((t for t in ax.texts if t.get_bbox_patch() is None), key=lambda t: extent(t).x0)
        assert [t.get_text() for t in words] == tree.leaves()
        boxes = [extent(t) for t in words]
        assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:]))
        assert len({round(b.y1) for b in boxes}) == 1
        assert all(0 <= b.x0 and b.x1 <= image.shape[1] and 0 <= b.y0 for b in boxes)
    finally:
        plt.close(fig)
