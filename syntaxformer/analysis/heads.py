"""Attention heads: importance (Michel et al. 2019) and roles (Voita et al. 2019), DESIGN.md §3.5.

Per layer × head of any model of the registry (its ``forward`` takes ``head_mask`` of shape
``(L, H)``; ``output_attentions=True`` returns per layer ``(B, H, N, N)`` weights). Layers and heads
are numbered from 0 by their original numbers; a pruned head (``config.pruned_heads``) is ``None``
in every per-head table.

Definitions (exact; :data:`PROTOCOL` repeats them in every report):

- **Importance** (Michel et al. 2019, DESIGN.md §3.5). ``ξ`` is an ``(L, H)`` head mask of ones
  with a gradient; the text is cut into batches of ``batch_size`` sentences (sorted by length,
  stable), masked with :func:`~syntaxformer.training.mlm.mask_tokens` at the model's training rate
  and rule (``training.json``; 0.15 / BERT 80-10-10 if unknown) from one generator seeded with
  ``seed``. For batch ``b`` with ``T_b`` masked (predicted) tokens, ``L_b`` is the mean
  cross-entropy (nats) over them and ``g_b = ∂L_b/∂ξ`` (evaluation mode: no dropout). Then
  ``I = Σ_b T_b |g_b| / Σ_b T_b``: the token-weighted mean over batches of the absolute gradient
  (the reference code's ``calculate_head_importance`` accumulates ``|∂L_b/∂ξ|`` per batch and
  divides by the tokens). With one batch, ``I = |∂L/∂ξ|`` exactly. Normalised:
  ``I_h / ‖I_layer‖₂`` within each layer (Michel's exponent 2).
- **Words.** Attention is over tokens; each word's row is the row of its **first piece**, and the
  weight a row gives a word is the sum over that word's pieces (one token per word: the identity).
  Weight on special tokens (``[CLS]``) is one extra column, "special". Each row is divided by its sum
  before taking maxima (Tree Transformer ``C ⊙ softmax`` and StructFormer's sigmoid rows do not sum
  to 1); ``confidence_raw`` keeps the unnormalised maximum. Ties go to the first (leftmost) column.
- **Confidence** (Voita): mean over words of the row's maximum weight (0-1).
- **Positional**: share (%) of words whose maximum falls on the previous word, among words that have
  one (``i ≥ 1``); likewise the next word (``i ≤ n-2``). Positional when either share ≥
  :data:`POSITIONAL_THRESHOLD`.
- **Rare word**: share (%) of words, other than the rarest word itself, whose maximum falls on the
  sentence's rarest word (lowest frequency in the model's training text when ``training.json``
  names a readable corpus, else in the analysed text; unknown words count 0; ties: the first).
  Sentences of one word are not counted.
- **Syntactic** (Voita), against gold trees with punctuation removed (the models see
  punctuation-free words; a head on punctuation is re-attached to its nearest non-punctuation
  ancestor, :func:`~syntaxformer.evaluation.dependency.reattach_heads`). Per pair (dependent ``d``,
  head ``h``, relation ``r`` = the UD label before ``:``): *dependent→head* is correct when ``d``'s
  maximum falls on ``h``; *head→dependent* when ``h``'s maximum falls on ``d``. Accuracy (%) over
  the pairs; the baseline always predicts the most frequent relative position of the target for
  that relation and direction (ties: the smaller distance, then the left); ``gain = accuracy −
  baseline`` (points). Every relation found is reported; a head is *syntactic* for a relation of
  :data:`RELATIONS` (or ``any``) when ``gain ≥`` :data:`SYNTACTIC_MARGIN` on a group of at least
  :data:`MIN_RELATION_PAIRS` pairs (rarer relations, e.g. ``vocative``, are too noisy to judge).
  Relation ``any``: every non-root pair (the unlabelled "attends to its head" accuracy; the only
  relation of sources without labels, e.g. ptb-sample).
- Unknown words (``[UNK]``) and words split into pieces are kept and counted; sentences longer
  than the model's positions or empty after punctuation removal are skipped and counted.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from syntaxformer.data.batching import pad_batch
from syntaxformer.data.corpus import held_out_indices, load_corpus
from syntaxformer.data.dependency import read_dependencies
from syntaxformer.data.preprocess import PRPN, Preprocessing, normalise_word
from syntaxformer.data.tokenization import encode
from syntaxformer.errors import InputError
from syntaxformer.evaluation.dependency import reattach_heads
from syntaxformer.figures import save_figure, write_index
from syntaxformer.figures.head_maps import plot_head_map
from syntaxformer.models.encoder import HeadLayout, head_layout, normalise_pruned_heads  # noqa: F401  (re-exported)
from syntaxformer.parsing import load_model
from syntaxformer.training.arguments import MASK_REPLACE
from syntaxformer.training.mlm import IGNORE_INDEX, mask_tokens

logger = logging.getLogger(__name__)

#: Positional when the share of maxima on the previous (or next) word is at least this (%), DESIGN.md §3.5.
POSITIONAL_THRESHOLD = 90.0
#: Syntactic for a relation when its accuracy beats the relation's baseline by this many points.
SYNTACTIC_MARGIN = 10.0
#: Relations always reported for a labelled source (Voita et al.'s four, and the brief's three more).
RELATIONS = ("nsubj", "obj", "amod", "advmod", "det", "case", "nmod")
#: The two directions of a dependency pair.
DIRECTIONS = ("dependent_to_head", "head_to_dependent")
#: A relation group with fewer pairs is reported but never makes a head syntactic nor "best".
MIN_RELATION_PAIRS = 50
#: The relation name of every non-root pair (unlabelled).
ANY = "any"
#: Default text when the model's own held-out text cannot be identified.
FALLBACK_TEXT = "ptb-sample:dev"

PROTOCOL = {
    "importance": "I = sum_b T_b |dL_b/dxi| / sum_b T_b; L_b = mean masked-LM cross-entropy (nats) over "
    "the T_b masked tokens of batch b; xi = (L, H) head mask of ones; evaluation mode; "
    "normalised = I / l2 norm of its layer (DESIGN.md §3.5, Michel et al. 2019)",
    "words": "a word's row = its first piece's row; weight on a word = sum over its pieces; special "
    "tokens one extra column; rows divided by their sum before maxima; ties to the leftmost",
    "confidence": "mean over words of the row maximum (0-1), Voita et al. 2019",
    "positional": f"share (%) of words with a previous (next) word whose maximum is on it; positional "
    f"when >= {POSITIONAL_THRESHOLD}",
    "rare_word": "share (%) of words other than the rarest whose maximum is on the sentence's rarest "
    "word (ties: first); one-word sentences not counted",
    "syntactic": f"accuracy (%) of pairs whose dependent's (head's) maximum is on its head (dependent), "
    f"punctuation removed and heads re-attached; baseline = most frequent relative "
    f"position per relation and direction; syntactic for a relation of {', '.join(RELATIONS)} "
    f"or 'any' when gain >= {SYNTACTIC_MARGIN} points on >= {MIN_RELATION_PAIRS} pairs; "
    f"relation = UD label before ':'; 'any' = every non-root pair",
}


# --------------------------------------------------------------------------------------------------
# heads of a model


# --------------------------------------------------------------------------------------------------
# words and tokens


@dataclass
class EncodedSentences:
    """Sentences encoded for a model, with what happened to their words.

    Attributes:
        words: the kept sentences' words; ids / word_ids: per kept sentence (:func:`encode`).
        kept: 0-based index in the input of each kept sentence.
        n_unknown: words with an ``[UNK]`` piece (kept). n_split_words: words of more than one piece.
        n_too_long: sentences over the model's positions (skipped). n_empty: empty ones (skipped).
    """

    words: list[list[str]] = field(default_factory=list)
    ids: list[list[int]] = field(default_factory=list)
    word_ids: list[list[int | None]] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    n_unknown: int = 0
    n_split_words: int = 0
    n_too_long: int = 0
    n_empty: int = 0

    def stats(self) -> dict:
        """Counts for the report: sentences, words, tokens, unknown and split words, skipped sentences."""
        return dict(
            n_sentences=len(self.ids),
            n_words=sum(map(len, self.words)),
            n_tokens=sum(map(len, self.ids)),
            n_unknown=self.n_unknown,
            n_split_words=self.n_split_words,
            n_skipped_too_long=self.n_too_long,
            n_skipped_empty=self.n_empty,
        )


def encode_counted(tokenizer, sentences: Sequence[Sequence[str]], max_length: int | None = None) -> EncodedSentences:
    """Encode word lists (already normalised), counting unknown and split words.

    Args:
        tokenizer: the model's tokenizer. sentences: lists of words.
        max_length: the model's positions (tokens, specials included); longer sentences are skipped
            and counted (a warning is logged), never cut.
    """
    result = EncodedSentences()
    nonempty = [i for i, s in enumerate(sentences) if len(s)]
    result.n_empty = len(sentences) - len(nonempty)
    ids, word_ids = encode(tokenizer, [list(sentences[i]) for i in nonempty])
    unk = tokenizer.unk_token_id
    for i, tokens, wids in zip(nonempty, ids, word_ids):
        if max_length is not None and len(tokens) > max_length:
            result.n_too_long += 1
            continue
        pieces = Counter(w for w in wids if w is not None)
        result.n_split_words += sum(1 for c in pieces.values() if c > 1)
        result.n_unknown += len({w for t, w in zip(tokens, wids) if w is not None and t == unk})
        result.words.append(list(sentences[i]))
        result.ids.append(list(tokens))
        result.word_ids.append(list(wids))
        result.kept.append(i)
    if result.n_too_long:
        logger.warning("skipped %d sentences longer than the model's %s positions", result.n_too_long, max_length)
    return result


def rarest_word(words: Sequence[str], frequencies: Counter) -> int:
    """0-based index of the least frequent word (unknown words count 0; ties: the first)."""
    return min(range(len(words)), key=lambda i: (frequencies.get(words[i], 0), i))


def word_attention(
    attention: torch.Tensor, word_ids: Sequence[Sequence[int | None]]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token attention to word attention (rule in the module docstring).

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


def head_importance(
    model, batches: Iterable[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], layout: HeadLayout | None = None
) -> tuple[torch.Tensor, int, float]:
    """Michel et al.'s head importance, as defined in the module docstring.

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
    total = torch.zeros(layout.layers, layout.heads, dtype=torch.float64)
    n_tokens, loss_sum = 0, 0.0
    for input_ids, attention_mask, labels in batches:
        selected = labels != IGNORE_INDEX
        t = int(selected.sum())
        if t == 0:
            continue
        logits = model(input_ids=input_ids, attention_mask=attention_mask, head_mask=xi).logits  # (B, N, V)
        loss = F.cross_entropy(logits[selected], labels[selected])
        (grad,) = torch.autograd.grad(loss, xi)
        total += grad.detach().abs().double().cpu() * t
        n_tokens += t
        loss_sum += float(loss.detach()) * t
    if n_tokens == 0:
        raise InputError("no masked token to compute head importance on (empty text?)")
    importance = total / n_tokens
    importance[~layout.kept()] = float("nan")
    return importance, n_tokens, loss_sum / n_tokens


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
# texts and gold trees


