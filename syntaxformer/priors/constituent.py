"""Constituent attention: the Tree Transformer's constituent prior (Wang, Lee & Chen, EMNLP 2019).

Every layer l of the Tree Transformer multiplies its heads' attention by a *constituent prior*
``C^l`` (N×N, symmetric, shared by the heads), built from *link probabilities* ``a^l_k`` between
neighbouring words ``k`` and ``k+1``. The equations, each in one small function below:

* neighbouring attention (paper §3.2, eqs. 5-7): scores of each word with its two neighbours, a
  two-way softmax, and the link probability ``â_k = sqrt(p_{k,k+1} · p_{k+1,k})``;
* the hierarchical constraint (§3.2, eq. 8): ``a^l_k = a^{l-1}_k + (1 - a^{l-1}_k) â^l_k``;
* the prior (§3.1, eqs. 3-4): ``C_ij = prod_{k=i}^{j-1} a_k`` for i < j, symmetric, ``C_ii = 1``,
  computed in log space as ``log C_ij = -|P_i - P_j|`` with the cumulative sums
  ``P_j = sum_{k<j} log a_k`` (O(N) state per sentence, no N×N×N products).

Two variants (``variant=``):

``"paper"``
    the equations above, with padding treated as the sentence edge: the last real word's right
    neighbour is padding, so its two-way softmax has one candidate (p = 1). Gaps that touch padding
    get ``a = 0`` and contribute nothing to ``P`` (P is constant over the padding).
``"official"``
    the authors' public code (github.com/yaushian/Tree-Transformer, ``attention.py``,
    ``GroupAttention``), read for DESIGN.md §1.2 and re-implemented here (not copied):

    - neighbour scores divided by the constant 256 instead of d_model/2 (equal at d_model 512);
    - ``â = sqrt(p_{k,k+1} p_{k+1,k} + 1e-9)``, and ``log(a + 1e-9)`` when summing the logs;
    - off-diagonal ``C_ij = prod (a_k + 1e-9) + 1e-9`` (the code adds 1e-9 to every off-diagonal
      entry), so ``C`` never falls below 1e-9;
    - the diagonal of ``C`` is not 1: the code fills it with the diagonal of its N×N
      "neighbour attention" matrix, which is ``sqrt(0·0 + 1e-9)`` (a word is masked out of its own
      neighbour softmax) passed through the hierarchical constraint layer after layer, i.e.
      ``C^l_ii = 1 - (1 - sqrt(1e-9))^l`` (3.16e-5 at layer 1, ~3.16e-5 more per layer): a word barely
      attends to itself. ``layer_index`` (0-based) gives ``l = layer_index + 1``.
    - padding: the code masks padding *keys* of the neighbour softmax, so the last real word has one
      candidate (p = 1, as the paper variant), and a gap that touches padding gets
      ``â = sqrt(0 + 1e-9)``; we return that value for every padding gap (the public code's value for
      a gap between two padding tokens differs, and never reaches a real token). The first token
      (the public code prepends ``[CLS]``) has one neighbour, p = 1, in both variants: prepending
      ``[CLS]`` is the tokenizer's business, and its gap 0 is then a link ``[CLS]``-first word.

Padding never leaks into real tokens in either variant: real-real entries of ``C`` only involve
links between real words. (Real-padding entries are finite; the attention masks padding keys.)

The fast paths of these equations (eq. 5 as one bilinear form, eqs. 6-8 and ``P`` fused with a
hand-written backward, the closed-form gradient of ``log C``; the Triton kernels of
:mod:`syntaxformer.kernels.triton_prior`) are kernels, :mod:`syntaxformer.kernels.constituent`, chosen
once by :class:`ConstituentAttention` from the config's ``kernel`` (:data:`LINK_CHAIN_KERNELS`) and
tested against the functions here (``tests/kernels/test_kernel_table.py``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels import triton_runs_on
from ..kernels.constituent import (
    fused_link_chain,
    log_constituent_prior_vjp,
    neighbour_score_form,
    neighbour_scores_bilinear,
)
from .attention import triton_laplace_attention
from .base import MultiplicativePrior, PriorOutput, StructuralPrior

VARIANTS = ("paper", "official")
#: ``diagonal=`` choices for the diagonal of ``C``: "one" (the paper's ``C_ii = 1``) or "official" (the
#: public code's tiny value, :func:`official_log_diagonal`); by default each variant's own.
DIAGONALS = ("one", "official")


def check_constituent_options(
    variant: str, scale: float | None = None, diagonal: str | None = None, kernel: str = "reference"
) -> None:
    """Check a constituent prior's options (the config fields ``constituent_variant``,
    ``constituent_scale``, ``constituent_diagonal``, ``kernel``; :class:`ConstituentAttention`'s
    arguments).

    Raises:
        ValueError: ``variant`` not in :data:`VARIANTS`, ``diagonal`` neither None nor in
            :data:`DIAGONALS`, ``scale`` neither None nor > 0, or ``kernel`` not a key of
            :data:`LINK_CHAIN_KERNELS`.
    """
    if kernel not in LINK_CHAIN_KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; expected one of {tuple(LINK_CHAIN_KERNELS)}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown constituent_variant {variant!r}; expected one of {VARIANTS}")
    if diagonal is not None and diagonal not in DIAGONALS:
        raise ValueError(f"unknown constituent_diagonal {diagonal!r}; expected one of {DIAGONALS}")
    if scale is not None and not scale > 0:
        raise ValueError(f"constituent_scale (the neighbour-score divisor) must be > 0, got {scale}")


#: the public code's epsilon in ``sqrt(p·p + eps)``, ``log(a + eps)`` and ``C + eps``.
OFFICIAL_EPS = 1e-9
#: the public code's constant neighbour-score scale (the paper: d_model / 2).
OFFICIAL_SCALE = 256.0


# ----------------------------------------------------------------------------------------------
# The equations, one function each
# ----------------------------------------------------------------------------------------------


def neighbour_scores(query: torch.Tensor, key: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores of each word with its right and left neighbour (paper §3.2, eq. 5).

    ``s_{i,i+1} = q_i · k_{i+1} / scale`` and ``s_{i+1,i} = q_{i+1} · k_i / scale``, with
    ``scale = d_model / 2`` (paper) or 256 (public code). Only the 2(N-1) neighbour dot products are
    computed, never an N×N score matrix.

    Args:
        query, key: (B, N, d) projections of the (normalised) layer input.
        scale: the divisor.
    Returns:
        ``(s_right, s_left)``, each (B, N-1), indexed by gap k: ``s_right[:, k] = s_{k,k+1}`` (word k
        looks right), ``s_left[:, k] = s_{k+1,k}`` (word k+1 looks left).
    """
    s_right = (query[:, :-1] * key[:, 1:]).sum(-1) / scale  # (B, N-1)
    s_left = (query[:, 1:] * key[:, :-1]).sum(-1) / scale  # (B, N-1)
    return s_right, s_left


