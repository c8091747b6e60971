"""ON-LSTM: the ordered-neurons LSTM language model and its syntactic distances.

Shen, Tan, Sordoni & Courville, "Ordered Neurons: Integrating Tree Structures into Recurrent Neural
Networks", ICLR 2019 (arXiv 1810.09536), §3 (eqs. 9-14), §5.2 (parsing); public code
yikangshen/Ordered-Neurons (``ON_LSTM.py``, ``model.py``, ``test_phrase_grammar.py``; read, not
copied). DESIGN.md §3.4.

The file reads bottom-up::

    OnLstmConfig
    blocks               the equations (cumax, master gates, ...), one time step, the loop over time,
                         the AWD-LSTM regularisers, OnLstmLayer and OnLstmStack: the network block
                         :mod:`syntaxformer.blocks.on_lstm` (re-exported here)
    model                OnLstmModel (embeddings + stack), OnLstmForCausalLM (+ tied head)
    parsing              gap_distances (per-word distances -> the n-1 gaps of the top-down split)

Conventions
-----------
* Batch first, right padding (``attention_mask``: 1 = token, 0 = padding). A padded step keeps the
  state it received (``h``, ``c`` are copied through), so padding never changes a real output nor the
  final state, and distances at padding are 0. Any padding pattern (left padding too) gives each
  sentence's own values at its real positions.
* ``distances`` ``[B, L, N]``: per layer l and word t, ``d_t = 1 - mean_k f~_tk`` over the master
  units (chunks), in [0, 1]: the public code's ``distance_cforget`` (the paper's ``D_m - sum_k
  f~_tk`` divided by ``D_m``). Large = the master forget gate erases much of the ordered state: a
  large constituent ends before the word (the public parser splits before it).
* Layer sizes: the public ``[ninp] + [nhid] * (nlayers - 1) + [ninp]``: every layer has
  ``hidden_size`` units except the last, which has ``embedding_size`` so that the output layer can be
  tied to the embeddings; ``hidden_sizes`` lists them explicitly instead.
* Gate layout of one layer's projections (the public order, so its weights port row for row):
  ``[i~ logits (n_chunk) | f~ logits (n_chunk) | o (H) | c^ (H) | i (H) | f (H)]``.

The fast recurrence
-------------------
* The input-to-hidden projections of all time steps are one matmul per layer (``[B, N, in] @
  [in, G]``, both biases folded in) outside the loop; a step does one ``addmm`` with the recurrent
  weight and ~15 elementwise kernels on ``[B, n_chunk, chunk_size]`` views, so a master gate
  broadcasts over its chunk instead of being copied to every unit.
* Tensors are taken apart with ``unbind`` / ``split``, never by indexing: the backward of
  ``x[:, t]`` fills a zero tensor of the whole ``x`` for every t (this halved the time of a
  ``mini`` forward+backward).
* For large layers the recurrent weight's gradient is one ``[H, B N] @ [B N, G]`` matmul after
  the loop (:mod:`syntaxformer.kernels.on_lstm`) instead of autograd's ``[H, B] @ [B, G]`` product written
  and accumulated at every step (memory-bound at large widths: x1.4-1.5 forward+backward at the
  paper's; small layers keep autograd's, which stays in cache).
* With padding (an ``attention_mask``, or padding tokens) the state is masked (``torch.where``) at
  every step: finding the first padded step would read the mask's values on the host, a
  synchronisation with the device in every forward pass; a true mask returns the new state itself,
  so unpadded rows get exactly the values of an unmasked run.
* Not TorchScript: scripting the loop gave x1.05 (mini) to x1.4 (tiny) on the forward pass and
  nothing on forward+backward on CPU, and ``torch.jit.script`` is deprecated in current PyTorch.

``benchmarks/speed/on_lstm_speed.py`` measures tokens/s against ``torch.nn.LSTM`` of the same widths in
the same run (one CPU thread of a shared 2-core machine, runs of the same day: forward+backward
0.76 of the LSTM's tokens/s at ``mini``, 0.80-0.86 at ``small``, 0.68-0.74 at ``paper``; forward
only 0.65-0.79). No GPU figure yet.

Regularisation (the public ``RNNModel`` / AWD-LSTM options; all five implemented)
---------------------------------------------------------------------------------
``dropoute`` drops whole rows of the embedding matrix (a word type vanishes from the batch; kept
rows scaled by 1/(1-p)); ``dropouti`` / ``dropouth`` / ``dropout`` are locked (variational) dropout,
one mask per sentence shared by all time steps, on the embeddings, between layers and on the last
layer's output; ``wdrop`` is DropConnect on the hidden-to-hidden weights, one mask per forward pass
(as the public ``LinearDropConnect``: dropped weights are zeroed without rescaling in training, and
the weights are multiplied by ``1 - wdrop`` in evaluation). In evaluation nothing else is dropped.

Where this file differs from the public code
--------------------------------------------
* Batch first with an ``attention_mask`` (the public code is sequence first, unpadded, batch of one
  sentence at parse time).
* The input projections of all steps are one matmul and the recurrent weight's gradient is summed
  once after the loop; the values are those of the step-by-step equations (``tests/models/test_on_lstm.py``).
* Parsing hands the per-word distances to the shared top-down decoder as n-1 gap distances
  (:func:`gap_distances`), which reproduces the public ``build_tree`` exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from ..blocks.on_lstm import (  # noqa: F401  (the recurrence lives in the blocks layer; re-exported)
    CELL_KERNELS,
    WEIGHT_GRAD_ONCE_MIN,
    OnLstmLayer,
    OnLstmStack,
    cell_state,
    cumax,
    drop_connect,
    embedding_dropout,
    expand_chunks,
    forget_gate_hat,
    hidden_state,
    input_gate_hat,
    locked_dropout,
    master_forget_gate,
    master_gates,
    master_input_gate,
    on_lstm_cell,
    on_lstm_loop,
    on_lstm_recurrence,
    on_lstm_step,
    overlap,
    syntactic_distance,
)
from ..structures import SyntacticDistances
from .encoder import check_positive_sizes
from .kernel_choice import resolve_kernel

#: config fields of the named sizes (``make_config("on-lstm", preset, ...)``)
PRESETS = {
    # the public recipe (yikangshen/Ordered-Neurons README; DESIGN.md §3.4): 3 layers, embedding 400,
    # hidden 1150 (the last layer 400, tied), chunk 10, AWD-LSTM regularisation; trained with
    # batch 20 x bptt 70, SGD lr 30 then NT-ASGD, clip 0.25, weight decay 1.2e-6, 1000 epochs
    "paper": dict(
        embedding_size=400,
        hidden_size=1150,
        num_layers=3,
        chunk_size=10,
        dropout=0.45,
        dropouth=0.3,
        dropouti=0.5,
        dropoute=0.1,
        wdrop=0.45,
    ),
    # CPU sizes (same shape: 3 layers, the last one as wide as the embeddings); their dropouts are
    # the public ones scaled down for short runs, not tuned (the recipes are chosen on the dev half,
    # docs/results/induce.md).
    # The recurrent stack alone, forward+backward, batch 64 x 25, one CPU thread
    # (benchmarks/speed/on_lstm_speed.py): small ~2,200 tokens/s, mini ~6,500 tokens/s
    "small": dict(
        embedding_size=256,
        hidden_size=512,
        num_layers=3,
        chunk_size=8,
        dropout=0.3,
        dropouth=0.2,
        dropouti=0.3,
        dropoute=0.05,
        wdrop=0.3,
    ),
    "mini": dict(
        embedding_size=128,
        hidden_size=256,
        num_layers=3,
        chunk_size=8,
        dropout=0.2,
        dropouth=0.1,
        dropouti=0.2,
        dropoute=0.0,
        wdrop=0.2,
    ),
    # tests: milliseconds
    "tiny": dict(
        embedding_size=16,
        hidden_size=24,
        num_layers=3,
        chunk_size=4,
        dropout=0.1,
        dropouth=0.1,
        dropouti=0.1,
        dropoute=0.0,
        wdrop=0.1,
    ),
}

#: the registry name (models/__init__.py)
NAME = "on-lstm"

#: sentence-encoder presets (``logic``; the registry's ``encoder`` use): ``base`` = the public ON-LSTM
#: logic code's encoder (``proplog.py``: embedding 128, one layer of 400 units, chunk 10; dropouts 0.1
#: here, chosen on validation accuracy, docs/results/logic.md "Recipe choice"); ``tiny``: tests
ENCODER_PRESETS = {
    "base": dict(embedding_size=128, hidden_sizes=[400], num_layers=1, chunk_size=10, dropouti=0.1, dropouth=0.1),
    "tiny": dict(embedding_size=16, hidden_sizes=[24], num_layers=1, chunk_size=4, dropouti=0.1, dropouth=0.1),
}
#: config fields every encoder preset gets: no output layer (untied); the LM-only dropouts off;
#: distances of the top layer
ENCODER_FIXED = dict(tie_word_embeddings=False, dropout=0.0, dropoute=0.0, wdrop=0.0, parse_layer=-1)

_DROPOUTS = ("dropout", "dropouth", "dropouti", "dropoute", "wdrop")


# ----------------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------------


class OnLstmConfig(PretrainedConfig):
    """Configuration of :class:`OnLstmForCausalLM`. Defaults: the public recipe (the ``paper`` preset).

    Args:
        vocab_size: number of tokens.
        embedding_size: word embedding width (the public ``emsize``, 400); also the last layer's width
            (the output layer is tied to the embeddings).
        hidden_size: width of every layer but the last (the public ``nhid``, 1150).
        hidden_sizes: the width of each layer, bottom-up, instead of ``hidden_size``; the last must
            equal ``embedding_size`` (tied output layer). None = ``[hidden_size] * (num_layers - 1) +
            [embedding_size]``.
        num_layers: ON-LSTM layers (the public 3).
        chunk_size: hidden units per master-gate unit (the public 10); every layer width must be a
            multiple of it. A layer of width H has ``H / chunk_size`` master units (chunks).
        dropout: locked dropout on the last layer's output, before the output layer (public 0.45).
        dropouth: locked dropout between layers (public 0.3).
        dropouti: locked dropout on the word embeddings (public 0.5).
        dropoute: dropout of whole embedding rows, i.e. word types (public 0.1).
        wdrop: DropConnect on the hidden-to-hidden weights (public 0.45).
        parse_layer: the layer (0-based) whose distances ``induce`` returns; the public parser reads
            the second layer (1). Negative values count from the top.
        parse_prefix_token_id: a token fed before every sentence by ``induce`` (its distance is
            dropped), as the public parser feeds ``<eos>`` (its models are trained on running text
            with ``<eos>`` between sentences); None = none.
        init_range: the embeddings are drawn from U(-init_range, init_range) (public 0.1).
        pad_token_id: padding token (padding is found from it when no ``attention_mask`` is given).
        tie_word_embeddings: tie the output layer to the embeddings (the public recipe does). Stated
            because ``transformers`` 5 no longer gives every config this field.
        kernel: how the cell is computed (:mod:`syntaxformer.models.kernel_choice`; a key of
            :data:`~syntaxformer.blocks.on_lstm.CELL_KERNELS`): "reference" (the cell's equations,
            :func:`~syntaxformer.blocks.on_lstm.on_lstm_cell`, with autograd) or "triton" (each step's
            cell as one Triton kernel each way, :mod:`syntaxformer.kernels.triton_on_lstm`, where
            :func:`~syntaxformer.kernels.triton_runs_on` the device; elsewhere as "reference"). The
            same function; float rounding differs. No "fused" form: refused. The old field
            ``cell_kernel`` ("autograd", "triton") is still taken and mapped (a saved config writes
            ``kernel``).

    Raises:
        ValueError: a size or count that is not a positive whole number (named), a width that is not a
            multiple of ``chunk_size``, ``hidden_sizes`` of the wrong length or (tied) a last width
            other than ``embedding_size``, a dropout outside [0, 1),
            ``parse_layer`` out of range, a ``kernel`` not in ``CELL_KERNELS`` ("fused" included), an
            unknown ``cell_kernel`` or one that names another kernel than ``kernel``.
    """

    model_type = "on-lstm"
    #: the field ``kernel`` replaces, still taken by ``__init__`` (:mod:`syntaxformer.models.kernel_choice`)
    old_kernel_field = "cell_kernel"
    attribute_map = {"num_hidden_layers": "num_layers"}

    def __init__(
        self,
        vocab_size: int = 10000,
        embedding_size: int = 400,
        hidden_size: int = 1150,
        hidden_sizes: list[int] | None = None,
        num_layers: int = 3,
        chunk_size: int = 10,
        dropout: float = 0.45,
        dropouth: float = 0.3,
        dropouti: float = 0.5,
        dropoute: float = 0.1,
        wdrop: float = 0.45,
        parse_layer: int = 1,
        parse_prefix_token_id: int | None = None,
        init_range: float = 0.1,
        pad_token_id: int = 0,
        tie_word_embeddings: bool = True,
        kernel: str | None = None,
        **kwargs,
    ):
        kernel = resolve_kernel(kernel, tuple(CELL_KERNELS), self.old_kernel_field, kwargs, "the ON-LSTM")
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)
        self.kernel = kernel
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.hidden_sizes = list(hidden_sizes) if hidden_sizes is not None else None
        self.num_layers = num_layers
        self.chunk_size = chunk_size
        self.dropout, self.dropouth, self.dropouti, self.dropoute, self.wdrop = (
            dropout,
            dropouth,
            dropouti,
            dropoute,
            wdrop,
        )
        self.parse_layer = parse_layer
        self.parse_prefix_token_id = parse_prefix_token_id
        self.init_range = init_range
        self._check()

    @property
    def layer_sizes(self) -> list[int]:
        """The width of each layer, bottom-up."""
        if self.hidden_sizes is not None:
            return list(self.hidden_sizes)
        return [self.hidden_size] * (self.num_layers - 1) + [self.embedding_size]

    def _check(self) -> None:
        check_positive_sizes(
            vocab_size=self.vocab_size,
            embedding_size=self.embedding_size,
            num_layers=self.num_layers,
            chunk_size=self.chunk_size,
            **(  # the widths used: hidden_sizes where given (hidden_size is then unused), else hidden_size
                {f"hidden_sizes[{i}]": width for i, width in enumerate(self.hidden_sizes)}
                if self.hidden_sizes is not None
                else {"hidden_size": self.hidden_size}
            ),
        )
        sizes = self.layer_sizes
        if len(sizes) != self.num_layers:
            raise ValueError(f"hidden_sizes has {len(sizes)} widths for {self.num_layers} layers")
        if self.tie_word_embeddings and sizes[-1] != self.embedding_size:
            raise ValueError(
                f"the last layer's width {sizes[-1]} must equal embedding_size "
                f"{self.embedding_size} (tied output layer)"
            )
        if any(width % self.chunk_size for width in sizes):
            raise ValueError(f"layer widths {sizes} must be multiples of chunk_size {self.chunk_size}")
        for name in _DROPOUTS:
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must lie in [0, 1), got {getattr(self, name)}")
        if not -self.num_layers <= self.parse_layer < self.num_layers:
            raise ValueError(f"parse_layer {self.parse_layer} out of range for {self.num_layers} layers")


@dataclass
class OnLstmOutput(ModelOutput):
    """Output of :class:`OnLstmModel`.

    Attributes:
        last_hidden_state: ``[B, N, E]`` the last layer's outputs (before output dropout).
        distances: ``[B, L, N]`` syntactic distance of each layer and word, in [0, 1]; 0 at padding.
        hidden_states: per layer ``[B, N, H_l]`` outputs (before dropout), when ``output_hidden_states``.
        state: per layer ``(h, c)`` ``[B, H_l]`` after each sentence's last real token.
    """

    last_hidden_state: torch.FloatTensor | None = None
    distances: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    state: tuple[tuple[torch.FloatTensor, torch.FloatTensor], ...] | None = None


@dataclass
class OnLstmCausalLMOutput(ModelOutput):
    """Output of :class:`OnLstmForCausalLM`.

    Attributes:
        loss: mean next-word cross-entropy (nats) over the scored positions, when ``labels`` are given.
        logits: ``[B, N, V]``; position t predicts token t+1.
        distances: ``[B, L, N]`` syntactic distances (see :class:`OnLstmOutput`).
        hidden_states: per layer outputs, when ``output_hidden_states``.
        state: per layer ``(h, c)`` final states (to continue running text).
        last_hidden_state: ``[B, N, E]`` the last layer's outputs before the output dropout, when
            ``output_last_hidden`` (the public ``rnn_hs[-1]``, which temporal activation
            regularisation reads).
        dropped_hidden_state: ``[B, N, E]`` the same after the output dropout, what the output layer
            reads, when ``output_last_hidden`` (the public ``dropped_rnn_hs[-1]``, which activation
            regularisation reads).
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    distances: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    state: tuple[tuple[torch.FloatTensor, torch.FloatTensor], ...] | None = None
    last_hidden_state: torch.FloatTensor | None = None
    dropped_hidden_state: torch.FloatTensor | None = None


