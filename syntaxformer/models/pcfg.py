"""Neural and Compound PCFGs: a grammar whose rule probabilities come from networks over symbol embeddings.

Kim, Dyer & Rush, "Compound Probabilistic Context-Free Grammars for Grammar Induction", ACL 2019
(arXiv 1906.10225); the authors' code harvardnlp/compound-pcfg (``models.py``, ``PCFG.py``,
``train.py``; read, not copied). DESIGN.md §10 lists every difference from that code.

* **Neural PCFG** (§2.1, eqs. 1-3): ``NT`` nonterminals, ``T`` preterminals, each a learned embedding
  ``w_N`` of ``symbol_dim``; ``p(S -> A) = softmax(u_A^T f_s(w_S))``, ``p(A -> B C) = softmax(u_BC^T
  w_A)`` (one linear layer onto the ``(NT+T)²`` child pairs), ``p(T -> w) = softmax(u_w^T f_t(w_T))``
  with ``f_s``, ``f_t`` two residual layers (the authors' ``ResidualLayer``) between linear layers.
  A child over one word is a preterminal, over two or more a nonterminal (the authors' chart).
* **Compound PCFG** (§2.2-2.3): a sentence-level latent ``z ~ N(0, I)`` of ``z_dim`` is appended to
  every symbol embedding, so the rule probabilities are the sentence's own; trained by the evidence
  lower bound ``E_q[log p(x | z)] - KL(q(z | x) || N(0, I))`` (eq. 5) with ``q`` a diagonal Gaussian
  from the max-pooled states of a bidirectional LSTM over the words (one reparameterised sample per
  sentence in training).
* ``log p(x | z)`` is the inside algorithm (:func:`syntaxformer.blocks.inside.inside`).
* **Loss**: in training the mean over sentences of ``-log p(x) (+ KL)`` (the authors' ``(nll +
  kl).mean()``, which their clipping threshold of 3 is for); in evaluation the sum over the batch
  divided by its ``n + 1`` words per sentence (the end of the sentence counted, as the authors count
  it), so ``exp`` of the validation loss is the paper's perplexity (an upper bound for the compound
  variant, with a sampled ``z``, as the authors' ``eval``).
* **Length curriculum** (§4: start at 30 words, one more per epoch): in training a sentence longer than
  :meth:`PcfgForLanguageModel.curriculum_length` words adds nothing to the loss and is not parsed; the
  trainer tells the model the epoch (:meth:`PcfgForLanguageModel.set_epoch`). Sentences of one word are
  skipped (the grammar cannot generate them; the authors skip them too).
* **Decoding** (:meth:`PcfgForLanguageModel.induce`): the span marginals ``p((i, j) in tree | x)``
  (gradient of ``log Z``), decoded by default as the **max-marginal tree** (the binary tree of largest
  sum of span marginals, by CKY: :class:`~syntaxformer.structures.SpanMarginals`), and the Viterbi
  tree; for the compound variant with ``z`` = the posterior mean (the authors' ``eval.py``).

Inputs are the causal-LM objective's framed sentences ``[CLS] w_1 .. w_n [CLS]`` in ``forward`` (the
frame is dropped) and plain words in ``induce``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from syntaxformer.blocks.inside import inside, span_marginals, viterbi_spans
from syntaxformer.structures import SpanMarginals

#: the longest sentence a PCFG parser takes (:attr:`syntaxformer.parser.TreeParser.max_words`): the chart's
#: time grows as the cube of the length (a 400-word sentence at the ``cpu`` size took 85 s on one loaded CPU
#: thread, so 300 words about 35 s and 2,000 words hours); an ensemble's PCFG member abstains on longer ones
MAX_PARSE_WORDS = 300
#: ``induce`` parses sentences in groups whose widest width's products, ``B n² NT A / 4`` floats, stay
#: under this (one sentence at a time if need be) ...
INDUCE_WIDTH_FLOATS = 1 << 25
#: ... and a group whose products over all widths, ``B n³ NT A / 6`` floats, would exceed this under
#: autograd recomputes them in the backward pass (:func:`~syntaxformer.blocks.inside.inside`'s
#: ``checkpoint``): any length parses, in O(n² A) memory for one sentence, in O(n³) time
INDUCE_KEEP_FLOATS = 1 << 28
NEURAL_NAME = "neural-pcfg"
COMPOUND_NAME = "compound-pcfg"


class NeuralPcfgConfig(PretrainedConfig):
    """Configuration of :class:`NeuralPcfgForLanguageModel` (defaults: the paper's, §4).

    Args:
        vocab_size: words the preterminals emit.
        nonterminals: ``NT`` (paper 30).
        preterminals: ``T`` (paper 60).
        symbol_dim: symbol embedding width (paper 256).
        z_dim: the compound latent's width (0: the neural PCFG; the compound PCFG 64).
        encoder_word_dim, encoder_hidden: the variational posterior's word embedding and LSTM width
            (paper 512, 512; compound only).
        curriculum_start: the longest training sentence in words in the first epoch (paper 30).
        curriculum_increment: words added per epoch (paper 1).
        curriculum_final: the longest training sentence after the curriculum (the authors' 40).
        induce_viterbi: ``induce`` also finds the Viterbi tree (the second decoder; about ten times the
            cost of the span marginals at the ``cpu`` size, so off by default).
        pad_token_id: padding.
    Raises:
        ValueError: a count or width below 1 (``z_dim`` below 0).
    """

    model_type = NEURAL_NAME
    #: what the commands that describe a model read (``show``): a grammar has no network layers; its
    #: width is the symbol embedding's
    num_hidden_layers = 0
    attribute_map = {"hidden_size": "symbol_dim"}

    def __init__(
        self,
        vocab_size: int = 10000,
        nonterminals: int = 30,
        preterminals: int = 60,
        symbol_dim: int = 256,
        z_dim: int = 0,
        encoder_word_dim: int = 512,
        encoder_hidden: int = 512,
        curriculum_start: int = 30,
        curriculum_increment: int = 1,
        curriculum_final: int = 40,
        induce_viterbi: bool = False,
        pad_token_id: int = 0,
        **kwargs,
    ):
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size, self.nonterminals, self.preterminals = vocab_size, nonterminals, preterminals
        self.symbol_dim, self.z_dim = symbol_dim, z_dim
        self.encoder_word_dim, self.encoder_hidden = encoder_word_dim, encoder_hidden
        self.curriculum_start, self.curriculum_increment = curriculum_start, curriculum_increment
        self.curriculum_final, self.induce_viterbi = curriculum_final, induce_viterbi
        for name in ("vocab_size", "nonterminals", "preterminals", "symbol_dim", "encoder_word_dim", "encoder_hidden"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {getattr(self, name)!r}")
        if not isinstance(z_dim, int) or z_dim < 0:
            raise ValueError(f"z_dim must be a whole number >= 0, got {z_dim!r}")


class CompoundPcfgConfig(NeuralPcfgConfig):
    """Configuration of :class:`CompoundPcfgForLanguageModel`: :class:`NeuralPcfgConfig` with ``z_dim`` 64."""

    model_type = COMPOUND_NAME

    def __init__(self, z_dim: int = 64, **kwargs):
        super().__init__(z_dim=z_dim, **kwargs)


class ResidualLayer(nn.Module):
    """``relu(W2 relu(W1 x)) + x`` (the authors' ``ResidualLayer``)."""

    def __init__(self, dim: int):
        super().__init__()
        self.lin1, self.lin2 = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.lin2(F.relu(self.lin1(x)))) + x


def _symbol_mlp(in_dim: int, dim: int, out_dim: int) -> nn.Sequential:
    """``f_s`` / ``f_t`` and the output layer: linear, two residual layers, linear (paper §2.1)."""
    return nn.Sequential(nn.Linear(in_dim, dim), ResidualLayer(dim), ResidualLayer(dim), nn.Linear(dim, out_dim))


@dataclass
class PcfgOutput(ModelOutput):
    """Output of :class:`NeuralPcfgForLanguageModel`.

    Attributes:
        loss: the training or evaluation loss (module docstring), when ``labels`` are given.
        log_likelihood: ``(B,)`` ``log p(x | z)`` in nats (-inf for a sentence that is skipped).
        kl: ``(B,)`` ``KL(q(z | x) || p(z))`` (zeros for the neural PCFG).
        lengths: ``(B,)`` words per sentence.
    """

    loss: Tensor | None = None
    log_likelihood: Tensor | None = None
    kl: Tensor | None = None
    lengths: Tensor | None = None


class NeuralPcfgForLanguageModel(PreTrainedModel):
    """The neural PCFG (``z_dim = 0``) and, through its config, the compound PCFG (module docstring)."""

    config_class = NeuralPcfgConfig
    base_model_prefix = "pcfg"
    induces_structure = True
    #: the longest sentence a parser of it takes (:data:`MAX_PARSE_WORDS`)
    max_parse_words = MAX_PARSE_WORDS
    #: batches as the causal LM's: ``[CLS] w_1 .. w_n [CLS]`` (the frame is dropped here)
    objective = "causal-lm"

    def __init__(self, config: NeuralPcfgConfig):
        super().__init__(config)
        nt, t, dim, z = config.nonterminals, config.preterminals, config.symbol_dim, config.z_dim
        self.nonterminal_emb = nn.Parameter(torch.randn(nt, dim))
        self.preterminal_emb = nn.Parameter(torch.randn(t, dim))
        self.root_emb = nn.Parameter(torch.randn(1, dim))
        self.rule_mlp = nn.Linear(dim + z, (nt + t) ** 2)
        self.root_mlp = _symbol_mlp(dim + z, dim, nt)
        self.vocab_mlp = _symbol_mlp(dim + z, dim, config.vocab_size)
        if z > 0:
            self.enc_emb = nn.Embedding(config.vocab_size, config.encoder_word_dim)
            self.enc_rnn = nn.LSTM(config.encoder_word_dim, config.encoder_hidden, bidirectional=True, batch_first=True)
            self.enc_params = nn.Linear(2 * config.encoder_hidden, 2 * z)
        self.epoch = 0
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """Xavier-uniform for every weight matrix, as the authors' ``train.py`` initialises every
        parameter of two or more dimensions; biases keep PyTorch's default."""
        for name, param in module.named_parameters(recurse=False):
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)

    def _products_per_span(self) -> int:
        """Floats one span's split point takes in the inside algorithm's products: ``NT (NT + T)``."""
        return self.config.nonterminals * (self.config.nonterminals + self.config.preterminals)

    def _induce_groups(self, rows: Tensor, lengths: Tensor) -> list[Tensor]:
        """``rows`` in consecutive groups whose widest width's products, ``B n² NT A / 4`` floats at the
        group's longest ``n``, stay within :data:`INDUCE_WIDTH_FLOATS` (a group holds one sentence at
        least)."""
        groups: list[list[int]] = []
        longest = 0
        for row in rows.tolist():
            n = max(longest, int(lengths[row]))
            if groups and (len(groups[-1]) + 1) * n * n / 4 * self._products_per_span() <= INDUCE_WIDTH_FLOATS:
                groups[-1].append(row)
                longest = n
            else:
                groups.append([row])
                longest = int(lengths[row])
        return [torch.tensor(g, dtype=torch.long, device=lengths.device) for g in groups]

    # -- the curriculum ---------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """The training epoch (0-based), which sets :meth:`curriculum_length`."""
        self.epoch = int(epoch)

    def curriculum_length(self) -> int:
        """The longest training sentence this epoch: ``min(final, start + increment * epoch)`` words."""
        c = self.config
        return min(c.curriculum_final, c.curriculum_start + c.curriculum_increment * self.epoch)

    # -- the grammar ------------------------------------------------------------------------------
    def posterior(self, words: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """``q(z | x)``: mean and log-variance ``(B, z_dim)`` from the max over the words of a BiLSTM's
        states (paper §2.3; padding excluded from the max)."""
        packed = nn.utils.rnn.pack_padded_sequence(
            self.enc_emb(words), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        states, _ = self.enc_rnn(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, padding_value=float("-inf"))
        params = self.enc_params(states.max(1).values)  # (B, 2 z)
        return params.chunk(2, dim=-1)

    def grammar(self, words: Tensor, z: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """The sentence's grammar: emissions ``(B, N, T)`` log p(w_i | T), rules ``(B | 1, NT, A, A)``
        log p(A -> B C), roots ``(B | 1, NT)`` log p(S -> A) (paper eqs. 1-3; with ``z`` appended to
        every symbol embedding, §2.2)."""
        nt, t = self.config.nonterminals, self.config.preterminals
        rows = 1 if z is None else z.shape[0]

        def with_z(emb: Tensor) -> Tensor:  # (K, D) -> (rows, K, D [+ z])
            emb = emb.unsqueeze(0).expand(rows, *emb.shape)
            return emb if z is None else torch.cat([emb, z.unsqueeze(1).expand(rows, emb.shape[1], z.shape[1])], -1)

        roots = self.root_mlp(with_z(self.root_emb)).squeeze(1).log_softmax(-1)  # (rows, NT)
        rules = self.rule_mlp(with_z(self.nonterminal_emb)).log_softmax(-1).view(rows, nt, nt + t, nt + t)
        vocab = self.vocab_mlp(with_z(self.preterminal_emb)).log_softmax(-1)  # (rows, T, V)
        index = words.unsqueeze(1).expand(words.shape[0], t, words.shape[1])  # (B, T, N)
        emissions = vocab.expand(words.shape[0], t, vocab.shape[-1]).gather(-1, index).transpose(1, 2)
        return emissions, rules, roots

    def _latent(self, words: Tensor, lengths: Tensor, sample: bool) -> tuple[Tensor | None, Tensor]:
        """``z`` (a reparameterised sample, or the posterior mean) and the KL per sentence."""
        if self.config.z_dim == 0:
            return None, words.new_zeros(words.shape[0], dtype=torch.float32)
        mean, logvar = self.posterior(words, lengths)
        kl = 0.5 * (mean.pow(2) + logvar.exp() - logvar - 1).sum(-1)  # KL(N(mean, var) || N(0, I))
        z = mean + (0.5 * logvar).exp() * torch.randn_like(mean) if sample else mean
        return z, kl

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, labels: Tensor | None = None, **kwargs
    ) -> PcfgOutput:
        """The sentences' log-likelihoods (and the loss with ``labels``).

        Args:
            input_ids: ``(B, N)`` framed sentences ``[CLS] w_1 .. w_n [CLS]`` (the causal-LM batches).
            attention_mask: ``(B, N)`` 1 = token (default: ``input_ids != pad``).
            labels: anything not None asks for the loss (the words are the targets).
            **kwargs: ignored (Hugging Face callers).
        """
        if attention_mask is None:
            attention_mask = (input_ids != self.config.pad_token_id).long()
        lengths = attention_mask.sum(-1) - 2  # (B,) words without the frame
        words = input_ids[:, 1:-1].clamp_min(0)  # (B, N - 2): the frame's closing [CLS] is masked below
        keep = lengths >= 2
        if self.training:
            keep &= lengths <= self.curriculum_length()
        log_likelihood = words.new_full(lengths.shape, float("-inf"), dtype=torch.float32)
        kl = words.new_zeros(lengths.shape, dtype=torch.float32)
        loss = None
        if keep.any():
            rows = keep.nonzero().squeeze(1)
            n = int(lengths[rows].max())
            kept_words, kept_lengths = words[rows, :n], lengths[rows]
            z, kept_kl = self._latent(kept_words, kept_lengths, sample=True)
            log_z = inside(*self.grammar(kept_words, z), kept_lengths)
            log_likelihood, kl = log_likelihood.index_copy(0, rows, log_z), kl.index_copy(0, rows, kept_kl)
            if labels is not None:
                total = (kept_kl - log_z).sum()
                loss = total / len(rows) if self.training else total / (kept_lengths + 1).sum()
        elif labels is not None:
            loss = self.root_emb.sum() * 0.0  # nothing to learn from this batch
        return PcfgOutput(loss=loss, log_likelihood=log_likelihood, kl=kl, lengths=lengths)

    @torch.no_grad()
    def induce(self, input_ids: Tensor, attention_mask: Tensor) -> list[list[SpanMarginals]]:
        """The structure interface (:mod:`syntaxformer.structures`): per sentence of ``n`` words its span
        marginals and, with ``config.induce_viterbi``, its Viterbi tree
        (:class:`~syntaxformer.structures.SpanMarginals`), the compound variant at ``z`` = the posterior
        mean. A one-word sentence has none (its tree is the word).

        Args: input_ids ``(B, N)`` words (no frame); attention_mask ``(B, N)`` (right padding).
        """
        lengths = attention_mask.sum(-1)
        words = input_ids.clamp_min(0)
        out = [[SpanMarginals(np.zeros((int(n) + 1, int(n) + 1)))] for n in lengths.tolist()]
        rows = (lengths >= 2).nonzero().squeeze(1)
        for group in self._induce_groups(rows, lengths):
            n = int(lengths[group].max())
            kept_words, kept_lengths = words[group, :n], lengths[group]
            z, _ = self._latent(kept_words, kept_lengths, sample=False)
            grammar = [g.float() for g in self.grammar(kept_words, z)]
            # under autograd every width's products are kept: O(B n³ NT A / 6) floats unless recomputed
            checkpoint = len(group) * n**3 / 6 * self._products_per_span() > INDUCE_KEEP_FLOATS
            _, marginals = span_marginals(*grammar, kept_lengths, checkpoint=checkpoint)
            viterbi = None
            if self.config.induce_viterbi:
                viterbi = viterbi_spans(*grammar, kept_lengths, checkpoint=checkpoint)[1].cpu().numpy()
            marginals = marginals.double().cpu().numpy()
            for k, (row, length) in enumerate(zip(group.tolist(), kept_lengths.tolist())):
                tree = None
                if viterbi is not None:
                    found = np.nonzero(viterbi[k, : length + 1, : length + 1] > 0.5)
                    tree = {(int(i), int(j)) for i, j in zip(*found)}
                out[row] = [SpanMarginals(marginals[k, : length + 1, : length + 1], tree)]
        return out


class CompoundPcfgForLanguageModel(NeuralPcfgForLanguageModel):
    """The compound PCFG (module docstring): :class:`NeuralPcfgForLanguageModel` with ``z_dim`` > 0."""

    config_class = CompoundPcfgConfig


#: presets: ``paper`` (§4: 30 nonterminals, 60 preterminals, embeddings 256, z 64 for the compound
#: variant, its posterior's LSTM 512), ``cpu`` (10 / 20, a smaller posterior: trains in minutes per
#: epoch on one CPU thread), ``tiny`` (tests)
PRESETS = {
    "paper": dict(nonterminals=30, preterminals=60, symbol_dim=256),
    "cpu": dict(nonterminals=10, preterminals=20, symbol_dim=256, encoder_word_dim=128, encoder_hidden=128),
    "tiny": dict(nonterminals=3, preterminals=4, symbol_dim=16, encoder_word_dim=8, encoder_hidden=8),
}
COMPOUND_PRESETS = {
    "paper": dict(PRESETS["paper"], z_dim=64),
    "cpu": dict(PRESETS["cpu"], z_dim=64),
    "tiny": dict(PRESETS["tiny"], z_dim=4),
}

__all__ = [
    "NEURAL_NAME",
    "COMPOUND_NAME",
    "NeuralPcfgConfig",
    "CompoundPcfgConfig",
    "NeuralPcfgForLanguageModel",
    "CompoundPcfgForLanguageModel",
    "PcfgOutput",
    "PRESETS",
    "COMPOUND_PRESETS",
]