@dataclass
class TextChoice:
    """The text analysed and the word frequencies of the rare-word role, each with its source."""

    sentences: list[list[str]]
    source: str
    frequencies: Counter
    frequency_source: str


def _training_text(info: dict) -> tuple[list[list[str]], list[list[str]], str] | None:
    """``(training sentences, held-out sentences, description of the held-out part)`` named by a
    ``training.json`` (the trainer's split: its ``valid`` corpus, else the seed-0 permutation's
    ``valid_fraction``), or None when it names no readable corpus."""

    args = info.get("arguments") or {}
    corpus = args.get("corpus")
    if not corpus:
        return None
    try:
        options = Preprocessing(**info["preprocessing"]) if info.get("preprocessing") else PRPN
    except TypeError:
        options = PRPN
    try:
        sentences = load_corpus(corpus, options)
        if args.get("valid"):
            return sentences, load_corpus(args["valid"], options), f"{args['valid']} (the model's validation corpus)"
    except InputError as e:
        logger.warning("the model's training corpus is not readable here (%s)", e)
        return None
    fraction = float(args.get("valid_fraction", 0.05))
    held = held_out_indices(len(sentences), fraction)
    train = [s for i, s in enumerate(sentences) if i not in held]
    return (
        train,
        [s for i, s in enumerate(sentences) if i in held],
        f"held-out {fraction} of {corpus} (the trainer's seed-0 permutation)",
    )