def neighbour_log_probabilities(
    s_right: torch.Tensor, s_left: torch.Tensor, gap_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two-way softmax of each word over its neighbours, in log space (paper §3.2, eq. 6).

    Word i chooses between its right neighbour (score ``s_{i,i+1}``) and its left one
    (``s_{i,i-1}``): ``p_{i,i+1} = softmax(s_{i,i+1}, s_{i,i-1})[0]``. A word with a single real
    neighbour (the sentence edges, and the last real word before padding) puts p = 1 on it.

    Args:
        s_right, s_left: (B, N-1) from :func:`neighbour_scores`.
        gap_mask: (B, N-1) bool, True where words k and k+1 are both real tokens.
    Returns:
        ``(log_p_right, log_p_left)``, (B, N-1) log-probabilities by gap k:
        ``log p_{k,k+1}`` and ``log p_{k+1,k}``. Values at gaps that are not real are meaningless
        (finite) and must be masked by the caller.
    """
    # word k's alternative to looking right is looking left, at gap k-1 (valid only if gap k-1 is real)
    left_of_k = F.pad(s_left[:, :-1], (1, 0))  # (B, N-1): s_{k,k-1}
    has_left = F.pad(gap_mask[:, :-1], (1, 0), value=False)
    log_p_right = torch.where(has_left, F.logsigmoid(s_right - left_of_k), torch.zeros_like(s_right))
    # word k+1's alternative to looking left is looking right, at gap k+1
    right_of_k1 = F.pad(s_right[:, 1:], (0, 1))  # (B, N-1): s_{k+1,k+2}
    has_right = F.pad(gap_mask[:, 1:], (0, 1), value=False)
    log_p_left = torch.where(has_right, F.logsigmoid(s_left - right_of_k1), torch.zeros_like(s_left))
    return log_p_right, log_p_left


def link_probability(
    log_p_right: torch.Tensor, log_p_left: torch.Tensor, gap_mask: torch.Tensor, variant: str = "paper"
) -> torch.Tensor:
    """Link probability of neighbouring words from their mutual attention (paper §3.2, eq. 7).

    ``â_k = sqrt(p_{k,k+1} · p_{k+1,k})`` (paper; computed as ``exp((log p + log p) / 2)``), or
    ``sqrt(p·p + 1e-9)`` (public code). Gaps touching padding get 0 (paper) or ``sqrt(1e-9)``
    (public code: the padding key's probability is 0).

    Args:
        log_p_right, log_p_left: (B, N-1) from :func:`neighbour_log_probabilities`.
        gap_mask: (B, N-1) bool, True where both words are real.
        variant: "paper" or "official".
    Returns:
        (B, N-1) probabilities ``â`` in [0, 1].
    """
    if variant == "paper":
        a_hat = torch.exp(0.5 * (log_p_right + log_p_left))
        return a_hat.masked_fill(~gap_mask, 0.0)
    pp = torch.exp(log_p_right + log_p_left).masked_fill(~gap_mask, 0.0)
    return torch.sqrt(pp + OFFICIAL_EPS)


def hierarchical_constraint(prior: torch.Tensor | None, a_hat: torch.Tensor) -> torch.Tensor:
    """Links only strengthen with depth (paper §3.2, eq. 8).

    ``a^l_k = a^{l-1}_k + (1 - a^{l-1}_k) · â^l_k``, with ``a^{-1} = 0`` (``prior=None``).

    Args:
        prior: (B, N-1) link probabilities of the layer below, or None for the first layer.
        a_hat: (B, N-1) this layer's neighbouring-attention links.
    Returns:
        (B, N-1) link probabilities ``a^l``.
    """
    if prior is None:
        return a_hat
    return prior + (1.0 - prior) * a_hat


def cumulative_log_links(a: torch.Tensor, gap_mask: torch.Tensor, variant: str = "paper") -> torch.Tensor:
    """The O(N) state of the prior: ``P_j = sum_{k<j} log a_k`` (paper §3.1, eqs. 3-4 in log form).

    ``P_0 = 0`` and P is non-increasing. Gaps touching padding contribute 0, so ``P`` is constant over
    padding and stays finite. The paper variant floors ``a`` at the smallest normal float (so ``log``
    stays finite); the official one uses ``log(a + 1e-9)`` as the public code.

    Args:
        a: (B, N-1) link probabilities.
        gap_mask: (B, N-1) bool, True where both words are real.
        variant: "paper" or "official".
    Returns:
        (B, N) cumulative log link probabilities (nats, <= 0).
    """
    if variant == "paper":
        log_a = torch.log(a.clamp_min(torch.finfo(a.dtype).tiny))
    else:
        log_a = torch.log(a + OFFICIAL_EPS)
    log_a = log_a.masked_fill(~gap_mask, 0.0)
    return F.pad(torch.cumsum(log_a, dim=-1), (1, 0))  # (B, N)


def official_log_diagonal(layer_index: int) -> float:
    """The public code's diagonal of C at 0-based layer ``layer_index``: ``log(1 - (1 - sqrt(1e-9))^l)``.

    The public code's diagonal is ``sqrt(1e-9)`` pushed through the hierarchical constraint
    (eq. 8) once per layer; ``l = layer_index + 1``. See the module docstring.
    """
    e = math.sqrt(OFFICIAL_EPS)
    return math.log(-math.expm1((layer_index + 1) * math.log1p(-e)))


def log_constituent_prior(
    cum_log_links: torch.Tensor,
    variant: str = "paper",
    log_diagonal: float | None = None,
    rows: tuple[int, int] | None = None,
) -> torch.Tensor:
    """``log C`` from the cumulative log links (paper §3.1, eqs. 3-4).

    Paper: ``log C_ij = -|P_i - P_j|`` (so ``C_ij = prod_{k=i}^{j-1} a_k``, symmetric, ``C_ii = 1``).
    Official: ``log C_ij = log(exp(-|P_i - P_j|) + 1e-9)`` off the diagonal, 0 on it. In both, a
    ``log_diagonal`` given replaces the diagonal (the official variant's own is
    :func:`official_log_diagonal`).

    Materialises the rows asked for; the blockwise attention kernel
    (:class:`syntaxformer.kernels.attention.BlockwisePriorAttention`) asks for one block of rows
    at a time, so the whole (B, N, N) never exists there.

    Args:
        cum_log_links: (B, N) from :func:`cumulative_log_links`.
        variant: "paper" or "official".
        log_diagonal: ``log C_ii`` (nats, <= 0), or None for the variant's formula (0 in both).
        rows: ``(start, stop)``: only rows ``start:stop`` (half-open; query words), or None for all.
    Returns:
        (B, N, N), or (B, stop - start, N) with ``rows``: log prior (nats, <= 0).
    """
    n = cum_log_links.shape[-1]
    start, stop = rows if rows is not None else (0, n)
    log_c = -(cum_log_links[:, start:stop, None] - cum_log_links[:, None, :]).abs()  # (B, rows, N)
    if variant == "official":
        log_c = torch.logaddexp(log_c, torch.full_like(log_c, math.log(OFFICIAL_EPS)))
        log_diagonal = 0.0 if log_diagonal is None else log_diagonal
    if log_diagonal is None:
        return log_c
    positions = torch.arange(n, device=log_c.device)
    diagonal = positions[start:stop, None] == positions[None, :]  # (rows, N)
    return log_c.masked_fill(diagonal, log_diagonal)


# ----------------------------------------------------------------------------------------------
# The link chain (eqs. 5-8 and P), one function per kernel
# ----------------------------------------------------------------------------------------------


def layer_neighbour_scores(
    h: torch.Tensor, query: nn.Linear, key: nn.Linear, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 5 of a layer from its normalised input ``h`` (B, N, d): :func:`neighbour_scores` of the two
    projections for few tokens; for many (B·N > d) the same scores as one d×d product per token
    (:func:`~syntaxformer.kernels.constituent.neighbour_scores_bilinear`, plus d³ per call to form
    ``W_qᵀ W_k``), which then costs less than the two projections. The same function either way (float
    rounding differs). Returns ``(s_right, s_left)``, (B, N-1) each."""
    batch, n, d = h.shape
    if batch * n > d:
        return neighbour_scores_bilinear(h, *neighbour_score_form(query, key, scale))
    return neighbour_scores(query(h), key(h), scale)


def reference_link_chain(
    h: torch.Tensor,
    query: nn.Linear,
    key: nn.Linear,
    scale: float,
    gap_mask: torch.Tensor,
    prior: torch.Tensor | None,
    variant: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Link probabilities ``a^l`` and their cumulative logs ``P`` from the equations, with autograd
    (``kernel="reference"``).

    Args:
        h: (B, N, d) the normalised layer input.
        query, key: the prior's ``nn.Linear(d, d)`` projections. scale: eq. 5's divisor.
        gap_mask: (B, N-1) bool, True where both words are real.
        prior: (B, N-1) link probabilities of the layer below, or None.
        variant: "paper" or "official".
    Returns:
        ``(a, P)``: (B, N-1) link probabilities and (B, N) cumulative log links.
    """
    s_right, s_left = layer_neighbour_scores(h, query, key, scale)  # eq. 5, (B, N-1) each
    log_p_right, log_p_left = neighbour_log_probabilities(s_right, s_left, gap_mask)  # eq. 6, (B, N-1) each
    a_hat = link_probability(log_p_right, log_p_left, gap_mask, variant)  # eq. 7, (B, N-1)
    a = hierarchical_constraint(prior, a_hat)  # eq. 8, (B, N-1)
    return a, cumulative_log_links(a, gap_mask, variant)  # (B, N-1), (B, N)


def fused_link_chain_of(
    h: torch.Tensor,
    query: nn.Linear,
    key: nn.Linear,
    scale: float,
    gap_mask: torch.Tensor,
    prior: torch.Tensor | None,
    variant: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`reference_link_chain` with eqs. 6-8 and ``P`` as one function with a hand-written backward
    (:func:`~syntaxformer.kernels.constituent.fused_link_chain`; ``kernel="fused"``): the same forward
    values bit for bit, gradients within float rounding. Arguments and returns as
    :func:`reference_link_chain`."""
    s_right, s_left = layer_neighbour_scores(h, query, key, scale)  # eq. 5, (B, N-1) each
    return fused_link_chain(s_right, s_left, gap_mask, prior, variant, eps=OFFICIAL_EPS)


def triton_link_chain(
    h: torch.Tensor,
    query: nn.Linear,
    key: nn.Linear,
    scale: float,
    gap_mask: torch.Tensor,
    prior: torch.Tensor | None,
    variant: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eqs. 5-8 and ``P`` as Triton kernels (:func:`~syntaxformer.kernels.triton_prior.triton_prior_chain`,
    eq. 5 as the undivided bilinear form ``h M``; ``kernel="triton"``) where
    :func:`~syntaxformer.kernels.triton_runs_on` ``h``'s device; elsewhere :func:`fused_link_chain_of`, bit
    for bit. Arguments and returns as :func:`reference_link_chain`."""
    if not triton_runs_on(h.device):
        return fused_link_chain_of(h, query, key, scale, gap_mask, prior, variant)
    # Triton, an optional dependency: imported only where it runs (triton_runs_on)
    from ..kernels.triton_prior import triton_prior_chain

    bilinear, linear, offset = neighbour_score_form(query, key)  # undivided: the kernels divide
    return triton_prior_chain(h @ bilinear, h, linear, offset, gap_mask, prior, variant, OFFICIAL_EPS, scale)


#: the config's ``kernel`` -> the link chain :meth:`ConstituentAttention.link_probabilities` calls
#: (:mod:`syntaxformer.models.kernel_choice`); each takes and returns as :func:`reference_link_chain`
LINK_CHAIN_KERNELS = {
    "reference": reference_link_chain,
    "fused": fused_link_chain_of,
    "triton": triton_link_chain,
}


class ConstituentPrior(MultiplicativePrior):
    """The O(N) description of one layer's constituent prior ``C`` (what attention kernels consume).

    A :class:`~syntaxformer.priors.base.MultiplicativePrior` whose state is ``P`` and whose rows are
    :func:`log_constituent_prior`.

    Args:
        cum_log_links: (B, N) ``P`` (see :func:`cumulative_log_links`).
        variant: "paper" or "official".
        log_diagonal: ``log C_ii`` (None: 0, the paper's ``C_ii = 1``).
        kernel: the config's ``kernel``. "fused" and "triton" offer :attr:`log_rows_vjp` (the
            closed-form gradient of the rows,
            :func:`~syntaxformer.kernels.constituent.log_constituent_prior_vjp`), which the blockwise
            attention kernel then uses instead of autograd through :meth:`_log_rows`; "reference": None.
            "triton" also gives :attr:`laplace_form` and, as the prior's ``attention``,
            :func:`~syntaxformer.priors.attention.triton_laplace_attention`.
    """

    def __init__(
        self,
        cum_log_links: torch.Tensor,
        variant: str = "paper",
        log_diagonal: float | None = None,
        kernel: str = "reference",
    ):
        self.variant = variant
        self.log_diagonal = log_diagonal
        triton = kernel == "triton"
        super().__init__(cum_log_links, self._log_rows, triton_laplace_attention if triton else None)
        #: ``(state, rows, grad_rows) -> grad_state`` or None (see ``kernel``)
        self.log_rows_vjp = self._log_rows_vjp if kernel != "reference" else None
        #: with ``kernel="triton"``, ``(eps, diagonal)`` such that ``C_ij = exp(-|P_i - P_j|) + eps`` for
        #: i ≠ j and ``C_ii = diagonal``: the form the Triton attention kernel computes
        #: (:func:`~syntaxformer.kernels.triton_prior.laplace_prior_attention`); else None
        self.laplace_form = self._laplace_form() if triton else None

    @property
    def cum_log_links(self) -> torch.Tensor:
        """(B, N) ``P``: the prior's state."""
        return self.state

    def _laplace_form(self) -> tuple[float, float]:
        eps = OFFICIAL_EPS if self.variant == "official" else 0.0
        log_diagonal = self.log_diagonal if self.log_diagonal is not None else 0.0
        return eps, math.exp(log_diagonal)

    def _log_rows(self, cum_log_links: torch.Tensor, rows: tuple[int, int] | None = None) -> torch.Tensor:
        return log_constituent_prior(cum_log_links, self.variant, self.log_diagonal, rows)

    def _log_rows_vjp(self, cum_log_links: torch.Tensor, rows, grad_rows: torch.Tensor) -> torch.Tensor:
        return log_constituent_prior_vjp(
            cum_log_links, grad_rows, self.variant, self.log_diagonal, rows, eps=OFFICIAL_EPS
        )


# ----------------------------------------------------------------------------------------------
# The module
# ----------------------------------------------------------------------------------------------


class ConstituentAttention(StructuralPrior):
    """Tree Transformer constituent attention: link probabilities and the constituent prior of a layer.

    The registry's ``"constituent"`` prior (:mod:`syntaxformer.priors`): its :meth:`forward` gets the
    layer input, the padding mask and the link probabilities of the layer below, and returns the
    multiplicative prior ``C`` (O(N) state ``P``), this layer's links as the next layer's state, and
    ``record = {"link_probs": a}``.

    Submodules ``norm`` (LayerNorm of the module's input), ``query`` and ``key``
    (``nn.Linear(d_model, d_model)``, separate from the attention heads' projections).

    Args:
        d_model: hidden size.
        variant: "paper" (the equations) or "official" (the authors' public code; module docstring).
        layer_index: 0-based layer of this module; only the official diagonal uses it.
        layer_norm_eps: epsilon of ``norm``.
        scale: the divisor of the neighbour scores (eq. 5); None = the variant's (paper ``d_model / 2``,
            official 256). With ``diagonal`` it separates the two parts of the official variant that
            change the prior (docs/results/induce/recipes.md, "Which part of the official variant matters").
        diagonal: ``C_ii``: "one" (the paper) or "official" (the public code's tiny value, so a word
            barely attends to itself); None = the variant's.
        kernel: a key of :data:`LINK_CHAIN_KERNELS`, resolved here into :attr:`link_chain`:
            "reference" (autograd through each equation), "fused" (the fused kernels of
            :mod:`syntaxformer.kernels.constituent`: :func:`~syntaxformer.kernels.constituent.fused_link_chain`
            and :func:`~syntaxformer.kernels.constituent.log_constituent_prior_vjp`: the same function,
            float rounding differs) or "triton" (the Triton kernels of
            :mod:`syntaxformer.kernels.triton_prior` for the link chain and, through the
            :class:`ConstituentPrior`'s ``attention``, the attention, where
            :func:`~syntaxformer.kernels.triton_runs_on` the input's device; elsewhere as "fused").
    Raises:
        ValueError: unknown ``variant``, ``diagonal`` or ``kernel``, or ``scale`` <= 0.
    """

    def __init__(
        self,
        d_model: int,
        variant: str = "paper",
        layer_index: int = 0,
        layer_norm_eps: float = 1e-5,
        scale: float | None = None,
        diagonal: str | None = None,
        kernel: str = "reference",
    ):
        super().__init__()
        check_constituent_options(variant, scale, diagonal, kernel)
        self.kernel = kernel
        #: eqs. 5-8 and ``P`` (:data:`LINK_CHAIN_KERNELS`), what :meth:`link_probabilities` calls
        self.link_chain = LINK_CHAIN_KERNELS[kernel]
        self.d_model = d_model
        self.variant = variant
        self.layer_index = layer_index
        self.scale = float(scale) if scale is not None else d_model / 2.0 if variant == "paper" else OFFICIAL_SCALE
        self.diagonal = diagonal or ("official" if variant == "official" else "one")
        self.log_diagonal = official_log_diagonal(layer_index) if self.diagonal == "official" else None
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)

    def link_probabilities(
        self, hidden: torch.Tensor, mask: torch.Tensor | None = None, prior: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Link probabilities ``a^l`` (eqs. 5-8) and their cumulative logs ``P`` (O(N) prior state).

        Args:
            hidden: (B, N, d) layer input.
            mask: (B, N) bool, True = real token (None: all real).
            prior: (B, N-1) link probabilities of the layer below, or None.
        Returns:
            ``(a, P)``: (B, N-1) link probabilities and (B, N) cumulative log links.
        """
        B, N, _ = hidden.shape
        if mask is None:
            mask = torch.ones(B, N, dtype=torch.bool, device=hidden.device)
        mask = mask.bool()
        gap_mask = mask[:, :-1] & mask[:, 1:]  # (B, N-1)
        h = self.norm(hidden)  # (B, N, d)
        # eqs. 5-8 and P by the kernel chosen at construction (LINK_CHAIN_KERNELS)
        return self.link_chain(h, self.query, self.key, self.scale, gap_mask, prior, self.variant)

    record_names = ("link_probs",)

    @classmethod
    def from_config(cls, config, layer_index: int) -> ConstituentAttention:
        """The module of 0-based layer ``layer_index`` (``hidden_size``, ``constituent_variant``,
        ``layer_norm_eps``, ``constituent_scale``, ``constituent_diagonal``, ``kernel`` of a
        :class:`~syntaxformer.models.tree_transformer.TreeTransformerConfig`; a config without
        ``kernel``: "reference")."""
        return cls(
            config.hidden_size,
            getattr(config, "constituent_variant", "paper"),
            layer_index,
            config.layer_norm_eps,
            getattr(config, "constituent_scale", None),
            getattr(config, "constituent_diagonal", None),
            getattr(config, "kernel", "reference"),
        )

    def prior_state(
        self, hidden: torch.Tensor, mask: torch.Tensor | None = None, prior: torch.Tensor | None = None
    ) -> tuple[ConstituentPrior, torch.Tensor]:
        """Like :meth:`constituent_prior` without materialising C: ``(ConstituentPrior, a)``; O(N) per sentence."""
        a, cum = self.link_probabilities(hidden, mask, prior)
        return ConstituentPrior(cum, self.variant, self.log_diagonal, self.kernel), a

    def forward(
        self, hidden: torch.Tensor, key_mask: torch.Tensor, state: torch.Tensor | None = None, inputs=None
    ) -> PriorOutput:
        """The prior interface (:class:`~syntaxformer.priors.base.StructuralPrior`): hidden (B, N, d),
        key_mask (B, N) bool, state = (B, N-1) links of the layer below or None (``inputs``, the
        structure inputs, ignored) -> the multiplicative prior C, next state a^l (B, N-1) and
        ``record["link_probs"]`` = a^l."""
        prior, a = self.prior_state(hidden, key_mask, state)
        return PriorOutput(multiplicative=prior, state=a, record={"link_probs": a})

    def constituent_prior(
        self, hidden: torch.Tensor, mask: torch.Tensor | None = None, prior: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Constituent prior and link probabilities of this layer.

        Args:
            hidden: (B, N, d) layer input (normalised inside by ``norm``).
            mask: (B, N) bool, True = real token (None: all real).
            prior: (B, N-1) link probabilities ``a^{l-1}`` of the layer below, or None (first layer).
        Returns:
            ``(C, a)``: (B, N, N) constituent prior (probabilities, symmetric) and (B, N-1) link
            probabilities ``a^l`` (after the hierarchical constraint).
        """
        state, a = self.prior_state(hidden, mask, prior)
        return torch.exp(state.log_prior()), a

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, variant={self.variant!r}, scale={self.scale}, "
            f"diagonal={self.diagonal!r}, layer_index={self.layer_index}"
            + (f", kernel={self.kernel!r}" if self.kernel != "reference" else "")
        )
