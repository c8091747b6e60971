"""Probing a frozen encoder's layers (``syntaxformer probe``; Conneau et al., ACL 2018; DESIGN.md §6).

:func:`run_probe` builds the probing tasks from a gold treebank (:mod:`syntaxformer.probing.tasks`):
a constituency treebank (ptb-sample, a ``.mrg`` file) gives all four tasks, a dependency treebank (a
CoNLL-U file such as UD English-EWT's) the tasks built from the words alone, SentLen and BShift;
mean-pools every layer's outputs of the trained model and of the same architecture untrained (same
config, initialised from the seed), fits a logistic-regression and a one-hidden-layer MLP probe per
task, layer and encoder (L2 chosen on dev, accuracy on test), beside the majority class and a
bag-of-words probe, and writes ``OUT/report.json``, ``OUT/probe.{png,svg}`` and ``OUT/tasks/*.tsv``.

**Trees** (``trees``, ``probe --trees``): a model whose prior reads a dependency tree per sentence
(``structural-position``) is probed with one, and its untrained twin with the same trees.
``gold``: ptb-sample's gold dependency trees (:func:`syntaxformer.data.trees.gold_tree_sentences` of the
treebank's own name, ``ptb-sample`` / ``ptb-sample:dev`` / ``:test``), aligned sentence by sentence with
the constituency trees the tasks are built from; the words must be equal after preprocessing
(:func:`gold_dependency_heads`); with a CoNLL-U treebank, the file's own trees. A BShift item whose
two words were swapped keeps its sentence's tree by position (a swapped sentence has no gold tree, and a
tree that moved with the words would itself reveal the swap): the trees of ``O`` and ``I`` items of a
sentence are the same. ``induced:MODEL_DIR``: a trained
StructFormer's maximum-spanning-tree heads of each sentence as the encoder reads it (BShift: after the
swap; :func:`syntaxformer.sources.induced.induced_heads`).

**Phrases** (``phrases``, ``probe --phrases``): a model whose multi-granularity prior has ``tree`` heads
is probed with a phrase partition per sentence (and its untrained twin with the same), cut at the model's
``mgsa_tree_level`` (:func:`syntaxformer.data.phrases.cut_tree`). ``gold``: the probed sentences' own
gold constituency trees (those the tasks are built from); a BShift item keeps its unswapped sentence's
partition by position, the rule of ``--trees gold``. ``induced:MODEL_DIR``: the trees a trained Tree
Transformer / StructFormer induces for each sentence as the encoder reads it (BShift: after the swap;
:func:`syntaxformer.sources.induced.induced_phrase_trees`). Each item's structure is a dict of per-word
lists (``{"heads": ..., "phrase_ids": ...}``, :mod:`syntaxformer.data.structure_inputs`).
"""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Sequence

import torch

from syntaxformer.data import load_gold_trees
from syntaxformer.data.dependency import is_conllu_file
from syntaxformer.data.embedded import ptb_sample_part
from syntaxformer.data.phrases import cut_tree, word_phrase_ids
from syntaxformer.data.structure_source import StructureSource
from syntaxformer.data.trees import gold_tree_sentences
from syntaxformer.errors import InputError
from syntaxformer.evaluation.report import to_json
from syntaxformer.figures import save_figure
from syntaxformer.figures.probing import plot_probe
from syntaxformer.parsing import load_model
from syntaxformer.pretrained import model_folder
from syntaxformer.probing.classifiers import CLASSIFIERS, bag_of_words, majority, probe
from syntaxformer.probing.features import sentence_vectors
from syntaxformer.probing.tasks import TASKS, WORD_TASKS, build_tasks, write_task_files
from syntaxformer.sources.checks import check_model_phrases, check_model_trees, model_tree_level
from syntaxformer.sources.induced import induced_heads, induced_phrase_trees

logger = logging.getLogger(__name__)

