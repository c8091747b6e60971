"""StructFormer's configuration: its named sizes, the registry name and :class:`StructFormerConfig`.

Kept apart from the modelling code (:mod:`syntaxformer.models.structformer`), as Hugging Face keeps
``configuration_*.py`` apart from ``modeling_*.py``: what a saved ``config.json`` holds and what
``make_config("structformer", preset, ...)`` builds. Shen et al., ACL 2021 (arXiv 2012.00857); the
defaults are the public configuration of the paper (DESIGN.md §2).
"""

from __future__ import annotations

from transformers import PretrainedConfig

from .encoder import check_attention_sizes, normalise_pruned_heads
from .kernel_choice import resolve_kernel

RELATIONS = ("head", "child", "sibling")
WEIGHT_ACTIVATIONS = ("softmax", "sigmoid")
#: the ``kernel`` choices (:mod:`syntaxformer.models.kernel_choice`): the parse stage and attention as
#: written, with autograd, or Triton kernels where they run (no ``"fused"`` form)
KERNELS = ("reference", "triton")


#: config fields of the named sizes (``make_config("structformer", preset, ...)``)
PRESETS = {
    # the public configuration (Shen et al. 2021, §5; DESIGN.md §2); train with mask rate 0.3,
    # Adam lr 3e-4 (see StructFormerConfig)
    "paper": dict(
        num_hidden_layers=8,
        hidden_size=512,
        num_attention_heads=8,
        intermediate_size=2048,
        n_parser_layers=3,
        conv_size=9,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.0,
    ),
    # CPU, a <= 20-minute run on 2 cores: ~640 tokens/s per training step on one busy core
    # (batch 64 x 25 words, vocabulary 10k, logits at masked positions only)
    "small": dict(
        num_hidden_layers=4,
        hidden_size=256,
        num_attention_heads=4,
        intermediate_size=1024,
        n_parser_layers=2,
        conv_size=9,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.0,
    ),
    # the induce recipes' size (docs/results/induce/recipes.md): ~7,300 tokens/s on 2 CPU cores
    "mini": dict(
        num_hidden_layers=4,
        hidden_size=128,
        num_attention_heads=4,
        intermediate_size=512,
        n_parser_layers=2,
        conv_size=9,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.0,
    ),
    # tests: seconds
    "tiny": dict(
        num_hidden_layers=2,
        hidden_size=32,
        num_attention_heads=2,
        intermediate_size=64,
        n_parser_layers=2,
        conv_size=3,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.0,
    ),
}

#: the registry name (models/__init__.py)
NAME = "structformer"


# ----------------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------------