def choose_text(info: dict, text: str | None = None, max_sentences: int | None = None) -> TextChoice:
    """The analysed text: ``text`` (a :func:`~syntaxformer.data.corpus.load_corpus` spec) if given,
    else the held-out part of the model's training text (``training.json``), else
    :data:`FALLBACK_TEXT`; its first ``max_sentences``. Frequencies: the training text if known,
    else the analysed text.

    Raises:
        InputError: an unreadable or empty ``text``.
    """

    training = _training_text(info)
    if text is not None:
        sentences, source = load_corpus(text), text
    elif training is not None and training[1]:
        sentences, source = training[1], training[2]
    else:
        sentences, source = load_corpus(FALLBACK_TEXT), f"{FALLBACK_TEXT} (the model's held-out text is unknown)"
        logger.warning("no held-out text identifiable from training.json: analysing %s", FALLBACK_TEXT)
    sentences = [list(s) for s in sentences[:max_sentences]]
    if not sentences:
        raise InputError("no sentence to analyse", path=text or source)
    if training is not None:
        return TextChoice(
            sentences,
            source,
            Counter(w for s in training[0] for w in s),
            f"training text of {info['arguments']['corpus']} ({len(training[0])} sentences)",
        )
    return TextChoice(
        sentences, source, Counter(w for s in sentences for w in s), "the analysed text (the training text is unknown)"
    )