PROTOCOL = (
    "probing (Conneau et al. 2018): frozen encoder, mean over a sentence's tokens of each layer's "
    "output, standardised; logistic regression and a 50-unit MLP, L2 strength chosen on dev; "
    "accuracy (%) on test; splits 80/10/10 of the treebank's sentences by seed"
)


def _untrained_twin(model, seed: int):
    """The same architecture and config, freshly initialised from ``seed`` (the control encoder)."""
    torch.manual_seed(seed)
    twin = type(model)(copy.deepcopy(model.config))
    return twin.to(next(model.parameters()).device).eval()


def _vectors(model, tokenizer, tasks, batch_size, structures=None):
    """Per task, every layer's sentence vectors; the tasks sharing their sentences (and structures)
    share vectors. ``structures``: per task, per item, its structure dict (per-word ``heads`` and / or
    ``phrase_ids``), or None without trees and phrases."""
    cache, out, counts = {}, {}, {}
    for name, items in tasks.items():
        task_structures = None if structures is None else structures[name]
        frozen = (
            None
            if task_structures is None
            else tuple(tuple(sorted((k, tuple(v)) for k, v in st.items())) for st in task_structures)
        )
        key = (tuple(it.words for it in items), frozen)
        if key not in cache:
            cache[key] = sentence_vectors(
                model, tokenizer, [list(w) for w in key[0]], batch_size, structures=task_structures
            )
        out[name], counts[name] = cache[key]
    return out, counts


def gold_dependency_heads(treebank: str, gold_trees) -> list[list[int]]:
    """Per constituency tree of ``gold_trees`` (read from ``treebank``, possibly cut to its first N),
    the heads (1-based, 0 = root) of the same sentence's gold dependency tree.

    The dependency trees are ``treebank``'s own (:func:`~syntaxformer.data.trees.gold_tree_sentences`:
    ptb-sample's dependency files, punctuation removed as the constituency preprocessing removes it),
    matched by order; the words of each pair must be equal.

    Raises:
        InputError (one line): a treebank other than ptb-sample (no dependency trees known for it); a
            sentence without a dependency tree, or whose words differ (naming the treebank and the
            1-based sentence, with the first differing word).
    """
    if ptb_sample_part(treebank) is None:
        raise InputError(
            f"--trees gold: gold dependency trees are known for ptb-sample only, not {treebank} "
            "(use --trees induced:MODEL_DIR)"
        )
    return match_dependency_trees(treebank, [t.leaves() for t in gold_trees], *gold_tree_sentences(treebank))


def match_dependency_trees(source: str, words, dep_words, dep_heads) -> list[list[int]]:
    """``dep_heads`` for the sentences ``words`` (normalised), after checking that sentence i of the
    dependency ``source`` has the words of sentence i (:func:`gold_dependency_heads`' rule)."""
    for i, sentence in enumerate(words):
        if i >= len(dep_words):
            raise InputError(
                f"--trees gold: no dependency tree for this sentence ({len(dep_words)} trees)",
                path=source,
                sentence=i + 1,
            )
        if list(sentence) != list(dep_words[i]):
            k = next(
                (k for k, (a, b) in enumerate(zip(sentence, dep_words[i])) if a != b),
                min(len(sentence), len(dep_words[i])),
            )
            raise InputError(
                f"--trees gold: the dependency tree's words differ from the constituency tree's "
                f"({len(dep_words[i])} vs {len(sentence)} words; word {k + 1}: "
                f"{' '.join(dep_words[i][k : k + 1]) or '(none)'!r} vs "
                f"{' '.join(sentence[k : k + 1]) or '(none)'!r})",
                path=source,
                sentence=i + 1,
            )
    return [list(h) for h in dep_heads[: len(words)]]