class OnLstmPreTrainedModel(PreTrainedModel):
    """Weight initialisation of the public code: embeddings U(-init_range, init_range), output bias
    0; the ON-LSTM projections PyTorch's ``nn.Linear`` default (weights and biases
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), written with ``nn.init``)."""

    config_class = OnLstmConfig
    base_model_prefix = "on_lstm"

    def _init_weights(self, module):
        # `nn.init` functions only: transformers 5 guards them so that they skip loaded tensors
        if isinstance(module, nn.Embedding):
            nn.init.uniform_(module.weight, -self.config.init_range, self.config.init_range)
        elif isinstance(module, nn.Linear) and module is getattr(self, "lm_head", None):
            nn.init.zeros_(module.bias)  # its weight is the embeddings' (tied)
        elif isinstance(module, nn.Linear):
            bound = 1.0 / math.sqrt(module.in_features)
            nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5))  # = U(-bound, bound)
            nn.init.uniform_(module.bias, -bound, bound)


def _padding_mask(config: OnLstmConfig, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor | None:
    """``[B, N]`` bool (True = token): ``attention_mask``, else the tokens other than padding; None when
    there is neither a mask nor a padding token. Whether anything is padded is not asked (that would
    read a value from the device); an all-true mask gives the values of no mask."""
    if attention_mask is not None:
        return attention_mask.bool()
    if config.pad_token_id is not None:
        return input_ids != config.pad_token_id
    return None


class OnLstmModel(OnLstmPreTrainedModel):
    """Embeddings -> ``num_layers`` :class:`OnLstmLayer` (locked dropout on the embeddings and
    between layers) -> the last layer's outputs and every layer's distances."""

    def __init__(self, config: OnLstmConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_size)
        self.layers = OnLstmStack(
            [config.embedding_size] + config.layer_sizes,
            config.chunk_size,
            config.wdrop,
            config.dropouth,
            config.kernel,
        )
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, value):
        self.embeddings = value

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: Tensor | None = None,
        state=None,
        output_hidden_states: bool = False,
        return_dict: bool = True,
    ) -> OnLstmOutput:
        """Args: input_ids ``[B, N]``; attention_mask ``[B, N]`` (1 = token, 0 = padding), default
        ``input_ids != pad_token_id``; state: per layer ``(h, c)`` ``[B, H_l]`` to start from (zeros
        when None). Returns :class:`OnLstmOutput`."""
        cfg = self.config
        mask = _padding_mask(cfg, input_ids, attention_mask)
        x = embedding_dropout(self.embeddings.weight, input_ids, cfg.dropoute, self.training)  # (B, N, E)
        x = locked_dropout(x, cfg.dropouti, self.training)
        hiddens, distances, states = self.layers(x, mask, state)  # (B, L, N)
        out = OnLstmOutput(
            last_hidden_state=hiddens[-1],
            distances=distances,
            hidden_states=tuple(hiddens) if output_hidden_states else None,
            state=tuple(states),
        )
        return out if return_dict else out.to_tuple()