def read_relations(sentences) -> list[list[str]] | None:
    """The relation of every token of ``sentences`` (:func:`~syntaxformer.data.dependency.read_dependencies`
    output), the UD label before ``:``; None when any sentence has no labels (ptb-sample, ``.dp``)."""
    if any(s.relations is None for s in sentences):
        return None
    return [[r.split(":")[0] for r in s.relations] for s in sentences]


@dataclass
class DependencyData:
    """Gold trees over punctuation-free, normalised words (what the models see).

    Attributes:
        source: as given. words / heads (1-based, re-attached) / relations (or None): per sentence.
        numbers: 1-based number of each sentence in the source. n_punctuation: tokens removed.
        n_empty: sentences with no word left (skipped).
    """

    source: str
    words: list[list[str]]
    heads: list[list[int]]
    relations: list[list[str]] | None
    numbers: list[int]
    n_punctuation: int
    n_empty: int


def load_dependency_data(source: str, max_sentences: int | None = None) -> DependencyData:
    """Read gold trees (``ptb-sample:dev``, a ``.conllu`` file, ...) and remove punctuation.

    Raises:
        InputError: as :func:`~syntaxformer.data.dependency.read_dependencies`; a head chain
            cycling through punctuation (names the source and sentence).
    """

    sentences = read_dependencies(source)
    relations = read_relations(sentences)
    sentences = sentences[:max_sentences]
    data = DependencyData(str(source), [], [], [] if relations is not None else None, [], 0, 0)
    for number, sentence in enumerate(sentences, 1):
        keep = [i for i, p in enumerate(sentence.punct) if not p]
        data.n_punctuation += len(sentence) - len(keep)
        if not keep:
            data.n_empty += 1
            continue
        try:
            heads = reattach_heads(sentence.heads, sentence.punct)
        except InputError as e:
            raise InputError(str(e), path=source, sentence=number) from None
        data.words.append([normalise_word(sentence.words[i]) for i in keep])
        data.heads.append(heads)
        data.numbers.append(number)
        if relations is not None:
            data.relations.append([relations[number - 1][i] for i in keep])
    if not data.words:
        raise InputError("no sentence with a word left after punctuation removal", path=source)
    return data


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


# --------------------------------------------------------------------------------------------------
# the report


