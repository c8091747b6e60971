"""Frozen sentence vectors for probing: the mean over a sentence's tokens of each layer's output
(Conneau et al., ACL 2018, mean pooling; DESIGN.md §6), and the bag-of-words control."""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import torch

from syntaxformer.data.batching import pad_batch
from syntaxformer.data.structure_inputs import pad_structures, token_structures
from syntaxformer.data.tokenization import encode
from syntaxformer.errors import InputError
from syntaxformer.models import capabilities_of

logger = logging.getLogger(__name__)


def _hidden_states(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, structure: dict | None = None
) -> tuple[torch.Tensor, ...]:
    """Every layer's ``(B, N, d)`` output of a registry model (the embeddings first where the model
    returns them), through its forward's ``output_hidden_states`` (a declared capability,
    :func:`~syntaxformer.models.capabilities_of`); ``structure`` (``{"heads": (B, N),
    "phrase_ids": (B, N)}``, token level, either or both) goes to the model as ``structure_inputs``."""
    if not capabilities_of(model).output_hidden_states:
        raise InputError(
            f"{type(model).__name__} does not return its layers' outputs (output_hidden_states): it cannot be probed"
        )
    extra = {} if structure is None else {"structure_inputs": structure}
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, **extra)
    return tuple(out.hidden_states)


@torch.no_grad()
def sentence_vectors(
    model, tokenizer, sentences: Sequence[Sequence[str]], batch_size: int = 64, structures: Sequence[dict] | None = None
) -> tuple[list[np.ndarray], dict]:
    """Mean-pooled sentence vectors of every layer of a frozen ``model``.

    Each sentence is encoded by the model's tokenizer (special tokens included, a word unknown to
    the vocabulary becomes ``[UNK]``, a split word several pieces); its vector at layer l is the
    mean of layer l's outputs over its tokens (padding excluded).

    Args:
        model: a registry model in evaluation mode whose forward takes ``output_hidden_states``.
        tokenizer: its tokenizer.
        sentences: words of each sentence (normalised as the model's training text).
        batch_size: sentences per forward pass.
        structures: per sentence, its structure ``{"heads": [...], "phrase_ids": [...]}`` (per word, either
            or both; :mod:`syntaxformer.data.structure_inputs`), for a model that reads a dependency tree
            (``structural-position``) or phrases (multi-granularity ``tree`` heads): mapped onto its tokens,
            padded (heads -100, phrase ids -1), given as ``structure_inputs``. None: no ``structure_inputs``.

    Returns:
        ``(layers, counts)``: ``layers[l]`` is an ``(S, d_l)`` float32 array (layer 0 = the embeddings
        where the model returns them); ``counts`` has ``sentences``, ``words``, ``tokens`` and
        ``unknown_words`` (words encoded as ``[UNK]``, counted, never dropped).

    Raises:
        InputError: a model with no hidden states, an empty sentence or a bad word, a structure that is not
            one entry per word (naming the sentence).
    """
    ids, word_ids = encode(tokenizer, sentences)
    token_structure = (
        None if structures is None else token_structures(structures, word_ids, [len(w) for w in sentences])
    )
    unk = tokenizer.unk_token_id
    counts = {
        "sentences": len(ids),
        "words": sum(map(len, sentences)),
        "tokens": sum(map(len, ids)),
        "unknown_words": sum(
            len({w for t, w in zip(s, ws) if t == unk and w is not None}) for s, ws in zip(ids, word_ids)
        ),
    }
    device = next(model.parameters()).device
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    pooled: list[list[np.ndarray]] | None = None
    rows: list[int] = []
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        input_ids, mask = pad_batch([ids[i] for i in batch], tokenizer.pad_token_id)  # (B, N), (B, N)
        structure = (
            None
            if token_structure is None
            else {  # (B, N) each
                k: v.to(device)
                for k, v in pad_structures([token_structure[i] for i in batch], input_ids.shape[1]).items()
            }
        )
        states = _hidden_states(model, input_ids.to(device), mask.to(device), structure)
        weights = mask.to(device).unsqueeze(-1).float()  # (B, N, 1)
        means = [((h.float() * weights).sum(1) / weights.sum(1)).cpu().numpy() for h in states]  # (B, d)
        pooled = [[m] for m in means] if pooled is None else [p + [m] for p, m in zip(pooled, means)]
        rows.extend(batch)
    inverse = np.argsort(np.asarray(rows))
    layers = [np.concatenate(p)[inverse].astype(np.float32) for p in (pooled or [])]
    logger.info(
        "sentence vectors: %d sentences, %d layers, %d unknown words", len(ids), len(layers), counts["unknown_words"]
    )
    return layers, counts