class OnLstmForCausalLM(OnLstmPreTrainedModel):
    """ON-LSTM language model: :class:`OnLstmModel` -> locked dropout -> Linear tied to the word
    embeddings (+ bias), the public ``RNNModel``. Next-word objective; induces syntactic distances."""

    # {tied: source}: transformers 5 needs the mapping; 4.x iterates it and so sees the key
    _tied_weights_keys = {"lm_head.weight": "on_lstm.embeddings.weight"}
    induces_structure = True
    #: what it is trained for (syntaxformer.training.objectives: next-word prediction; the perplexity
    #: evaluator's next-word protocol)
    objective = "causal-lm"

    def __init__(self, config: OnLstmConfig):
        super().__init__(config)
        self.on_lstm = OnLstmModel(config)
        self.lm_head = nn.Linear(config.embedding_size, config.vocab_size)
        self.post_init()

    def get_input_embeddings(self):
        return self.on_lstm.embeddings

    def set_input_embeddings(self, value):
        self.on_lstm.embeddings = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: Tensor | None = None,
        labels: torch.LongTensor | None = None,
        state=None,
        output_hidden_states: bool = False,
        return_dict: bool = True,
        output_last_hidden: bool = False,
        **kwargs,
    ) -> OnLstmCausalLMOutput:
        """Causal-LM forward pass.

        Args:
            input_ids: ``[B, N]`` token ids.
            attention_mask: ``[B, N]`` 1 = token, 0 = padding; default ``input_ids != pad_token_id``.
            labels: ``[B, N]`` target ids aligned with ``input_ids`` (usually ``input_ids`` with
                padding set to -100); shifted inside, as Hugging Face causal LMs do: the logits at t
                are scored against ``labels[:, t + 1]``; -100 = not scored.
            state: per layer ``(h, c)`` to start from (running text), or None (zeros).
            output_hidden_states: also return every layer's outputs.
            return_dict: ``False`` returns the output's non-None fields as a tuple.
            output_last_hidden: also return the last layer's outputs before and after the output
                dropout (``last_hidden_state``, ``dropped_hidden_state``: the AWD-LSTM regularisers').
            **kwargs: ignored (Hugging Face callers pass e.g. ``use_cache``).
        """
        base = self.on_lstm(input_ids, attention_mask, state=state, output_hidden_states=output_hidden_states)
        hidden = locked_dropout(base.last_hidden_state, self.config.dropout, self.training)  # (B, N, E)
        logits = self.lm_head(hidden)  # (B, N, V)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100
            )
        last = dict(last_hidden_state=base.last_hidden_state, dropped_hidden_state=hidden) if output_last_hidden else {}
        out = OnLstmCausalLMOutput(
            loss=loss,
            logits=logits,
            distances=base.distances,
            hidden_states=base.hidden_states,
            state=base.state,
            **last,
        )
        return out if return_dict else out.to_tuple()

    @torch.no_grad()
    def induce(self, input_ids: Tensor, attention_mask: Tensor) -> list[list[SyntacticDistances]]:
        """The structure interface (:mod:`syntaxformer.structures`): per sentence of t tokens, the
        syntactic distances of its t-1 gaps in every layer (``layers`` ``[L, t-1]``,
        :func:`gap_distances` of the per-word distances; float64 numpy), the default row being layer
        ``config.parse_layer`` (``--layer`` picks another). With ``config.parse_prefix_token_id`` that
        token is fed first and its distance dropped (the public parser feeds ``<eos>``; the causal-LM
        trainer sets it to the sentence boundary ``[CLS]`` it trains with).

        Args: input_ids ``[B, N]``; attention_mask ``[B, N]`` (1 = token, right padding).
        """
        prefix = self.config.parse_prefix_token_id
        skip = int(prefix is not None)  # prefix steps
        if prefix is not None:
            input_ids = torch.cat([torch.full_like(input_ids[:, :1], prefix), input_ids], dim=1)
            attention_mask = torch.cat([torch.ones_like(attention_mask[:, :1]), attention_mask], dim=1)
        out = self(input_ids=input_ids, attention_mask=attention_mask)
        words = out.distances[:, :, skip:].double().cpu().numpy()  # (B, L, N)
        lengths = (attention_mask.sum(-1) - skip).tolist()
        return [
            [
                SyntacticDistances.of_layers(
                    np.stack([gap_distances(d[:t]) for d in words[row]]), self.config.parse_layer
                )
            ]
            for row, t in enumerate(lengths)
        ]