def _dependency_section(result: dict, data: DependencyData, encoded: EncodedSentences, layout: HeadLayout) -> dict:
    """One gold source's part of ``heads.json``."""
    groups = [
        dict(
            relation=relation,
            direction=direction,
            n=g["n"],
            baseline_offset=g["baseline_offset"],
            baseline=None if g["baseline"] is None else round(g["baseline"], 2),
            accuracy=layout.grid(g["accuracy"], 2),
            gain=layout.grid(g["gain"], 2),
        )
        for (relation, direction), g in result.items()
    ]
    unlabelled = result[(ANY, DIRECTIONS[0])]
    stats = encoded.stats()
    stats["n_skipped_empty"] = data.n_empty
    return dict(
        source=data.source,
        labelled=data.relations is not None,
        **stats,
        n_punctuation_removed=data.n_punctuation,
        unlabelled_accuracy=layout.grid(unlabelled["accuracy"], 2),
        unlabelled_baseline=unlabelled["baseline"] and round(unlabelled["baseline"], 2),
        unlabelled_baseline_offset=unlabelled["baseline_offset"],
        groups=groups,
    )


def _syntactic_summary(sections: list[dict], layout: HeadLayout) -> tuple[list, list]:
    """Per head: the groups (relations of :data:`RELATIONS` and ``any``, at least
    :data:`MIN_RELATION_PAIRS` pairs) it is syntactic for, and its best group (the largest gain;
    among :data:`RELATIONS` when a source has labels, else relation ``any``)."""
    labelled = any(s["labelled"] for s in sections)
    syntactic = [[[] for _ in range(layout.heads)] for _ in range(layout.layers)]
    best = [[None] * layout.heads for _ in range(layout.layers)]
    for section in sections:
        for g in section["groups"]:
            if g["n"] < MIN_RELATION_PAIRS or (g["relation"] != ANY and g["relation"] not in RELATIONS):
                continue
            for layer in range(layout.layers):
                for head in range(layout.heads):
                    gain = g["gain"][layer][head]
                    if gain is None:
                        continue
                    entry = dict(
                        source=section["source"],
                        relation=g["relation"],
                        direction=g["direction"],
                        n=g["n"],
                        accuracy=g["accuracy"][layer][head],
                        baseline=g["baseline"],
                        gain=gain,
                    )
                    if gain >= SYNTACTIC_MARGIN:
                        syntactic[layer][head].append(entry)
                    candidate = (g["relation"] != ANY) if labelled else True
                    if candidate and (best[layer][head] is None or gain > best[layer][head]["gain"]):
                        best[layer][head] = entry
    return syntactic, best


def _role_sections(roles: dict, layout: HeadLayout, choice: TextChoice) -> dict:
    """The confidence, positional and rare-word parts of ``heads.json``."""
    previous, following = layout.grid(roles["previous"], 2), layout.grid(roles["next"], 2)

    def positional(p, n):
        if p is None:
            return None
        return "previous" if p >= POSITIONAL_THRESHOLD else ("next" if n >= POSITIONAL_THRESHOLD else False)

    return dict(
        confidence=layout.grid(roles["confidence"], 4),
        confidence_raw=layout.grid(roles["confidence_raw"], 4),
        positional=dict(
            previous=previous,
            next=following,
            n_previous=roles["n_previous"],
            n_next=roles["n_next"],
            threshold=POSITIONAL_THRESHOLD,
            role=[[positional(p, n) for p, n in zip(pr, nr)] for pr, nr in zip(previous, following)],
        ),
        self_share=layout.grid(roles["self"], 2),
        special_share=layout.grid(roles["special"], 2),
        rare_word=dict(
            share=layout.grid(roles["rare_word"], 2), n=roles["n_rare"], frequency_source=choice.frequency_source
        ),
    )


