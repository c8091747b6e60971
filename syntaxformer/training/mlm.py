"""Masked language modelling: BERT's masking rule (Devlin et al. 2019, §3.1 "Task #1: Masked LM").

Each real token is *selected* with probability ``rate``; a selected token is replaced by ``[MASK]``
with probability 0.8, by a random token with probability 0.1, and kept with probability 0.1; the
model is trained to predict the original token at the selected positions only. The Tree Transformer
paper says "as BERT" (rate 0.15); its public code selects with probability 1/7 (``rate=0.142857``).
"""

from __future__ import annotations

import torch

#: ``--mask-replace``: the (mask_prob, random_prob) of
#: :func:`~syntaxformer.training.mlm.mask_tokens` for each rule.
MASK_REPLACE = {"bert": dict(mask_prob=0.8, random_prob=0.1), "mask": dict(mask_prob=1.0, random_prob=0.0)}

#: Label value ignored by the cross-entropy (PyTorch's ``ignore_index``).
IGNORE_INDEX = -100


def unmasked_ids(tokenizer, mask_cls: bool = False, mask_unknown: bool = True) -> list[int]:
    """Token ids masking never selects (:func:`mask_tokens`' ``special_ids``): padding and ``[MASK]``,
    ``[CLS]`` unless ``mask_cls``, ``[UNK]`` unless ``mask_unknown`` (``train``'s ``--mask-cls`` and
    ``--mask-unknown``); sorted, without the ids the tokenizer lacks (None)."""
    ids = {tokenizer.pad_token_id, tokenizer.mask_token_id}
    ids |= set() if mask_cls else {tokenizer.cls_token_id}
    ids |= set() if mask_unknown else {tokenizer.unk_token_id}
    return sorted(i for i in ids if i is not None)


def mask_tokens(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    mask_token_id: int,
    vocab_size: int,
    rate: float = 0.15,
    generator: torch.Generator | None = None,
    special_ids=(),
    mask_prob: float = 0.8,
    random_prob: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply BERT's 80/10/10 masking to a padded batch.

    Eligible positions are real tokens (``attention_mask`` true) whose id is not in ``special_ids``
    (padding is never selected). Each eligible position is selected independently with probability
    ``rate``; **every sentence with an eligible position gets at least one selected position**: a
    sentence where the draw selected none gets one eligible position chosen uniformly (so a sentence
    always contributes to the loss; the expected selected fraction of a sentence of n eligible tokens
    is therefore ``rate + (1-rate)^n / n``, above ``rate`` only for short sentences).
    Random replacement tokens are drawn uniformly from the vocabulary minus ``special_ids``.

    The draws are, in this order: selection uniforms ``[B,N]``, fallback uniforms ``[B,N]``, action
    uniforms ``[B,N]``, random tokens ``[B,N]`` — all from ``generator`` on ``input_ids.device``, so
    the result is a function of the inputs and the generator state (deterministic).

    Args:
        input_ids: ``[B, N]`` token ids (long).
        attention_mask: ``[B, N]``, 1/True at real tokens, 0/False at padding.
        mask_token_id: the id of ``[MASK]``.
        vocab_size: size of the vocabulary (random replacements are below it).
        rate: selection probability, in (0, 1].
        generator: a ``torch.Generator`` on ``input_ids.device`` (None: torch's global one).
        special_ids: ids never selected nor drawn as random replacements (e.g. ``[PAD] [CLS]``).
        mask_prob, random_prob: the 80/10 of 80/10/10 (the rest keeps the token).

    Returns:
        ``(inputs, labels)``, both ``[B, N]`` long: ``inputs`` with the replacements applied,
        ``labels`` = the original id at selected positions and -100 (``IGNORE_INDEX``) elsewhere.
    """
    assert input_ids.shape == attention_mask.shape and input_ids.dim() == 2, (input_ids.shape, attention_mask.shape)
    assert 0.0 < rate <= 1.0, rate
    device = input_ids.device
    eligible = attention_mask.bool()
    specials = torch.tensor(sorted(set(int(i) for i in special_ids)), dtype=torch.long, device=device)
    if specials.numel():
        eligible &= ~torch.isin(input_ids, specials)

    def uniform():
        return torch.rand(input_ids.shape, generator=generator, device=device)

    selected = (uniform() < rate) & eligible  # (B, N)
    # at least one selected position per sentence that has an eligible one
    fallback_scores = uniform().masked_fill(~eligible, -1.0)
    need = (~selected.any(dim=1)) & eligible.any(dim=1)  # (B,)
    pick = fallback_scores.argmax(dim=1)  # (B,) a uniformly random eligible position
    selected[need, pick[need]] = True

    action = uniform()
    to_mask = selected & (action < mask_prob)
    to_random = selected & (action >= mask_prob) & (action < mask_prob + random_prob)
    allowed = torch.ones(vocab_size, dtype=torch.bool, device=device)
    if specials.numel():
        allowed[specials[specials < vocab_size]] = False
    allowed_ids = allowed.nonzero().squeeze(1)  # (V',)
    random_tokens = allowed_ids[torch.randint(len(allowed_ids), input_ids.shape, generator=generator, device=device)]

    inputs = input_ids.clone()
    inputs[to_mask] = mask_token_id
    inputs[to_random] = random_tokens[to_random]
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    return inputs, labels
