"""Perplexity of a model folder with its objective's protocol (``syntaxformer perplexity``).

Masked LMs: the Tree Transformer protocol (every word masked in turn, one ``[MASK]`` per input);
causal LMs (ON-LSTM): next-word perplexity of ``[CLS] w_1 .. w_n [CLS]``; the perplexity is
exp(mean cross-entropy) and the report names the protocol; see
:mod:`syntaxformer.evaluation.perplexity`. Words are
normalised as the model's training corpus was (the preprocessing recorded in the folder's
``training.json``, else the default: lower-case, digits -> ``N``). A model whose prior reads a
dependency tree per sentence (``structural-position``) is scored with ``trees`` (``gold`` or
``induced:MODEL_DIR``, as ``train --trees``; :func:`syntaxformer.sources.corpus.load_tree_corpus`); a model
whose multi-granularity prior has ``tree`` heads with ``phrases`` (``gold``: the sentences and gold
constituency trees of the treebank ``corpus``; ``induced:MODEL_DIR``: the sentences of ``corpus`` parsed
by a trained Tree Transformer / StructFormer; as ``train --phrases``, :mod:`syntaxformer.data.phrases`),
each tree cut at the model's ``config.mgsa_tree_level``. Both may be given
(:func:`syntaxformer.sources.corpus.load_structured_corpus`). An induced structure is by default
induced from each masked copy (``induced_from="masked"``: the source model sees the ``[MASK]`` the scored
model sees, :func:`syntaxformer.sources.induced.masked_copy_structures`), so no structure
carries information about the masked word; ``induced_from="sentence"`` gives every copy the structure
of the unmasked sentence, as ``train --induced-from sentence`` trains (the number is then not a masked
LM's alone).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from syntaxformer.data.structure_inputs import sentence_structures
from syntaxformer.data.structure_source import StructureSource
from syntaxformer.errors import InputError
from syntaxformer.evaluation.perplexity import perplexity
from syntaxformer.parsing import load_model
from syntaxformer.sources.checks import check_model_phrases, check_model_trees, model_tree_level
from syntaxformer.sources.corpus import load_structured_corpus
from syntaxformer.sources.induced import masked_copy_structures

#: where an induced structure comes from (``evaluate_folder``'s ``induced_from``; ``perplexity --induced-from``)
INDUCED_FROM = ("masked", "sentence")


def evaluate_folder(
    folder: str | Path,
    corpus: str,
    batch_tokens: int = 4096,
    skip_long: bool = False,
    device: str | None = None,
    seed: int = 0,
    progress: bool = False,
    trees: str | StructureSource | None = None,
    phrases: str | StructureSource | None = None,
    induced_from: str = "masked",
) -> dict:
    """Load a model folder, read and normalise ``corpus`` as its training corpus was, score it.

    The folder is read by :func:`syntaxformer.parsing.load_model` (``device`` None = CUDA if
    available, else CPU).

    Args:
        folder: a model folder written by ``syntaxformer train``.
        corpus: a :func:`~syntaxformer.data.corpus.load_corpus` spec (raw text files or ptb-sample).
        batch_tokens: tokens (rows x padded length) per forward pass.
        skip_long: leave out (and count) sentences longer than the model accepts; else an error.
        device: torch device name, None = CUDA if available.
        seed: torch seed (the protocol is deterministic; recorded).
        progress: show a progress bar.
        trees: for a model that reads trees (and only for one; checked before reading the corpus):
            ``gold`` = sentences and trees from the dependency source ``corpus`` (e.g.
            ``ptb-sample:test``, a CoNLL-U or ``.dp`` file); ``induced:MODEL_DIR`` = the sentences of
            ``corpus``, their trees a trained StructFormer's MST heads.
        phrases: for a model with ``tree`` heads (and only for one; checked before reading the corpus):
            ``gold`` = sentences and gold constituency trees from the treebank ``corpus`` (ptb-sample,
            ``ptb-sample:dev`` / ``:test``, a ``.mrg`` / bracketed file); ``induced:MODEL_DIR`` = the
            sentences of ``corpus`` parsed by a trained Tree Transformer / StructFormer. Cut at the
            model's ``mgsa_tree_level`` (phrase labels are not used).
        induced_from: for an ``induced:`` source, ``"masked"`` (default: each masked copy is parsed, the
            source model seeing its ``[MASK]``) or ``"sentence"`` (the unmasked sentence's structure
            for every copy); gold structures are the sentence's either way.

    Returns:
        :func:`~syntaxformer.evaluation.perplexity.perplexity`'s dict (``protocol`` names it), plus ``model``,
        ``data``, ``trees`` and ``phrases`` (the values or None), ``tree_level`` (with ``phrases``),
        ``induced_from`` (with an induced source), ``model_type``, ``preset``, ``n_parameters``, ``seed``
        and ``minutes`` (scoring, the masked copies' parsing included).

    Raises:
        InputError: not a model folder, unreadable ``training.json``, bad device, bad corpus, a model
            that reads trees without ``trees`` or ``trees`` for one that reads none
            (:func:`~syntaxformer.sources.checks.check_model_trees`), likewise for ``phrases``
            (:func:`~syntaxformer.sources.checks.check_model_phrases`), a tree whose words do not match
            its sentence (naming it), an unknown ``induced_from``, or any of the protocol's.
    """
    if induced_from not in INDUCED_FROM:
        raise InputError(f"--induced-from must be {' or '.join(INDUCED_FROM)}, got {induced_from!r}")
    trees, phrases = StructureSource.parse(trees, "--trees"), StructureSource.parse(phrases, "--phrases")
    torch.manual_seed(seed)
    model, tokenizer, record, level = _load_checked(folder, device, trees, phrases)
    # the trainer's preprocessing (PRPN words); the same words and structures train --trees / --phrases reads
    sentences, heads, phrase_trees = load_structured_corpus(corpus, trees, phrases)
    induced = any(source is not None and source.is_induced for source in (trees, phrases))
    start = time.perf_counter()
    structures = _scored_structures(sentences, trees, phrases, heads, phrase_trees, level, induced, induced_from)
    result = _score(model, tokenizer, sentences, structures, batch_tokens, skip_long, progress)
    return {
        **_model_fields(folder, model, record),
        "data": corpus,
        **_structure_fields(trees, phrases, level, induced, induced_from),
        "seed": seed,
        **result,
        "minutes": (time.perf_counter() - start) / 60,
    }


def _load_checked(folder, device, trees: StructureSource | None, phrases: StructureSource | None):
    """The model folder loaded and checked against ``trees`` / ``phrases``: ``(model, tokenizer,
    training record, tree level)``, the level only with ``phrases`` (else None)."""
    model, tokenizer, record = load_model(folder, device)
    check_model_trees(model, trees)
    check_model_phrases(model, phrases)
    level = model_tree_level(model) if phrases is not None else None
    return model, tokenizer, record, level


def _scored_structures(
    sentences, trees, phrases, heads, phrase_trees, level: int | None, induced: bool, induced_from: str
):
    """The ``structures`` the protocol reads: for an induced source with ``induced_from="masked"``, per
    sentence one structure per masked copy (induced from that copy); else per sentence its own structure
    dict; None without trees and phrases."""
    if induced and induced_from == "masked":
        return masked_copy_structures(sentences, trees, phrases, heads, phrase_trees, level or 1)
    return sentence_structures(len(sentences), heads, phrase_trees, level or 1)


def _score(model, tokenizer, sentences, structures, batch_tokens: int, skip_long: bool, progress: bool) -> dict:
    """:func:`~syntaxformer.evaluation.perplexity.perplexity`'s dict for ``sentences`` (``structures``
    passed only when not None)."""
    return perplexity(
        model,
        tokenizer,
        sentences,
        batch_tokens=batch_tokens,
        too_long="skip" if skip_long else "error",
        progress=progress,
        **({} if structures is None else {"structures": structures}),
    )


def _model_fields(folder, model, record: dict) -> dict:
    """The report's model fields: ``model``, ``model_type``, ``preset``, ``n_parameters``."""
    return {
        "model": str(folder),
        "model_type": getattr(model.config, "model_type", None),
        "preset": record.get("preset"),
        "n_parameters": sum(p.numel() for p in model.parameters()),
    }


def _structure_fields(trees, phrases, level: int | None, induced: bool, induced_from: str) -> dict:
    """The report's structure fields: ``trees``, ``phrases``, ``tree_level`` (with ``phrases``) and
    ``induced_from`` (with an induced source)."""
    return {
        "trees": trees,
        "phrases": phrases,
        **({"tree_level": level} if phrases is not None else {}),
        **({"induced_from": induced_from} if induced else {}),
    }