def analyse_model(
    model,
    tokenizer,
    info: dict,
    text: str | None = None,
    dependencies: Sequence[str] = (FALLBACK_TEXT,),
    seed: int = 0,
    max_sentences: int | None = None,
    batch_size: int = 32,
) -> dict:
    """Every measure of the module docstring for a loaded model (evaluation mode).

    Args:
        model, tokenizer: a masked LM of the registry and its tokenizer.
        info: its ``training.json`` (``{}`` if none): the held-out text, the training text's word
            frequencies, the masking rate and rule.
        text: a :func:`~syntaxformer.data.corpus.load_corpus` spec, or None (:func:`choose_text`).
        dependencies: gold dependency sources (ptb-sample parts, CoNLL-U files ...).
        seed: the masking generator's seed. max_sentences: at most this many sentences of each text.
        batch_size: sentences per forward pass (and per importance batch: it changes ``I``).

    Returns:
        The ``heads.json`` dictionary (per-head values as ``[L][H]`` lists, None at pruned heads).

    Raises:
        InputError: a model without heads or attention weights, unreadable or empty text / trees.
    """
    if batch_size < 1 or (max_sentences is not None and max_sentences < 1):
        raise InputError(f"--batch-size and --max-sentences must be at least 1, got {batch_size}, {max_sentences}")
    layout = head_layout(model)
    max_length = getattr(model.config, "max_position_embeddings", None)
    gold = [load_dependency_data(source, max_sentences) for source in dependencies]  # bad input first
    choice = choose_text(info, text, max_sentences)
    encoded = encode_counted(tokenizer, choice.sentences, max_length)
    if not encoded.ids:
        raise InputError("no sentence of the text fits the model", path=choice.source)
    args = info.get("arguments") or {}
    rate, replace = float(args.get("mask_rate", 0.15)), str(args.get("mask_replace", "bert"))
    device = next(model.parameters()).device
    raw, n_masked, loss = head_importance(
        model, mlm_batches(tokenizer, encoded.ids, batch_size, rate, replace, seed, device), layout
    )
    logger.info("importance: %d sentences, %d masked tokens, loss %.4f", len(encoded.ids), n_masked, loss)
    roles = text_roles(model, tokenizer, encoded, choice.frequencies, layout, batch_size)
    sections = []
    for data in gold:
        result, dep_encoded = dependency_roles(model, tokenizer, data, layout, batch_size, max_length)
        sections.append(_dependency_section(result, data, dep_encoded, layout))
    syntactic, best = _syntactic_summary(sections, layout)
    importance = dict(
        raw=layout.grid(raw, 8),
        normalised=layout.grid(normalise_by_layer(raw), 4),
        mean_loss=round(loss, 6),
        n_masked_tokens=n_masked,
        mask_rate=rate,
        mask_replace=replace,
        batch_size=batch_size,
        seed=seed,
    )
    config = model.config
    return dict(
        command="heads",
        model_type=getattr(config, "model_type", type(model).__name__),
        prior=getattr(config, "prior", None),
        preset=info.get("preset"),
        training_seed=info.get("seed"),
        layers=layout.layers,
        heads=layout.heads,
        pruned_heads={str(k): v for k, v in normalise_pruned_heads(getattr(config, "pruned_heads", None)).items()},
        seed=seed,
        protocol=PROTOCOL,
        text=dict(source=choice.source, **encoded.stats()),
        importance=importance,
        **_role_sections(roles, layout, choice),
        dependencies=sections,
        syntactic=dict(margin=SYNTACTIC_MARGIN, min_pairs=MIN_RELATION_PAIRS, heads=syntactic, best=best),
    )


def analyse_heads(
    model_folder: str | os.PathLike,
    text: str | None = None,
    dependencies: Sequence[str] = (FALLBACK_TEXT,),
    seed: int = 0,
    max_sentences: int | None = None,
    batch_size: int = 32,
    device: str | None = "cpu",
) -> dict:
    """:func:`analyse_model` on a model folder (:func:`~syntaxformer.parsing.load_model`); the
    report names the folder (``model``) and the device.

    Raises:
        InputError: as :func:`analyse_model`, or a folder that holds no model.
    """

    torch.manual_seed(seed)
    model, tokenizer, info = load_model(model_folder, device=device)
    report = analyse_model(model, tokenizer, info, text, dependencies, seed, max_sentences, batch_size)
    return dict(model=str(model_folder), device=str(next(model.parameters()).device), **report)


# --------------------------------------------------------------------------------------------------
# outputs


def _nan_grid(grid: list[list[float | None]]) -> list[list[float]]:
    return [[float("nan") if v is None else float(v) for v in row] for row in grid]


