"""The inside algorithm of a binary PCFG in log space, batched over sentences, vectorised over spans.

The grammar is Kim, Dyer & Rush's (ACL 2019, §2.1, "Compound Probabilistic Context-Free Grammars for
Grammar Induction"): a root rule ``S -> A`` (A a nonterminal), binary rules ``A -> B C`` whose children
are nonterminals over spans of two or more words and preterminals over one word, and emissions
``T -> w``. Symbols are numbered nonterminals first, then preterminals: ``0 .. NT-1`` and
``NT .. NT+T-1`` (``A = NT + T`` in all), as the authors' ``PCFG.py`` orders them.

The chart holds per width ``w`` the inside scores ``beta_w[b, s, a] = log p(words s .. s+w-1 | a)``
``(B, N-w+1, A)``: for ``w = 1`` the emissions of the preterminals (nonterminals -inf), for ``w >= 2``

    beta_w[s, a] = log sum_{k=1}^{w-1} sum_{b,c} exp(beta_k[s, b] + beta_{w-k}[s+k, c] + log p(a -> b c))
                   + phi[s, s+w]                                  (preterminals -inf)

(Kim et al. §2.2; Baker 1979), one loop over widths, every start and split point of a width at once.
The sum over the children is two matrix products in probability space after subtracting each child's
largest score (exact, no underflow of the children's scores): ``sum_c exp(beta_right[c]) p(a -> b c)``
then ``sum_b exp(beta_left[b]) * that``. ``phi`` is an optional additive log-potential per span of two
or more words (zeros: the span marginals are its gradient, :func:`span_marginals`). The same recursion
with ``max`` for both sums is the Viterbi score (:func:`viterbi_spans`).

Padding: sentences shorter than the batch's ``N`` read their score at ``beta_{n}[0]``; spans inside a
sentence never reach its padding, so padding changes nothing (the padded emissions must be finite).

Memory: the chart is O(N² A) per sentence; under autograd every width keeps its children and products,
O(N³ NT A / 6) in all (a 300-word sentence at 10 nonterminals and 20 preterminals: about 1.3 G floats).
With ``checkpoint=True`` each width's children and products are recomputed in the backward pass
(``torch.utils.checkpoint``) instead of kept: memory O(N² A) for the chart plus one width's products,
at most ``N² NT A / 4`` (a 1,000-word sentence at that size: 75 M floats), for about a third more time.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint as recompute

NEG_INF = float("-inf")
#: the most scores :func:`_max_children` forms at once (split points are taken in chunks below it)
MAX_CHUNK = 1 << 24


def _children(chart: list[Tensor], width: int) -> tuple[Tensor, Tensor]:
    """The left and right children of every span of ``width``: ``(B, S, K, A)`` each, S starts, K = width-1
    split points (left child of ``k`` words at ``s``, right child of ``width - k`` words at ``s + k``)."""
    count = chart[0].shape[1] - width + 1  # chart[w - 1] holds the N - w + 1 spans of w words
    left = torch.stack([chart[k - 1][:, :count] for k in range(1, width)], dim=2)
    right = torch.stack([chart[width - k - 1][:, k : k + count] for k in range(1, width)], dim=2)
    return left, right


def _sum_children(left: Tensor, right: Tensor, rules: Tensor) -> Tensor:
    """``log sum_k sum_{b,c} exp(left[k, b] + right[k, c]) p(a -> b c)``: ``(B, S, NT)``.

    Args: left, right ``(B, S, K, A)``; rules ``(B | 1, NT, A, A)`` log-probabilities.
    """
    b, s, k, a = left.shape
    nt = rules.shape[1]
    left_max = left.amax(-1, keepdim=True).clamp_min(-1e30)  # (B, S, K, 1); -inf rows stay at 0 below
    right_max = right.amax(-1, keepdim=True).clamp_min(-1e30)
    left_p, right_p = (left - left_max).exp(), (right - right_max).exp()  # (B, S, K, A)
    probs = rules.exp().expand(b, nt, a, a).reshape(b, nt * a, a).transpose(1, 2)  # (B, A_c, NT * A_b)
    inner = torch.bmm(right_p.reshape(b, s * k, a), probs).view(b, s, k, nt, a)  # sum over c
    total = (inner * left_p.unsqueeze(3)).sum(-1)  # (B, S, K, NT): sum over b
    scores = total.clamp_min(torch.finfo(total.dtype).tiny).log() + left_max + right_max
    return scores.logsumexp(2)


def _max_children(left: Tensor, right: Tensor, rules: Tensor) -> Tensor:
    """``max_k max_{b,c} left[k, b] + right[k, c] + log p(a -> b c)``: ``(B, S, NT)``; split points in
    chunks of at most :data:`MAX_CHUNK` scores (memory ``B S k NT A²`` per chunk)."""
    b, s, k, a = left.shape
    per_split = b * s * rules.shape[1] * a * a
    step = max(1, MAX_CHUNK // max(per_split, 1))
    tops = []
    for first in range(0, k, step):
        l, r = left[:, :, first : first + step], right[:, :, first : first + step]  # (B, S, k', A)
        scores = l[..., None, :, None] + r[..., None, None, :] + rules[:, None, None]  # (B, S, k', NT, A, A)
        tops.append(scores.flatten(-2).max(-1).values)  # (B, S, k', NT)
    return torch.cat(tops, dim=2).max(2).values  # one argmax split (the first): its gradient is one-hot


def _width_scores(combine, width: int, rules: Tensor, *chart: Tensor) -> Tensor:
    """Every span of ``width``'s nonterminal scores from the chart's narrower widths: ``(B, S, NT)``."""
    left, right = _children(list(chart), width)
    return combine(left, right, rules)


def inside(
    emissions: Tensor,
    rules: Tensor,
    roots: Tensor,
    lengths: Tensor,
    potentials: Tensor | None = None,
    semiring: str = "log",
    checkpoint: bool = False,
) -> Tensor:
    """The log partition function ``log p(words)`` of each sentence (module docstring), or with
    ``semiring="max"`` the log-probability of its most probable tree (Viterbi).

    Args:
        emissions: ``(B, N, T)`` log p(word_i | preterminal t) (finite, padding included).
        rules: ``(B | 1, NT, A, A)`` log p(a -> b c), ``A = NT + T``, nonterminals first.
        roots: ``(B | 1, NT)`` log p(S -> a).
        lengths: ``(B,)`` words per sentence (``2 .. N``; a one-word sentence has probability 0 under
            this grammar: its score is -inf).
        potentials: ``(B, N+1, N+1)`` an additive log-potential per span ``(s, e)`` of two or more words
            (None: none).
        semiring: ``"log"`` (sum: the inside algorithm) or ``"max"`` (Viterbi).
        checkpoint: recompute each width's children and products in the backward pass instead of
            keeping them (module docstring, memory); the same scores and gradients.
    Returns:
        ``(B,)`` scores in nats.
    Raises:
        ValueError: an unknown semiring, or shapes that do not agree.
    """
    if semiring not in ("log", "max"):
        raise ValueError(f"unknown semiring {semiring!r}: log or max")
    batch, n, t = emissions.shape
    nt = rules.shape[1]
    if rules.shape[-1] != nt + t or roots.shape[-1] != nt:
        raise ValueError(f"rules {tuple(rules.shape)} and roots {tuple(roots.shape)} do not fit {t} preterminals")
    combine = _sum_children if semiring == "log" else _max_children
    chart = [torch.cat([emissions.new_full((batch, n, nt), NEG_INF), emissions], dim=-1)]  # width 1: (B, N, A)
    tops = [chart[0][:, 0, :nt]]  # per width the nonterminals' scores of the span starting at 0
    for width in range(2, n + 1):
        if checkpoint and torch.is_grad_enabled():
            beta = recompute(_width_scores, combine, width, rules, *chart, use_reentrant=False)
        else:
            beta = _width_scores(combine, width, rules, *chart)  # (B, S, NT)
        if potentials is not None:
            starts = torch.arange(beta.shape[1], device=beta.device)
            beta = beta + potentials[:, starts, starts + width].unsqueeze(-1)
        chart.append(torch.cat([beta, beta.new_full((*beta.shape[:2], t), NEG_INF)], dim=-1))
        tops.append(beta[:, 0])
    top = torch.stack(tops, dim=1)  # (B, N, NT)
    whole = top.gather(1, (lengths - 1).view(batch, 1, 1).expand(batch, 1, nt)).squeeze(1) + roots  # (B, NT)
    return whole.logsumexp(-1) if semiring == "log" else whole.max(-1).values  # max: one argmax


def _span_gradient(emissions, rules, roots, lengths, semiring: str, checkpoint: bool) -> tuple[Tensor, Tensor]:
    """:func:`inside`'s score and its gradient with respect to a zero potential on every span; runs with
    autograd on even under ``torch.no_grad`` or ``torch.inference_mode`` (the inputs are copied out of
    it; no gradient reaches them)."""
    batch, n, _ = emissions.shape
    with torch.inference_mode(False), torch.enable_grad():
        emissions, rules, roots, lengths = (x.detach().clone() for x in (emissions, rules, roots, lengths))
        potentials = emissions.new_zeros(batch, n + 1, n + 1, requires_grad=True)
        score = inside(emissions, rules, roots, lengths, potentials, semiring=semiring, checkpoint=checkpoint)
        (grad,) = torch.autograd.grad(score.sum(), potentials)
    return score.detach(), grad


def span_marginals(
    emissions: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor, checkpoint: bool = False
) -> tuple[Tensor, Tensor]:
    """The posterior probability of every span of two or more words, ``p((s, e) in tree | words)``, as
    the gradient of ``log Z`` with respect to a zero potential on the span (Eisner 2016, "Inside-outside
    and forward-backward algorithms are just backprop"; Kim et al. §4 decode with these marginals).

    Args: as :func:`inside`. Returns: ``(log_z (B,), marginals (B, N+1, N+1))``: ``marginals[b, s, e]``
    for ``e - s >= 2`` inside the sentence (the whole sentence 1), else 0. No gradient flows back.
    """
    return _span_gradient(emissions, rules, roots, lengths, "log", checkpoint)


def viterbi_spans(
    emissions: Tensor, rules: Tensor, roots: Tensor, lengths: Tensor, checkpoint: bool = False
) -> tuple[Tensor, Tensor]:
    """The most probable tree of each sentence: its log-probability and its spans, as the gradient of the
    max-semiring score with respect to a zero span potential (the max's gradient is 1 on the argmax
    tree's spans and 0 elsewhere; ties go to one argmax, the first index ``max`` returns).

    Args: as :func:`inside`. Returns: ``(score (B,), spans (B, N+1, N+1))`` with 1 on the Viterbi tree's
    spans of two or more words (the whole sentence included), 0 elsewhere.
    """
    return _span_gradient(emissions, rules, roots, lengths, "max", checkpoint)


__all__ = ["inside", "span_marginals", "viterbi_spans"]
