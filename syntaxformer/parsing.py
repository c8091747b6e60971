"""Parsing with a trained model: a model folder and word lists in, trees (and dependencies) out.

The one path from a model to structures, used by ``syntaxformer parse``, ``induce``, ``show`` and the
evaluation recipes:

1. :func:`load_model` reads a folder written by ``syntaxformer train`` (``save_pretrained``
   safetensors + tokenizer + ``training.json``) through the Hugging Face Auto classes;
2. :func:`model_structures` runs the model once per batch (no masking: the unmasked sentence, as the
   Tree Transformer paper parses) and returns, per sentence, what the model induces over **words**:
   link probabilities ``[L, n-1]`` (Tree Transformer; word-piece links turned into word links by
   :func:`syntaxformer.data.tokenization.word_links`), or syntactic distances ``[n-1]``, heights
   ``[n]`` and the dependency distribution ``[n, n+1]`` (StructFormer);
3. :func:`decode` turns them into spans / trees with the decoders of :mod:`syntaxformer.decoding`.

Words are normalised with :func:`syntaxformer.data.preprocess.normalise_word` (lower-case, a word
with a digit becomes ``N``: the rule the training corpora went through) before tokenisation; the
trees returned keep the words as given.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from nltk import Tree

from syntaxformer.data.preprocess import normalise_word
from syntaxformer.data.tokenization import encode, word_links
from syntaxformer.decoding.dependency import argmax_heads, chu_liu_edmonds, head_scores
from syntaxformer.decoding.spans import Span, spans_to_tree, split_by_distance
from syntaxformer.decoding.tree_transformer import algorithm1, resolve_min_layer, single_layer
from syntaxformer.errors import InputError
from syntaxformer.training.batching import pad_batch

logger = logging.getLogger(__name__)


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """The torch device a ``--device`` value names; ``None`` = CUDA if available, else CPU.

    Raises:
        InputError: not a device name (e.g. ``"gpu"``), or a CUDA device this machine lacks.
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise InputError(f"--device {device!r} is not a torch device: {str(e).splitlines()[0]}") from None
    if resolved.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (resolved.index is not None and resolved.index >= count):
            raise InputError(f"--device {device!r}: this machine has {count} CUDA device(s)")
    return resolved


def read_training_record(folder: str | Path) -> dict:
    """The folder's ``training.json`` (written by the trainer) parsed, or ``{}`` when there is none.

    Raises:
        InputError: the file exists but is not readable JSON (names the file).
    """
    path = Path(folder) / "training.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"unreadable training record: {e}", path=path) from None


def load_model(folder: str | Path, device: str | torch.device | None = "cpu",
               attn_implementation: str | None = None):
    """Load a model folder written by ``syntaxformer train`` (or ``save_pretrained``).

    The one model loader of the package (``parse``, ``induce``, ``show``, ``perplexity``, ``compare``).

    Args:
        folder: holds ``config.json``, ``model.safetensors``, the tokenizer files and, when written
            by the trainer, ``training.json``.
        device: where to put the model (evaluation mode); None = CUDA if available, else CPU
            (:func:`resolve_device`).
        attn_implementation: override the saved attention backend ("eager" or "sdpa").

    Returns:
        ``(model, tokenizer, info)``: ``info`` is the parsed ``training.json`` (``{}`` if absent,
        :func:`read_training_record`).

    Raises:
        InputError: the folder does not exist or holds no model/tokenizer; an unreadable
            ``training.json``; a bad or absent device.
    """
    import syntaxformer  # noqa: F401  (registers the models with the Auto classes)
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise InputError("not a model folder (no config.json)", path=folder)
    device = resolve_device(device)
    info = read_training_record(folder)
    kwargs = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    try:
        model = AutoModelForMaskedLM.from_pretrained(folder, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError, KeyError) as e:
        raise InputError(f"cannot load model or tokenizer: {str(e).splitlines()[0]}", path=folder) from e
    model.to(device).eval()
    return model, tokenizer, info


