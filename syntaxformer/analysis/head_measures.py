"""Attention heads' arithmetic: importance (Michel et al. 2019) and role counts (Voita et al. 2019), DESIGN.md §3.5.

The quantities :mod:`syntaxformer.analysis.heads` defines (exactly, in its docstring) and reports,
per batch:

- **Words**: token attention to word attention (:func:`word_attention`) and each row's maximum
  after dividing the row by its sum (:func:`max_attention`).
- **Roles**: running sums of the confidence, positional, self, special-token and rare-word measures
  (:class:`RoleCounts`); the syntactic hits per relation and direction with the baselines "always
  the most frequent relative position" (:class:`DependencyCounts`, :func:`relation_baselines`).
- **Importance**: the token-weighted mean absolute gradient of the masked-LM loss with respect to
  a head mask of ones (:func:`head_importance`) on seeded masked batches (:func:`mlm_batches`),
  ℓ2-normalised per layer (:func:`normalise_by_layer`).
- **Model passes**: every head's attention weights (:func:`attention_weights`) over the analysed
  text (:func:`text_roles`) and over gold trees (:func:`dependency_roles`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F

from syntaxformer.analysis.head_data import DependencyData, EncodedSentences, encode_counted
from syntaxformer.data.batching import pad_batch
from syntaxformer.errors import InputError
from syntaxformer.models.encoder import HeadLayout, head_layout
from syntaxformer.training.arguments import MASK_REPLACE
from syntaxformer.training.mlm import IGNORE_INDEX, mask_tokens

#: Relations always reported for a labelled source (Voita et al.'s four, and the brief's three more).
RELATIONS = ("nsubj", "obj", "amod", "advmod", "det", "case", "nmod")
#: The two directions of a dependency pair.
DIRECTIONS = ("dependent_to_head", "head_to_dependent")
#: The relation name of every non-root pair (unlabelled).
ANY = "any"


# --------------------------------------------------------------------------------------------------
# words and tokens


def rarest_word(words: Sequence[str], frequencies: Counter) -> int:
    """0-based index of the least frequent word (unknown words count 0; ties: the first)."""
    return min(range(len(words)), key=lambda i: (frequencies.get(words[i], 0), i))


def word_attention(
    attention: torch.Tensor, word_ids: Sequence[Sequence[int | None]]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token attention to word attention (rule in :mod:`syntaxformer.analysis.heads`).

    Args:
        attention: ``(B, K, T, T)`` weights of K heads over padded token sequences.
        word_ids: per sentence, each token's 0-based word index or None (special token); padding
            tokens (beyond its length) carry no weight.

    Returns:
        ``(weights (B, K, N, N+1), mask (B, N) bool)``: N = most words in the batch; row ``i`` =
        word ``i``'s first piece, column ``j < N`` = total weight on word ``j``'s pieces, column
        ``N`` = total weight on special tokens; ``mask`` is True at real words.
    """
    B, K, T, _ = attention.shape
    counts = [1 + max(w for w in wids if w is not None) for wids in word_ids]
    N = max(counts)
    firsts = torch.zeros(B, N, dtype=torch.long)
    assign = torch.zeros(B, T, N + 1, dtype=attention.dtype)
    for b, wids in enumerate(word_ids):
        for t in reversed(range(len(wids))):  # reversed: the first piece is written last
            w = wids[t]
            assign[b, t, N if w is None else w] = 1.0
            if w is not None:
                firsts[b, w] = t
    firsts, assign = firsts.to(attention.device), assign.to(attention.device)
    rows = attention.gather(2, firsts[:, None, :, None].expand(B, K, N, T))  # (B, K, N, T)
    mask = torch.arange(N)[None, :] < torch.tensor(counts)[:, None]
    return rows @ assign[:, None], mask.to(attention.device)