def load_probe_treebank(
    treebank: str,
    tasks: Sequence[str] | None,
    trees: str | StructureSource | None,
    phrases: str | StructureSource | None,
    max_sentences: int | None,
) -> tuple[list | None, list[list[str]], list[list[int]] | None]:
    """The probed sentences of ``treebank``: its constituency trees (None for a dependency treebank),
    its sentences (normalised words) and, with ``trees == "gold"``, their gold dependency heads (1-based).

    A constituency treebank's trees are preprocessed as the evaluation's
    (:func:`~syntaxformer.data.preprocess.load_gold_trees`), its heads ptb-sample's
    (:func:`gold_dependency_heads`). A CoNLL-U file (:func:`~syntaxformer.data.dependency.is_conllu_file`:
    by suffix, else by its first token line) gives its own sentences and heads, punctuation
    removed (:func:`~syntaxformer.data.trees.gold_tree_sentences`); it has no constituency tree, so it
    gives only :data:`~syntaxformer.probing.tasks.WORD_TASKS` and no ``--phrases gold``.

    Raises:
        InputError: a bad ``trees`` / ``phrases`` value (:meth:`StructureSource.parse`); as the readers; a
            constituency task or ``phrases == "gold"`` with a dependency treebank.
    """
    trees, phrases = StructureSource.parse(trees, "--trees"), StructureSource.parse(phrases, "--phrases")
    gold_heads = trees is not None and trees.is_gold
    if not is_conllu_file(treebank):
        gold = load_gold_trees(treebank)[:max_sentences]
        return gold, [t.leaves() for t in gold], gold_dependency_heads(treebank, gold) if gold_heads else None
    needs_trees = [name for name in (tasks or []) if name not in WORD_TASKS]
    if needs_trees:
        raise InputError(
            f"{needs_trees[0]} needs constituency trees, which the dependency treebank has not: "
            f"probe it with --task {' --task '.join(WORD_TASKS)}",
            path=treebank,
        )
    if phrases is not None and phrases.is_gold:
        raise InputError(
            "--phrases gold needs constituency trees, which the dependency treebank has not "
            "(use --phrases induced:MODEL_DIR)",
            path=treebank,
        )
    words, heads = gold_tree_sentences(treebank)
    return None, words[:max_sentences], heads[:max_sentences] if gold_heads else None


def _task_heads(trees: StructureSource | None, built, gold_heads) -> dict | None:
    """Per task, per item, its per-word heads (module docstring's rule), or None without ``trees``."""
    if trees is None:
        return None
    if trees.is_gold:
        return {name: [gold_heads[it.index] for it in items] for name, items in built.items()}
    distinct = list(dict.fromkeys(it.words for items in built.values() for it in items))
    parsed = dict(zip(distinct, induced_heads(trees.model_dir, [list(w) for w in distinct])))
    return {name: [parsed[it.words] for it in items] for name, items in built.items()}


def _task_phrases(phrases: StructureSource | None, built, gold, level: int) -> dict | None:
    """Per task, per item, its per-word phrase ids cut at ``level`` (module docstring's rule), or None
    without ``phrases``. ``gold``: the treebank's trees the tasks index (``item.index``)."""
    if phrases is None:
        return None
    if phrases.is_gold:
        return {
            name: [word_phrase_ids(cut_tree(gold[it.index], level)) for it in items] for name, items in built.items()
        }
    distinct = list(dict.fromkeys(it.words for items in built.values() for it in items))
    trees = induced_phrase_trees(phrases.model_dir, [list(w) for w in distinct])
    parsed = {words: word_phrase_ids(cut_tree(tree, level)) for words, tree in zip(distinct, trees)}
    return {name: [parsed[it.words] for it in items] for name, items in built.items()}


def _task_structures(heads: dict | None, phrase_ids: dict | None) -> dict | None:
    """Per task, per item, its structure dict (``"heads"`` and / or ``"phrase_ids"``), or None with neither."""
    if heads is None and phrase_ids is None:
        return None
    names = (heads or phrase_ids).keys()
    return {
        name: [
            {
                **({} if heads is None else {"heads": heads[name][i]}),
                **({} if phrase_ids is None else {"phrase_ids": phrase_ids[name][i]}),
            }
            for i in range(len((heads or phrase_ids)[name]))
        ]
        for name in names
    }