def model_kind(model) -> str:
    """``"tree-transformer"`` or ``"structformer"``, from the model's class.

    Raises:
        InputError: any other model (e.g. a BERT folder given as ``--model``): it induces no trees.
    """
    name = type(model).__name__
    if name.startswith("TreeTransformer"):
        return "tree-transformer"
    if name.startswith("StructFormer"):
        return "structformer"
    raise InputError(f"cannot parse with a {name}: expected a Tree Transformer or StructFormer")


@dataclass
class Structures:
    """What a model induces over the ``n`` words of one sentence (all numpy, float64).

    Attributes:
        words: the sentence's words, as given.
        link_probs: ``[L, n-1]`` Tree Transformer link probabilities a^l_k (layer 0 lowest), or None.
        distances: ``[n-1]`` StructFormer syntactic distances of the word gaps, or None.
        heights: ``[n]`` StructFormer syntactic heights, or None.
        dependency_probs: ``[n, n+1]`` StructFormer p(head | dependent): row i = dependent word i,
            column 0 = the root, column j = word j-1 (probabilities); or None.
    """

    words: list[str]
    link_probs: np.ndarray | None = None
    distances: np.ndarray | None = None
    heights: np.ndarray | None = None
    dependency_probs: np.ndarray | None = None


def _device(model) -> torch.device:
    return next(model.parameters()).device


@torch.inference_mode()
def model_structures(model, tokenizer, sentences: Sequence[Sequence[str]], batch_size: int = 64,
                     normalise: bool = True) -> list[Structures]:
    """Run ``model`` on ``sentences`` (unmasked) and collect its structures per sentence.

    Sentences are sorted by length into batches (little padding) and returned in input order.

    Args:
        model: a Tree Transformer or StructFormer masked LM (evaluation mode).
        tokenizer: its tokenizer (one token per word, or WordPiece for the Tree Transformer).
        sentences: lists of words (at least one word each).
        batch_size: sentences per forward pass.
        normalise: apply :func:`normalise_word` before tokenisation (the training corpora's rule).

    Returns:
        One :class:`Structures` per sentence, in input order.

    Raises:
        InputError: an empty sentence (naming its 1-based number), word pieces with StructFormer, or
            a batch size below 1.
    """
    kind = model_kind(model)
    if kind == "tree-transformer" and getattr(model.config, "prior", "constituent") == "none":
        raise InputError("this Tree Transformer has prior='none' (a plain Transformer): it computes "
                         "no link probabilities, so it induces no trees")
    if batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}")
    for i, words in enumerate(sentences):
        if len(words) == 0:
            raise InputError("empty sentence: nothing to parse", sentence=i + 1)
    if torch.device(_device(model)).type == "cpu":
        torch.set_flush_denormal(True)  # DESIGN.md §5: products of probabilities underflow on CPU
    inputs = [[normalise_word(w) for w in words] if normalise else list(words) for words in sentences]
    ids, word_ids = encode(tokenizer, inputs)
    pad = tokenizer.pad_token_id
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    results: list[Structures | None] = [None] * len(ids)
    device = _device(model)
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        input_ids, attention_mask = pad_batch([ids[i] for i in batch], pad)  # (B, N), (B, N)
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        if kind == "tree-transformer":
            out = model(input_ids=input_ids, attention_mask=attention_mask)
            links = torch.stack(out.link_probs, dim=1).double().cpu()  # (B, L, N-1)
            for row, i in enumerate(batch):
                t = len(ids[i])
                a = word_links(links[row, :, :t - 1], word_ids[i])  # (L, n-1)
                results[i] = Structures(words=list(sentences[i]), link_probs=a.numpy())
        else:
            out = model(input_ids=input_ids, attention_mask=attention_mask, output_dependency=True)
            for row, i in enumerate(batch):
                t = len(ids[i])
                if any(w is None for w in word_ids[i]) or len(set(word_ids[i])) != t:
                    raise InputError("StructFormer parses one token per word; this tokenizer splits "
                                     "words or adds special tokens", sentence=i + 1)
                dep = out.dependency_probs[row, :t, :t].double().cpu().numpy()  # (n, n) p(j | i)
                root = out.root_probs[row, :t].double().cpu().numpy()  # (n,)
                results[i] = Structures(
                    words=list(sentences[i]),
                    distances=out.distances[row, :t - 1].double().cpu().numpy(),
                    heights=out.heights[row, :t].double().cpu().numpy(),
                    dependency_probs=np.concatenate([root[:, None], dep], axis=1))
    return results  # type: ignore[return-value]