def _positional_and_syntactic(report: dict) -> tuple[list, list, list, list]:
    """The positional heatmap's shares and arrow labels, the syntactic one's gains and relation labels."""
    positional = report["positional"]
    shares = [
        [None if p is None else max(p, n) for p, n in zip(pr, nr)]
        for pr, nr in zip(positional["previous"], positional["next"])
    ]
    arrows = [
        [None if p is None else (f"←{p:.0f}" if p >= n else f"→{n:.0f}") for p, n in zip(pr, nr)]
        for pr, nr in zip(positional["previous"], positional["next"])
    ]
    best = report["syntactic"]["best"]
    gains = [[None if b is None else b["gain"] for b in row] for row in best]
    names = [
        [
            None
            if b is None
            else f"{b['relation']} {'d→h' if b['direction'] == DIRECTIONS[0] else 'h→d'}\n{b['gain']:+.1f}"
            for b in row
        ]
        for row in best
    ]
    return shares, arrows, gains, names


def heatmap_values(report: dict) -> list[tuple[str, str, dict]]:
    """``(file stem, caption, keyword arguments of plot_head_map)`` for each heatmap of a report."""
    shares, arrows, gains, names = _positional_and_syntactic(report)
    text = report["text"]["source"]
    return [
        (
            "importance",
            f"head importance (Michel et al.), ℓ2-normalised per layer; text: {text}",
            dict(
                values=_nan_grid(report["importance"]["normalised"]),
                title="importance (normalised per layer)",
                colorbar_label="I_h / ||I_layer||",
                vmin=0.0,
                vmax=1.0,
            ),
        ),
        (
            "confidence",
            "confidence (Voita et al.): mean maximum attention weight",
            dict(
                values=_nan_grid(report["confidence"]),
                title="confidence",
                colorbar_label="mean max weight",
                vmin=0.0,
                vmax=1.0,
            ),
        ),
        (
            "positional",
            f"positional share: maximum on the previous (←) or next (→) word, %; positional at "
            f"≥ {POSITIONAL_THRESHOLD:g}",
            dict(
                values=_nan_grid(shares),
                title="positional share (%)",
                colorbar_label="% of words",
                vmin=0.0,
                vmax=100.0,
                labels=arrows,
            ),
        ),
        (
            "syntactic",
            "best syntactic gain: accuracy − baseline (points) of the head's best relation "
            "and direction; syntactic at ≥ "
            f"{SYNTACTIC_MARGIN:g}",
            dict(
                values=_nan_grid(gains),
                title="best syntactic gain (points)",
                colorbar_label="points over baseline",
                center=0.0,
                labels=names,
            ),
        ),
        (
            "rare_word",
            f"rare-word share (%): maximum on the sentence's rarest word "
            f"(frequencies: {report['rare_word']['frequency_source']})",
            dict(
                values=_nan_grid(report["rare_word"]["share"]),
                title="rare-word share (%)",
                colorbar_label="% of words",
                vmin=0.0,
                vmax=100.0,
            ),
        ),
    ]


def write_heads_outputs(report: dict, out: str | os.PathLike) -> list[Path]:
    """Write ``OUT/heads.json``, the heatmaps (``OUT/<measure>.png`` and ``.svg``: importance,
    confidence, positional, syntactic, rare_word) and ``OUT/index.html`` linking them; the report
    gets a ``files`` list. Returns the paths written (JSON first)."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figures, written = [], []
    for stem, caption, kwargs in heatmap_values(report):
        paths = save_figure(plot_head_map(**kwargs), out / stem)
        figures.append((caption, paths[0]))
        written.extend(paths)
    meta = (
        f"model {report.get('model')} ({report['model_type']}, prior {report['prior']}); text "
        f"{report['text']['source']}; dependencies "
        f"{', '.join(s['source'] for s in report['dependencies']) or 'none'}; seed {report['seed']}"
    )
    index = write_index(
        out,
        "Attention heads: importance and roles",
        [("layers × heads", figures)],
        meta=meta,
        notes=list(f"{k}: {v}" for k, v in PROTOCOL.items()),
    )
    json_path = out / "heads.json"
    written = [json_path, *written, index]
    report["files"] = [str(p) for p in written]
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return written