def max_attention(weights: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each row's maximum after dividing the row by its sum.

    Args:
        weights: ``(B, K, N, M)`` word attention (:func:`word_attention`, M = N + 1), non-negative.
        mask: ``(B, N)`` True at real words (rows at padding are computed but meaningless).

    Returns:
        ``(confidence (B, K, N), raw maximum (B, K, N), target (B, K, N) long)``: the largest
        normalised weight, the largest weight as given, and its column (first on ties).
    """
    total = weights.sum(-1, keepdim=True)
    normalised = weights / total.clamp_min(torch.finfo(weights.dtype).tiny)
    confidence, target = normalised.max(-1)
    return confidence, weights.max(-1).values, target


# --------------------------------------------------------------------------------------------------
# roles


class RoleCounts:
    """Running sums of the confidence, positional, self, special-token and rare-word measures of K
    heads; :meth:`add` one batch at a time, :meth:`result` at the end."""

    def __init__(self, heads: int):
        zero = lambda: torch.zeros(heads, dtype=torch.float64)  # noqa: E731
        self.confidence, self.confidence_raw = zero(), zero()
        self.previous, self.next, self.self, self.special, self.rare = zero(), zero(), zero(), zero(), zero()
        self.n_words = self.n_previous = self.n_next = self.n_rare = 0

    def add(self, weights: torch.Tensor, mask: torch.Tensor, rarest: torch.Tensor | None = None) -> None:
        """weights ``(B, K, N, N+1)`` word attention (last column: special tokens), mask ``(B, N)``
        bool, rarest ``(B,)`` long index of each sentence's rarest word (None: no rare-word count)."""
        confidence, raw, target = max_attention(weights, mask)
        target, mask = target.cpu(), mask.cpu()
        B, K, N = target.shape
        pos = torch.arange(N)
        length = mask.sum(1)
        m = mask[:, None, :]
        self.confidence += (confidence.cpu().double() * m).sum((0, 2))
        self.confidence_raw += (raw.cpu().double() * m).sum((0, 2))
        self.n_words += int(mask.sum())
        has_prev = mask & (pos >= 1)
        has_next = mask & (pos + 1 < length[:, None])
        self.previous += ((target == pos - 1) & has_prev[:, None]).sum((0, 2))
        self.next += ((target == pos + 1) & has_next[:, None]).sum((0, 2))
        self.self += ((target == pos) & m).sum((0, 2))
        self.special += ((target == N) & m).sum((0, 2))
        self.n_previous += int(has_prev.sum())
        self.n_next += int(has_next.sum())
        if rarest is not None:
            rarest = rarest.cpu()
            others = mask & (pos != rarest[:, None]) & (length[:, None] >= 2)
            self.rare += ((target == rarest[:, None, None]) & others[:, None]).sum((0, 2))
            self.n_rare += int(others.sum())

    def result(self) -> dict:
        """``(K,)`` float64 tensors: ``confidence`` and ``confidence_raw`` (0-1), and the shares (%)
        ``previous``, ``next``, ``self``, ``special``, ``rare_word`` (NaN when nothing was counted);
        and the counts ``n_words``, ``n_previous``, ``n_next``, ``n_rare``."""

        def share(hits, n, scale=100.0):
            return hits * scale / n if n else torch.full_like(hits, float("nan"))

        return dict(
            confidence=share(self.confidence, self.n_words, 1.0),
            confidence_raw=share(self.confidence_raw, self.n_words, 1.0),
            previous=share(self.previous, self.n_previous),
            next=share(self.next, self.n_next),
            self=share(self.self, self.n_words),
            special=share(self.special, self.n_words),
            rare_word=share(self.rare, self.n_rare),
            n_words=self.n_words,
            n_previous=self.n_previous,
            n_next=self.n_next,
            n_rare=self.n_rare,
        )


def dependency_pairs(
    heads: Sequence[Sequence[int]], relations: Sequence[Sequence[str]] | None = None
) -> list[tuple[int, int, int, str]]:
    """Every non-root pair: ``(sentence, dependent, head, relation)``, 0-based word indices within
    the sentence; relation ``None`` when there are no labels.

    Args:
        heads: per sentence, 1-based heads (0 = root). relations: per sentence, one label per word.
    """
    pairs = []
    for s, sentence_heads in enumerate(heads):
        for d, h in enumerate(sentence_heads):
            if h > 0:
                pairs.append((s, d, h - 1, relations[s][d] if relations is not None else None))
    return pairs


def _groups(relation: str | None) -> tuple[str, ...]:
    return (ANY,) if relation is None else (ANY, relation)


def _offset(direction: str, dependent: int, head: int) -> int:
    """The target's position relative to the query: head − dependent (dependent→head) or the reverse."""
    return head - dependent if direction == DIRECTIONS[0] else dependent - head


def _baseline(offsets: Counter) -> tuple[int | None, float | None]:
    """``(most frequent offset, its share %)``; ties: smaller distance, then the left."""
    if not offsets:
        return None, None
    offset, count = max(offsets.items(), key=lambda kv: (kv[1], -abs(kv[0]), -kv[0]))
    return offset, 100.0 * count / sum(offsets.values())


def relation_baselines(
    heads: Sequence[Sequence[int]], relations: Sequence[Sequence[str]] | None = None
) -> dict[tuple[str, str], dict]:
    """The baseline of every relation and direction: always the most frequent relative position.

    Args:
        heads: per sentence, 1-based heads (0 = root). relations: per sentence, one label per word
            (None: only the relation ``any``).

    Returns:
        ``{(relation, direction): {"n": pairs, "offset": the most frequent relative position of the
        target (head − dependent for dependent→head, dependent − head for head→dependent),
        "baseline": its share (%)}}``; relation ``any`` covers every non-root pair.
    """
    offsets: dict[tuple[str, str], Counter] = {}
    for _, d, h, relation in dependency_pairs(heads, relations):
        for group in _groups(relation):
            for direction in DIRECTIONS:
                offsets.setdefault((group, direction), Counter())[_offset(direction, d, h)] += 1
    result = {}
    for key, counter in offsets.items():
        offset, share = _baseline(counter)
        result[key] = dict(n=sum(counter.values()), offset=offset, baseline=share)
    return result


class DependencyCounts:
    """Running per-head hits of the syntactic measure, per (relation, direction), with the gold
    offsets for the baselines; :meth:`add` one batch at a time, :meth:`result` at the end."""

    def __init__(self, heads: int):
        self.k = heads
        self.hits: dict[tuple[str, str], torch.Tensor] = {}
        self.offsets: dict[tuple[str, str], Counter] = {}

    def add(
        self, target: torch.Tensor, heads: Sequence[Sequence[int]], relations: Sequence[Sequence[str]] | None = None
    ) -> None:
        """target ``(B, K, N)`` column of each row's maximum (:func:`max_attention`); heads per
        sentence of the batch, 1-based (0 = root); relations per sentence or None."""
        pairs = dependency_pairs(heads, relations)
        if not pairs:
            return
        target = target.cpu()
        b, d, h = (torch.tensor([p[i] for p in pairs]) for i in range(3))
        correct = {
            DIRECTIONS[0]: target[b, :, d] == h[:, None],  # (P, K)
            DIRECTIONS[1]: target[b, :, h] == d[:, None],
        }
        members: dict[str, list[int]] = {}
        for index, (_, _, _, relation) in enumerate(pairs):
            for group in _groups(relation):
                members.setdefault(group, []).append(index)
        for group, indices in members.items():
            idx = torch.tensor(indices)
            for direction in DIRECTIONS:
                key = (group, direction)
                hits = correct[direction][idx].sum(0).double()
                self.hits[key] = self.hits.get(key, torch.zeros(self.k, dtype=torch.float64)) + hits
                counter = self.offsets.setdefault(key, Counter())
                for i in indices:
                    counter[_offset(direction, pairs[i][1], pairs[i][2])] += 1

    def result(self, labelled: bool) -> dict[tuple[str, str], dict]:
        """``{(relation, direction): {"n", "baseline_offset", "baseline" (%), "accuracy" (K,) %,
        "gain" (K,) points}}``; with ``labelled``, :data:`RELATIONS` absent from the data are
        included with ``n`` 0 and NaN accuracies."""
        keys = set(self.hits)
        if labelled:
            keys |= {(r, d) for r in RELATIONS for d in DIRECTIONS}
        out = {}
        for key in sorted(keys):
            counter = self.offsets.get(key, Counter())
            n = sum(counter.values())
            offset, baseline = _baseline(counter)
            accuracy = self.hits[key] * 100.0 / n if n else torch.full((self.k,), float("nan"), dtype=torch.float64)
            gain = accuracy - baseline if baseline is not None else accuracy * float("nan")
            out[key] = dict(n=n, baseline_offset=offset, baseline=baseline, accuracy=accuracy, gain=gain)
        return out


# --------------------------------------------------------------------------------------------------
# importance


def normalise_by_layer(importance: torch.Tensor) -> torch.Tensor:
    """``importance (L, H)`` divided by the ℓ2 norm of its layer (NaN entries, e.g. pruned heads,
    are left out of the norm and stay NaN; a layer of zeros stays zero)."""
    values = importance.double()
    norms = torch.nan_to_num(values, nan=0.0).pow(2).sum(-1, keepdim=True).sqrt()
    return torch.where(norms > 0, values / norms.clamp_min(1e-300), values)


def mean_abs_gradient(losses: Iterable[tuple[torch.Tensor, int]], xi: torch.Tensor) -> tuple[torch.Tensor, int, float]:
    """Michel et al.'s accumulation: ``Σ_b T_b |∂L_b/∂ξ| / Σ_b T_b`` over the batches.

    Args:
        losses: per batch ``(L_b, T_b)``: the batch's mean loss (a scalar computed from ``xi``) and the
            number of tokens it averages (batches with ``T_b = 0`` are not yielded).
        xi: the head gates with ``requires_grad`` (any shape, e.g. ``(L, H)``).

    Returns:
        ``(|gradient| weighted mean, float64 of xi's shape; T = Σ_b T_b; mean loss per token)``;
        ``T = 0`` (and a zero tensor) when no batch was yielded.
    """
    total = torch.zeros(xi.shape, dtype=torch.float64)
    n_tokens, loss_sum = 0, 0.0
    for loss, t in losses:
        (grad,) = torch.autograd.grad(loss, xi)
        total += grad.detach().abs().double().cpu() * t
        n_tokens += t
        loss_sum += float(loss.detach()) * t
    if n_tokens == 0:
        return total, 0, float("nan")
    return total / n_tokens, n_tokens, loss_sum / n_tokens


def head_importance(
    model, batches: Iterable[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], layout: HeadLayout | None = None
) -> tuple[torch.Tensor, int, float]:
    """Michel et al.'s head importance, as defined in :mod:`syntaxformer.analysis.heads`.

    Args:
        model: a masked LM of the registry in evaluation mode (``forward(input_ids=,
            attention_mask=, head_mask=)`` returning ``.logits (B, N, V)``).
        batches: ``(input_ids, attention_mask, labels)``, each ``(B, N)`` on the model's device;
            ``labels`` = the original id at masked positions, -100 elsewhere.
        layout: the model's heads (default :func:`head_layout`).

    Returns:
        ``(I (L, H) float64 with NaN at pruned heads, masked tokens T = Σ_b T_b, mean loss in
        nats per masked token)``.

    Raises:
        InputError: no masked token in any batch.
    """
    layout = layout or head_layout(model)
    param = next(model.parameters())
    xi = torch.ones(layout.layers, layout.heads, dtype=param.dtype, device=param.device, requires_grad=True)

    def losses():
        for input_ids, attention_mask, labels in batches:
            selected = labels != IGNORE_INDEX
            t = int(selected.sum())
            if t == 0:
                continue
            logits = model(input_ids=input_ids, attention_mask=attention_mask, head_mask=xi).logits  # (B, N, V)
            yield F.cross_entropy(logits[selected], labels[selected]), t

    importance, n_tokens, loss = mean_abs_gradient(losses(), xi)
    if n_tokens == 0:
        raise InputError("no masked token to compute head importance on (empty text?)")
    importance[~layout.kept()] = float("nan")
    return importance, n_tokens, loss


def _length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices sorted by length (stable) and cut into batches of ``batch_size``."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def mlm_batches(
    tokenizer, ids: Sequence[Sequence[int]], batch_size: int, rate: float, replace: str, seed: int, device
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Masked batches for :func:`head_importance`: length-sorted batches of ``batch_size``
    sentences, masked by :func:`mask_tokens` (``rate``; ``replace`` a key of
    :data:`~syntaxformer.training.arguments.MASK_REPLACE`) with one generator seeded by ``seed``;
    padding, ``[CLS]`` and ``[MASK]`` are never selected (as in training)."""

    generator = torch.Generator().manual_seed(seed)
    special = sorted(
        {i for i in (tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.mask_token_id) if i is not None}
    )
    batches = []
    for batch in _length_batches([len(x) for x in ids], batch_size):
        input_ids, attention_mask = pad_batch([ids[i] for i in batch], tokenizer.pad_token_id)
        inputs, labels = mask_tokens(
            input_ids,
            attention_mask,
            tokenizer.mask_token_id,
            len(tokenizer),
            rate,
            generator,
            special,
            **MASK_REPLACE[replace],
        )
        batches.append((inputs.to(device), attention_mask.to(device), labels.to(device)))
    return batches


# --------------------------------------------------------------------------------------------------
# model passes


@torch.no_grad()
def attention_weights(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, layout: HeadLayout) -> torch.Tensor:
    """Every head's attention on unmasked input: ``(B, L·H, T, T)`` (flat index ``l·H + h``; zeros
    at pruned heads), from ``model(..., output_attentions=True)``.

    Raises:
        InputError: the model returns no attention weights for some layer.
    """
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    attentions = getattr(out, "attentions", None)
    if not attentions or len(attentions) != layout.layers or any(a is None for a in attentions):
        raise InputError(
            f"{type(model).__name__} returns no attention weights for each of its "
            f"{layout.layers} layers (output_attentions=True): no head to score"
        )
    B, T = input_ids.shape
    full = attentions[0].new_zeros(B, layout.layers, layout.heads, T, T)
    for layer, weights in enumerate(attentions):
        full[:, layer, list(layout.present[layer])] = weights
    return full.flatten(1, 2)


def _word_batches(model, tokenizer, encoded: EncodedSentences, layout: HeadLayout, batch_size: int):
    """Yield ``(indices into encoded, word attention (B, K, N, N+1), word mask (B, N))`` per
    length-sorted batch."""
    device = next(model.parameters()).device
    for batch in _length_batches([len(x) for x in encoded.ids], batch_size):
        input_ids, attention_mask = pad_batch([encoded.ids[i] for i in batch], tokenizer.pad_token_id)
        attention = attention_weights(model, input_ids.to(device), attention_mask.to(device), layout)
        weights, mask = word_attention(attention, [encoded.word_ids[i] for i in batch])
        yield batch, weights, mask


def text_roles(
    model, tokenizer, encoded: EncodedSentences, frequencies: Counter, layout: HeadLayout, batch_size: int = 32
) -> dict:
    """:meth:`RoleCounts.result` of every head (flat ``L·H``) on ``encoded`` (unmasked)."""
    counts = RoleCounts(layout.size)
    for batch, weights, mask in _word_batches(model, tokenizer, encoded, layout, batch_size):
        rarest = torch.tensor([rarest_word(encoded.words[i], frequencies) for i in batch])
        counts.add(weights, mask, rarest)
    return counts.result()


def dependency_roles(
    model, tokenizer, data: DependencyData, layout: HeadLayout, batch_size: int = 32, max_length: int | None = None
) -> tuple[dict, EncodedSentences]:
    """:meth:`DependencyCounts.result` of every head (flat ``L·H``) on gold trees, and the
    encoding's counts (unknown / split words, sentences skipped)."""
    encoded = encode_counted(tokenizer, data.words, max_length)
    counts = DependencyCounts(layout.size)
    for batch, weights, mask in _word_batches(model, tokenizer, encoded, layout, batch_size):
        _, _, target = max_attention(weights, mask)
        kept = [encoded.kept[i] for i in batch]
        counts.add(
            target,
            [data.heads[i] for i in kept],
            [data.relations[i] for i in kept] if data.relations is not None else None,
        )
    return counts.result(labelled=data.relations is not None), encoded