def _probe_layers(layers, labels, split, classifiers, seed) -> list[dict]:
    return [{kind: probe(features, labels, split, kind, seed) for kind in classifiers} for features in layers]


def _best(rows: list[dict], kind: str) -> dict:
    """The layer whose probe is best on dev, with its test accuracy (chosen on dev, reported on test)."""
    layer = max(range(len(rows)), key=lambda i: rows[i][kind]["dev"])
    return {"layer": layer, "dev": rows[layer][kind]["dev"], "test": rows[layer][kind]["test"]}


def _task_report(name, items, trained, untrained, counts, classifiers, seed) -> dict:
    labels, split = [it.label for it in items], [it.split for it in items]
    bow = bag_of_words([it.words for it in items], split)
    layers = {
        "trained": _probe_layers(trained, labels, split, classifiers, seed),
        "untrained": _probe_layers(untrained, labels, split, classifiers, seed),
    }
    return {
        "n_sentences": {part: split.count(part) for part in ("train", "dev", "test")},
        "classes": sorted(set(labels)),
        "majority": majority(labels, split),
        "bag_of_words": {kind: probe(bow, labels, split, kind, seed) for kind in classifiers},
        "layers": layers,
        "best_layer": {enc: {kind: _best(rows, kind) for kind in classifiers} for enc, rows in layers.items()},
        "encoding": counts,
    }


def _check_probe_options(tasks: Sequence[str] | None, classifiers: Sequence[str], max_sentences: int | None) -> None:
    """Check :func:`run_probe`'s task names, classifier names and ``max_sentences``.

    Raises:
        InputError: an unknown task or classifier; fewer than 10 sentences.
    """
    unknown = [t for t in (tasks or []) if t not in TASKS] + [c for c in classifiers if c not in CLASSIFIERS]
    if unknown:
        raise InputError(
            f"unknown task or classifier {unknown[0]!r}: tasks {sorted(TASKS)}, classifiers {list(CLASSIFIERS)}"
        )
    if max_sentences is not None and max_sentences < 10:
        raise InputError(f"--max-sentences must be at least 10 (three splits), got {max_sentences}")


def _load_encoder(model, device, trees: StructureSource | None, phrases: StructureSource | None):
    """The probed model loaded and checked against ``trees`` / ``phrases``: ``(folder, model, tokenizer,
    tree level)``, the level only with ``phrases`` (else None)."""
    folder = model_folder(model)
    trained, tokenizer, _ = load_model(folder, device=device)
    check_model_trees(trained, trees)
    check_model_phrases(trained, phrases)
    level = model_tree_level(trained) if phrases is not None else None
    return folder, trained, tokenizer, level


def _encode_tasks(trained, tokenizer, built, batch_size: int, structures, seed: int):
    """Every task's sentence vectors from the trained encoder and from its untrained twin (initialised
    from ``seed``): ``(vectors, control vectors, encoding counts)``, per task (:func:`_vectors`)."""
    untrained = _untrained_twin(trained, seed)
    vectors, counts = _vectors(trained, tokenizer, built, batch_size, structures)
    control, _ = _vectors(untrained, tokenizer, built, batch_size, structures)
    return vectors, control, counts


def _report_head(treebank, n_sentences: int, trees, phrases, level, folder, trained, seed: int, classifiers) -> dict:
    """The report's fields before the probes: data, protocol, structures, model, seed, classifiers, and
    an empty ``tasks`` dict."""
    return {
        "data": {"treebank": treebank, "n_sentences": n_sentences},
        "protocol": PROTOCOL,
        "trees": trees,
        "phrases": phrases,
        **({"tree_level": level} if phrases is not None else {}),
        "model": str(folder),
        "model_type": trained.config.model_type,
        "seed": seed,
        "classifiers": list(classifiers),
        "tasks": {},
    }