class StructFormerConfig(PretrainedConfig):
    """Configuration of :class:`StructFormerForMaskedLM` (BERT-style names).

    Defaults are the public configuration of the paper (the ``paper`` preset): 8 layers, hidden 512,
    8 heads, FFN 2048, 3 parser conv layers with window 9, dropout 0.1, relations ("head", "child"),
    softmax mixing weights. Training recipe of the public code (the trainer's flags, recorded here):
    **mask rate 0.3** with every masked token replaced by ``<mask>`` (no 80/10/10), Adam lr 3e-4,
    eps 1e-9, weight decay 1.2e-6, gradient clipping 0.25, ~4096 tokens per batch, no attention
    dropout (``dropatt`` 0).

    Args:
        vocab_size: number of tokens.
        hidden_size: model width d (embeddings, parser network, Transformer layers).
        num_hidden_layers: Transformer layers L.
        num_attention_heads: heads H per layer (d must be divisible by H).
        intermediate_size: feed-forward width.
        hidden_act: feed-forward activation (an ``ACT2FN`` name; the public code uses leaky ReLU).
        hidden_dropout_prob: dropout on residual branches, inside the feed-forward and before the
            output layer.
        attention_probs_dropout_prob: dropout on the attention weights.
        n_parser_layers: Conv1d + LayerNorm + tanh layers of the parser network (§4.2).
        conv_size: convolution window of the parser layers.
        relations: dependency relations each head mixes (§4.4): ``"head"`` (attend to the parent,
            weight ``p_D(j|i)``), ``"child"`` (attend to the dependents, ``p_D(i|j)``), ``"sibling"``.
        weight_act: ``"softmax"`` (mixing weights of a head sum to 1, the paper) or ``"sigmoid"``.
        layer_norm_eps: epsilon of every LayerNorm.
        pad_token_id: padding token (used to find padding when no ``attention_mask`` is given).
        pruned_heads: {layer: [heads]} removed by ``prune_heads`` (restored by ``from_pretrained``).
        tie_word_embeddings: tie the MLM output layer to the word embeddings (the public code does).
            Stated here because ``transformers`` 5 no longer gives every config this field (4.x
            defaulted it to True), and v5 ties only when the config asks.
        position_embeddings: learned position embeddings added to the word embeddings before the
            Transformer layers (not the parser network): how many positions (0: none, the public
            default; the public README's ``--pos_emb``: 500, initialised U(-0.1, 0.1)).
        kernel: how the calibrated distances, ``p_D`` and the attention they constrain are computed
            (:mod:`syntaxformer.models.kernel_choice`; one of :data:`KERNELS`): ``"reference"``
            (:func:`~syntaxformer.models.structformer_parse.calibrate_distances`,
            :func:`~syntaxformer.models.structformer_parse.dependency_distribution`,
            :func:`~syntaxformer.models.structformer.dependency_structure` and
            :func:`~syntaxformer.models.structformer.dependency_constrained_attention` as written) or
            ``"triton"`` (one Triton kernel each way for the parse stage,
            :mod:`syntaxformer.kernels.triton_dependency`, and one each way for each layer's attention,
            :mod:`syntaxformer.kernels.triton_dependency_attention`, where
            :func:`~syntaxformer.kernels.triton_runs_on` the device and the batch fits: float32, 2 to 64
            tokens, and for the attention no attention dropout, head mask or returned weights, the
            relations ``head`` and ``child``; elsewhere the written path). The same function either way.
            No ``"fused"`` form: refused. The old field ``dependency_kernel`` (``"autograd"``,
            ``"triton"``) is still taken and mapped (a saved config writes ``kernel``).

    Raises:
        ValueError: a width not divisible by the heads, unknown relations or mixing activation, a
            negative ``position_embeddings``, a ``kernel`` not in :data:`KERNELS` (``"fused"``
            included), an unknown ``dependency_kernel`` or one that names another kernel than ``kernel``.
    """

    model_type = "structformer"
    #: the field ``kernel`` replaces, still taken by ``__init__`` (:mod:`syntaxformer.models.kernel_choice`)
    old_kernel_field = "dependency_kernel"

    def __init__(
        self,
        vocab_size: int = 10000,
        hidden_size: int = 512,
        num_hidden_layers: int = 8,
        num_attention_heads: int = 8,
        intermediate_size: int = 2048,
        hidden_act: str = "leaky_relu",
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.0,
        n_parser_layers: int = 3,
        conv_size: int = 9,
        relations=("head", "child"),
        weight_act: str = "softmax",
        layer_norm_eps: float = 1e-5,
        pad_token_id: int = 0,
        pruned_heads=None,
        tie_word_embeddings: bool = True,
        position_embeddings: int = 0,
        kernel: str | None = None,
        **kwargs,
    ):
        kernel = resolve_kernel(kernel, KERNELS, self.old_kernel_field, kwargs, "StructFormer")
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)
        if position_embeddings < 0:
            raise ValueError(f"position_embeddings must not be negative, got {position_embeddings}")
        check_attention_sizes(
            hidden_size,
            num_attention_heads,
            vocab_size=vocab_size,
            num_hidden_layers=num_hidden_layers,
            intermediate_size=intermediate_size,
            n_parser_layers=n_parser_layers,
            conv_size=conv_size,
        )
        unknown = [r for r in relations if r not in RELATIONS]
        if unknown or not relations:
            raise ValueError(f"relations must be a non-empty subset of {RELATIONS}, got {relations}")
        if weight_act not in WEIGHT_ACTIVATIONS:
            raise ValueError(f"weight_act must be one of {WEIGHT_ACTIVATIONS}, got {weight_act!r}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.n_parser_layers = n_parser_layers
        self.conv_size = conv_size
        self.relations = list(relations)
        self.weight_act = weight_act
        self.layer_norm_eps = layer_norm_eps
        self.pruned_heads = normalise_pruned_heads(pruned_heads)
        self.position_embeddings = position_embeddings
        self.kernel = kernel


__all__ = ["KERNELS", "NAME", "PRESETS", "RELATIONS", "WEIGHT_ACTIVATIONS", "StructFormerConfig"]
