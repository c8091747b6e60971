"""Perplexity of a model folder with its objective's protocol (``syntaxformer perplexity``).

Masked LMs: the Tree Transformer protocol (every word masked in turn, one ``[MASK]`` per input);
causal LMs (ON-LSTM): next-word perplexity of ``[CLS] w_1 .. w_n [CLS]``; the perplexity is
exp(mean cross-entropy) and the report names the protocol; see
:mod:`syntaxformer.evaluation.perplexity`. Words are
normalised as the model's training corpus was (the preprocessing recorded in the folder's
``training.json``, else the default: lower-case, digits -> ``N``).
"""
from __future__ import annotations

import time
from pathlib import Path

import torch


def evaluate_folder(folder: str | Path, corpus: str, batch_tokens: int = 4096,
                    skip_long: bool = False, device: str | None = None, seed: int = 0,
                    progress: bool = False) -> dict:
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

    Returns:
        :func:`~syntaxformer.evaluation.perplexity.perplexity`'s dict (``protocol`` names it), plus ``model``,
        ``data``, ``model_type``, ``preset``, ``n_parameters``, ``seed`` and ``minutes``.

    Raises:
        InputError: not a model folder, unreadable ``training.json``, bad device, bad corpus, or
            any of the protocol's.
    """
    from syntaxformer.data.corpus import load_corpus
    from syntaxformer.evaluation.perplexity import perplexity
    from syntaxformer.parsing import load_model
    torch.manual_seed(seed)
    model, tokenizer, record = load_model(folder, device)
    sentences = load_corpus(corpus)  # the trainer's preprocessing (PRPN words, recorded in training.json)
    start = time.perf_counter()
    result = perplexity(model, tokenizer, sentences, batch_tokens=batch_tokens,
                        too_long="skip" if skip_long else "error", progress=progress)
    return {
        "model": str(folder),
        "model_type": getattr(model.config, "model_type", None),
        "preset": record.get("preset"),
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "data": corpus,
        "seed": seed,
        **result,
        "minutes": (time.perf_counter() - start) / 60,
    }