def run_probe(
    out: str | Path,
    model: str | Path | None = None,
    treebank: str = "ptb-sample",
    tasks: Sequence[str] | None = None,
    classifiers: Sequence[str] = ("logreg", "mlp"),
    seed: int = 0,
    batch_size: int = 64,
    device: str | None = "cpu",
    max_sentences: int | None = None,
    trees: str | StructureSource | None = None,
    phrases: str | StructureSource | None = None,
) -> dict:
    """Probe every layer of ``model`` on the tasks of ``treebank``; write the report and the figure.

    Args:
        out: output folder (``report.json``, ``probe.{png,svg}``, ``tasks/TASK.tsv``).
        model: a model folder; None = the pretrained Tree Transformer shipped in the package.
        treebank: gold constituency trees (``ptb-sample``, ``ptb-sample:dev``, or a .mrg path), or a
            dependency treebank (a CoNLL-U file: SentLen and BShift; :func:`load_probe_treebank`).
        tasks: task names (default all: SentLen, TreeDepth, TopConst, BShift; SentLen and BShift for a
            dependency treebank).
        classifiers: ``logreg`` and/or ``mlp``.
        seed: splits, BShift's draws, the untrained twin's initialisation and the MLP's.
        batch_size: sentences per forward pass.
        device: where the encoder runs.
        max_sentences: use only the treebank's first N sentences (None = all).
        trees: for a model that reads trees (and only for one; checked before any work): ``gold`` or
            ``induced:MODEL_DIR`` (module docstring; ``gold`` with a CoNLL-U treebank: its own heads);
            the untrained twin gets the same trees.
        phrases: for a model with multi-granularity ``tree`` heads (and only for one; checked before any
            work): ``gold`` or ``induced:MODEL_DIR`` (module docstring); the twin gets the same phrases.

    Returns:
        The report: data, protocol, model, seed, ``trees`` and ``phrases`` (the values or None),
        ``tree_level`` (with ``phrases``), and per task the split sizes, classes, majority
        class, bag-of-words probe, per-layer probes of the trained and untrained encoder, and the
        best layer on dev with its test accuracy (accuracies in 0-100).

    Raises:
        InputError: unreadable trees, an unknown task or classifier, a model without hidden states, a
            model that reads trees without ``trees`` or ``trees`` for one that reads none (likewise
            ``phrases``), induced trees whose words do not match (naming the sentence), gold
            dependency trees that do not match the treebank's sentences (naming the sentence), a
            constituency task or ``--phrases gold`` with a dependency treebank.
    """

    start = time.monotonic()
    _check_probe_options(tasks, classifiers, max_sentences)
    trees, phrases = StructureSource.parse(trees, "--trees"), StructureSource.parse(phrases, "--phrases")
    folder, trained, tokenizer, level = _load_encoder(model, device, trees, phrases)
    gold, words, gold_heads = load_probe_treebank(treebank, tasks, trees, phrases, max_sentences)
    built = build_tasks(gold, seed, tasks, words=words)
    out = Path(out)
    write_task_files(built, out / "tasks")
    structures = _task_structures(_task_heads(trees, built, gold_heads), _task_phrases(phrases, built, gold, level))
    vectors, control, counts = _encode_tasks(trained, tokenizer, built, batch_size, structures, seed)
    report = _report_head(treebank, len(words), trees, phrases, level, folder, trained, seed, classifiers)
    for name, items in built.items():
        logger.info("probing %s (%d sentences)", name, len(items))
        report["tasks"][name] = _task_report(name, items, vectors[name], control[name], counts[name], classifiers, seed)
    report["minutes"] = round((time.monotonic() - start) / 60, 2)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(to_json(report) + "\n")
    save_figure(plot_probe(report), out / "probe")
    return report