@dataclass(frozen=True)
class DecoderOptions:
    """How link probabilities / distances become trees (``syntaxformer parse`` flags).

    Attributes:
        layer: None = Algorithm 1 over all layers (Tree Transformer paper, Algorithm 1); an int = the
            single-layer top-down greedy split of that layer (0-based; paper Figure 4(b)).
        threshold: Algorithm 1's break threshold (paper: 0.8).
        min_layer: Algorithm 1's minimum layer (0-based), None = the decoder's default.
        descend_threshold: None = the paper; 0.7 = the public code's extra descend rule.
        dependency: "mst" (Chu-Liu-Edmonds, a well-formed tree) or "argmax" (the public StructFormer
            code's rule; need not be a tree).
    """

    layer: int | None = None
    threshold: float = 0.8
    min_layer: int | None = None
    descend_threshold: float | None = None
    dependency: str = "mst"


def min_layer_of(options: DecoderOptions, num_layers: int) -> int:
    """The 0-based minimum layer Algorithm 1 uses with ``options`` on a model of ``num_layers`` layers
    (:func:`~syntaxformer.decoding.tree_transformer.resolve_min_layer`).

    Raises:
        InputError: ``options.min_layer`` outside ``0 .. num_layers - 1`` (the ``--min-layer`` flag).
    """
    try:
        return resolve_min_layer(num_layers, options.min_layer)
    except ValueError as e:
        raise InputError(f"--min-layer {options.min_layer} out of range: {e}") from None


def decode_spans(s: Structures, options: DecoderOptions = DecoderOptions()) -> set[Span]:
    """Constituency spans (half-open, whole sentence included) of one sentence's structures."""
    if s.link_probs is not None:
        if options.layer is not None:
            if not -s.link_probs.shape[0] <= options.layer < s.link_probs.shape[0]:
                raise InputError(f"--layer {options.layer} out of range: the model has "
                                 f"{s.link_probs.shape[0]} layers (0-based)")
            return single_layer(s.link_probs[options.layer])
        min_layer_of(options, s.link_probs.shape[0])  # an InputError naming the flag
        return algorithm1(s.link_probs, threshold=options.threshold, min_layer=options.min_layer,
                          descend_threshold=options.descend_threshold)
    given = [flag for flag, value in (("--layer", options.layer), ("--min-layer", options.min_layer),
                                      ("--descend-rule official", options.descend_threshold))
             if value is not None]
    if given:  # Tree Transformer decoder options: never ignore them silently
        raise InputError(f"{', '.join(given)}: Tree Transformer decoder option(s), but this model "
                         "gives syntactic distances (StructFormer: top-down split at the largest)")
    assert s.distances is not None
    return split_by_distance(list(s.distances))


def decode_heads(s: Structures, options: DecoderOptions = DecoderOptions()) -> list[int] | None:
    """Dependency heads (1-based, 0 = root) of one sentence, or None for a constituency-only model."""
    if s.dependency_probs is None:
        return None
    probs = s.dependency_probs  # (n, n+1): [dependent, head], head 0 = root
    if options.dependency == "argmax":
        return argmax_heads(probs[:, 1:], s.heights)
    if options.dependency != "mst":
        raise InputError(f"unknown dependency decoder {options.dependency!r}: expected mst or argmax")
    return chu_liu_edmonds(head_scores(probs[:, 1:], root_probs=probs[:, 0]))


def decode(structures: Sequence[Structures], options: DecoderOptions = DecoderOptions()
           ) -> tuple[list[Tree], list[list[int]] | None]:
    """Trees (and dependency heads, for StructFormer) for many sentences.

    Returns:
        ``(trees, heads)``: one ``nltk.Tree`` per sentence (leaves = the words; internal nodes ``S``
        for the root and ``X`` below); ``heads`` is None for the Tree Transformer.
    """
    trees = [spans_to_tree(s.words, decode_spans(s, options)) for s in structures]
    heads = [decode_heads(s, options) for s in structures]
    return trees, (None if all(h is None for h in heads) else heads)  # type: ignore[return-value]
