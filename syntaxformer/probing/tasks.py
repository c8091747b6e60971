"""Probing tasks built from a gold treebank (Conneau et al., ACL 2018; DESIGN.md §6).

Each task labels sentences of the treebank; a classifier on frozen sentence vectors then says how
much of that property an encoder's layers hold (:mod:`syntaxformer.probing.classifiers`):

- **SentLen**: the number of words, in the bins of :data:`SENTLEN_BINS` (surface);
- **TreeDepth**: the depth of the gold tree (edges from the root to the deepest word, the
  part-of-speech level included), in the bins of :data:`TREEDEPTH_BINS` (syntax);
- **TopConst**: the labels of the root's children, e.g. ``NP VP`` (unary chains collapsed, the first
  label of a chain kept), the :data:`TOPCONST_CLASSES` most frequent sequences of the treebank as
  classes and ``OTHER`` for the rest (syntax);
- **BShift**: whether two adjacent words were swapped (``I``) or not (``O``) (word order).

SentLen and BShift need only the words (:data:`WORD_TASKS`), so they are also built from a dependency
treebank (UD English-EWT's CoNLL-U); TreeDepth and TopConst need the constituency trees.

The trees are the evaluation's gold trees (:func:`~syntaxformer.data.preprocess.load_gold_trees`:
punctuation removed, words normalised as the training corpora), so a model sees the words it was
trained on. Differences from Conneau et al.: their sentences come from the Toronto Book Corpus,
100k/10k/10k per task, balanced classes and TopConst under ``S`` only; ours are ptb-sample's 3,914
sentences (the majority class is reported beside every task), TopConst under any root label.

Splits: the sentences are shuffled with the seed and cut 80 / 10 / 10 % into train / dev / test,
the same cut for every task, so no sentence is in two splits; BShift's swap and position also come
from the seed. The task files are deterministic for a seed (:func:`write_task_files`).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from nltk import Tree

#: SentLen classes: (lowest, highest) number of words, inclusive.
SENTLEN_BINS = ((1, 10), (11, 15), (16, 20), (21, 25), (26, 30), (31, 10_000))
#: TreeDepth classes: (lowest, highest) depth, inclusive.
TREEDEPTH_BINS = ((1, 6), (7, 8), (9, 10), (11, 12), (13, 14), (15, 10_000))
#: TopConst: the most frequent root-children sequences kept as classes (Conneau et al.: 19 + other).
TOPCONST_CLASSES = 19
#: The split fractions (train, dev; test is the rest).
SPLIT = (0.8, 0.1)


@dataclass(frozen=True)
class ProbeItem:
    """One labelled sentence of a probing task.

    Attributes:
        index: the sentence's 0-based position in the treebank.
        split: ``train``, ``dev`` or ``test``.
        words: the words the encoder reads (for BShift, after the swap).
        label: the class, a string.
    """

    index: int
    split: str
    words: tuple[str, ...]
    label: str


def _bin(value: int, bins: Sequence[tuple[int, int]]) -> str:
    for low, high in bins:
        if low <= value <= high:
            return f"{low}-{high}" if high < 10_000 else f">={low}"
    raise ValueError(f"{value} is in no bin of {bins}")


def parse_tree_depth(tree: Tree) -> int:
    """Edges from the root to the deepest word (``(S (NP (DT the) (NN cat)) (VBD sat))``: 3)."""
    return tree.height() - 1


def top_constituents(tree: Tree) -> str:
    """The root's children's labels joined by spaces; a collapsed unary chain (``S+VP``) counts as
    its first label; a word directly under the root counts as its tag."""
    return " ".join(child.label().split("+")[0] if isinstance(child, Tree) else str(child) for child in tree)


def splits(n: int, seed: int) -> list[str]:
    """The split of each of ``n`` sentences: a permutation by ``seed`` cut 80 / 10 / 10 %."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    n_train, n_dev = int(round(SPLIT[0] * n)), int(round(SPLIT[1] * n))
    names = [""] * n
    for rank, index in enumerate(order):
        names[index] = "train" if rank < n_train else "dev" if rank < n_train + n_dev else "test"
    return names


def _sentlen(words, trees, parts, seed):
    return [ProbeItem(i, parts[i], tuple(w), _bin(len(w), SENTLEN_BINS)) for i, w in enumerate(words)]