# ----------------------------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------------------------


def gap_distances(word_distances: np.ndarray) -> np.ndarray:
    """Per-word distances ``[n]`` -> gap distances ``[n-1]``: ``g_k = max(d_k, d_{k+1})``.

    The public parser (``build_tree`` in ``test_phrase_grammar.py``) works on words: in a segment
    it takes the word m of the largest distance (first on ties); if m is not the segment's first word
    it splits before m, and then always splits m off the rest of its right part; if m is the first
    word it splits after it. The top-down split at the largest gap distance with leftmost ties
    (:func:`syntaxformer.decoding.spans.split_by_distance`) over ``g`` makes the same splits: in a
    segment, the gap before m and the gap after m both equal ``d_m`` and every gap left of m is
    smaller, so the leftmost maximum is the gap before m (or after m when m comes first); in the
    right part ``[m, ...)`` the gap after m is again the maximum. So the trees equal the public
    code's (checked in ``tests/models/test_on_lstm.py``). A single word gives ``[]``.
    """
    d = np.asarray(word_distances, dtype=np.float64)
    return np.maximum(d[:-1], d[1:])


__all__ = [
    "PRESETS",
    "OnLstmConfig",
    "OnLstmLayer",
    "OnLstmStack",
    "OnLstmModel",
    "OnLstmForCausalLM",
    "OnLstmOutput",
    "OnLstmCausalLMOutput",
    "cumax",
    "expand_chunks",
    "master_forget_gate",
    "master_input_gate",
    "master_gates",
    "overlap",
    "forget_gate_hat",
    "input_gate_hat",
    "cell_state",
    "hidden_state",
    "syntactic_distance",
    "on_lstm_step",
    "on_lstm_cell",
    "on_lstm_loop",
    "on_lstm_recurrence",
    "locked_dropout",
    "embedding_dropout",
    "drop_connect",
    "gap_distances",
]