def _treedepth(words, trees, parts, seed):
    return [
        ProbeItem(i, parts[i], tuple(w), _bin(parse_tree_depth(t), TREEDEPTH_BINS))
        for i, (w, t) in enumerate(zip(words, trees))
    ]


def _topconst(words, trees, parts, seed):
    counts = Counter(top_constituents(t) for i, t in enumerate(trees) if parts[i] == "train")
    kept = {label for label, _ in counts.most_common(TOPCONST_CLASSES)}
    return [
        ProbeItem(i, parts[i], tuple(w), top_constituents(t) if top_constituents(t) in kept else "OTHER")
        for i, (w, t) in enumerate(zip(words, trees))
    ]


def bigram_shift(words: Sequence[str], rng: random.Random) -> tuple[tuple[str, ...], str] | None:
    """BShift for one sentence: with probability 1/2 swap two adjacent different words at a position
    drawn uniformly (label ``I``), else keep the sentence (``O``). None for a sentence with no two
    adjacent different words (it cannot be inverted; the caller counts it)."""
    positions = [k for k in range(len(words) - 1) if words[k] != words[k + 1]]
    swap, k = rng.random() < 0.5, rng.choice(positions) if positions else None
    if k is None:
        return None
    if not swap:
        return tuple(words), "O"
    out = list(words)
    out[k], out[k + 1] = out[k + 1], out[k]
    return tuple(out), "I"


def _bshift(words, trees, parts, seed):
    items = []
    for i, w in enumerate(words):
        shifted = bigram_shift(w, random.Random(f"{seed}-bshift-{i}"))
        if shifted is not None:
            items.append(ProbeItem(i, parts[i], *shifted))
    return items


#: name -> builder(words, trees, splits, seed) -> items. A new task is one function and one line here.
TASKS: dict[str, Callable] = {"SentLen": _sentlen, "TreeDepth": _treedepth, "TopConst": _topconst, "BShift": _bshift}
#: The tasks built from the words alone (no constituency tree): those of a dependency treebank.
WORD_TASKS = ("SentLen", "BShift")


def build_tasks(
    trees: Sequence[Tree] | None,
    seed: int = 0,
    names: Sequence[str] | None = None,
    words: Sequence[Sequence[str]] | None = None,
) -> dict[str, list[ProbeItem]]:
    """The probing tasks of ``trees`` (gold trees with normalised words), or of the sentences ``words``.

    Args:
        trees: gold constituency trees, e.g. ``load_gold_trees("ptb-sample")``; None with ``words``.
        seed: the split and BShift's draws.
        names: tasks to build (default: all of :data:`TASKS` with trees, :data:`WORD_TASKS` without).
        words: the sentences (normalised words; default the trees' leaves), e.g. a dependency
            treebank's; without ``trees`` only :data:`WORD_TASKS` can be built.

    Returns:
        ``{task: [ProbeItem]}`` in treebank order; BShift leaves out sentences with no two adjacent
        different words (one-word sentences), so it may be shorter.

    Raises:
        KeyError: an unknown task name.
        ValueError: neither ``trees`` nor ``words``, or a task other than :data:`WORD_TASKS` without ``trees``.
    """
    if trees is None and words is None:
        raise ValueError("build_tasks needs trees or words")
    words = [t.leaves() for t in trees] if words is None else [list(w) for w in words]
    names = list(names or (TASKS if trees is not None else WORD_TASKS))
    needs_trees = [n for n in names if n in TASKS and n not in WORD_TASKS]
    if trees is None and needs_trees:
        raise ValueError(f"{needs_trees[0]} needs constituency trees (without them: {', '.join(WORD_TASKS)})")
    parts = splits(len(words), seed)
    return {name: TASKS[name](words, trees, parts, seed) for name in names}


def write_task_files(tasks: dict[str, list[ProbeItem]], folder: str | Path) -> list[Path]:
    """One ``TASK.tsv`` per task in ``folder`` (SentEval's layout: split, label, sentence; plus the
    treebank index first). Returns the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, items in tasks.items():
        path = folder / f"{name}.tsv"
        path.write_text("".join(f"{it.index}\t{it.split}\t{it.label}\t{' '.join(it.words)}\n" for it in items))
        paths.append(path)
    return paths
