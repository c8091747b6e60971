"""Tree Transformer (Wang, Lee & Chen, EMNLP 2019, arXiv 1909.06639) for masked language modelling.

Config -> model -> MLM head. The layers are the shared pre-LN encoder of
:mod:`syntaxformer.models.encoder` (embeddings, self-attention with a prior, feed-forward, layer,
stack); the constituent prior (link probabilities, C) is the registry's ``"constituent"`` prior,
:mod:`syntaxformer.priors.constituent`; the attention ("eager", the literal reference, and "sdpa") is
:mod:`syntaxformer.priors.attention`, its fast paths are :mod:`syntaxformer.kernels`.

Architecture (the authors' public code, DESIGN.md §1.2): word embeddings × √d_model + sinusoidal
positions; ``L`` pre-LayerNorm blocks, each

    a^l, C^l = ConstituentAttention(x, mask, a^{l-1})           # on the block input, own LayerNorm
    x = x + Dropout(SelfAttention(LN(x), C^l))                  # E = C ⊙ softmax(QKᵀ/√d_k), no renorm.
    x = x + Dropout(FFN(LN(x)))                                 # Linear -> GELU -> Dropout -> Linear

then a final LayerNorm and an *untied* output layer (as the public code). ``prior="none"`` gives the
plain Transformer baseline of the paper (C = 1, no constituent module); any prior of the registry
(:data:`syntaxformer.priors.PRIORS`) plugs in the same way.

Initialisation: every weight matrix Xavier-uniform (as the public code's Annotated-Transformer
recipe), biases 0, LayerNorm (1, 0); word embeddings N(0, ``initializer_range``) (default 0.02), so
that after the × √d_model scaling they are about 0.3-0.5 per coordinate, below the sinusoidal
positions (≈ 0.7): DESIGN.md §5 measured that N(0, 1) embeddings × √d drown the position signal and
training stalls at the unigram loss, while small (Xavier) embeddings train.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from ..blocks.mlm_head import masked_lm_output
from ..errors import InputError
from ..priors import PRIORS, check_prior
from ..priors.constituent import check_constituent_options
from ..structures import LinkProbabilities
from .encoder import (
    HeadPruningMixin,
    MultiHeadSelfAttention,
    PreLNEncoder,
    SinusoidalEmbeddings,
    check_attention_sizes,
    check_residual_init,
    normalise_pruned_heads,
    sinusoidal_positions,
    zero_init_if_marked,
)
from .kernel_choice import KERNELS, resolve_kernel

#: config fields of the named sizes (``make_config("tree-transformer", preset, ...)``)
PRESETS = {
    # the paper's headline configuration (Wang et al. 2019, §4; DESIGN.md §1)
    "paper": dict(
        num_hidden_layers=10,
        hidden_size=512,
        num_attention_heads=8,
        intermediate_size=2048,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    ),
    # the size DESIGN.md §5 found to train on 2 CPU cores (loss leaving the unigram plateau after ~600
    # steps); 6 layers leave Algorithm 1 room for a minimum layer of 1-2.
    "small": dict(
        num_hidden_layers=6,
        hidden_size=256,
        num_attention_heads=4,
        intermediate_size=1024,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    ),
    # the induce recipes' size: the best dev F1 per CPU minute of the sizes searched (docs/results/induce/recipes.md,
    # with the measured speeds)
    "mini": dict(
        num_hidden_layers=4,
        hidden_size=128,
        num_attention_heads=4,
        intermediate_size=512,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    ),
    # tests: seconds
    "tiny": dict(
        num_hidden_layers=3,
        hidden_size=32,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    ),
}

#: the registry names (models/__init__.py): the Tree Transformer, and the same model with ``prior="none"``
#: used as a sentence encoder (the plain Transformer; ``compare`` trains it as a masked LM with prior none)
NAME = "tree-transformer"
PLAIN_NAME = "transformer"

#: sentence-encoder presets (``logic``; the registry's ``encoder`` use, for both names above): ``base`` 4
#: pre-LN layers, d 128, 4 heads, d_ff 512, dropout 0.1, with about as many encoder parameters as the
#: recurrent encoders (795,264 plain, 928,384 with the constituent prior; docs/results/logic.md);
#: ``tiny``: tests
ENCODER_PRESETS = {
    "base": dict(
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=512,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    ),
    "tiny": dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    ),
}


# ----------------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------------


class TreeTransformerConfig(PretrainedConfig):
    """Configuration of a Tree Transformer (BERT field names).

    Args:
        vocab_size: number of tokens.
        hidden_size: d_model.
        num_hidden_layers: L.
        num_attention_heads: heads per layer (``hidden_size`` must be divisible by it).
        intermediate_size: d_ff of the feed-forward block.
        hidden_dropout_prob: dropout on embeddings, residual branches and inside the FFN.
        attention_probs_dropout_prob: dropout on the attention ``E`` (after the product with C).
        max_position_embeddings: length of the precomputed sinusoidal table (longer inputs work: the
            table is extended on the fly).
        layer_norm_eps: LayerNorm epsilon (1e-6 as the public code).
        pad_token_id: id of the padding token.
        initializer_range: std of the word-embedding initialisation (module docstring).
        prior: a name in :data:`syntaxformer.priors.PRIORS`: "constituent" (Tree Transformer),
            "none" (plain Transformer), "gaussian", "structural-position" (needs ``structure_inputs``).
        constituent_variant: "paper" or "official" (see :mod:`syntaxformer.priors.constituent`).
        constituent_scale: the divisor of the neighbour scores (paper eq. 5); None = the variant's
            (paper ``hidden_size / 2``, official 256).
        constituent_diagonal: the constituent prior's diagonal ``C_ii``: "one" (the paper) or
            "official" (the public code's tiny value); None = the variant's. With ``constituent_scale``
            it separates the parts of the official variant (docs/results/induce/recipes.md).
        kernel: how the constituent prior is computed (:mod:`syntaxformer.models.kernel_choice`):
            "reference" (default: the equations with autograd, the recorded runs' numerics, bit for
            bit), "fused" (the prior's link chain, eqs. 6-8 and the cumulative logs, and the gradient
            of ``log C`` as hand-written fused kernels,
            :class:`~syntaxformer.kernels.constituent.FusedLinkChain`,
            :meth:`~syntaxformer.priors.constituent.ConstituentPrior.log_rows_vjp`: the same function,
            float rounding differs; benchmarks/speed/train_step.py) or "triton" (the link chain and
            the prior's attention as Triton kernels, :mod:`syntaxformer.kernels.triton_prior`, on CUDA,
            with their own dropout masks; elsewhere as "fused"). The old field ``constituent_fused``
            (False, True, "triton") is still taken and mapped (a saved config writes ``kernel``).
        attn_implementation: Hugging Face convention: "eager" (literal reference, can return
            attentions) or "sdpa" (fused; the default Hugging Face picks when none is given).
        residual_init: how the output projections of each layer's two residual branches (attention
            output, FFN second linear) start: "xavier" (as every other matrix; the public code) or
            "zero" (:func:`~syntaxformer.models.encoder.mark_zero_residual`: every untrained layer is
            the identity, so the model starts as its embeddings + final LayerNorm).
        pruned_heads: {layer: [heads]} removed by :meth:`TreeTransformerPreTrainedModel.prune_heads`
            (the model is built without them, so ``from_pretrained`` restores a pruned model).
    Raises:
        ValueError: unknown ``prior``, ``constituent_variant``, ``constituent_diagonal``,
            ``kernel`` (or ``constituent_fused``) or ``residual_init``, a ``constituent_scale`` <= 0, a
            ``constituent_fused`` that names another kernel than ``kernel``, or heads not dividing
            hidden_size.
    """

    model_type = "tree-transformer"
    #: the field ``kernel`` replaces, still taken by ``__init__`` (:mod:`syntaxformer.models.kernel_choice`)
    old_kernel_field = "constituent_fused"

    def __init__(
        self,
        vocab_size: int = 10000,
        hidden_size: int = 512,
        num_hidden_layers: int = 10,
        num_attention_heads: int = 8,
        intermediate_size: int = 2048,
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.1,
        max_position_embeddings: int = 512,
        layer_norm_eps: float = 1e-6,
        pad_token_id: int = 0,
        initializer_range: float = 0.02,
        prior: str = "constituent",
        constituent_variant: str = "paper",
        residual_init: str = "xavier",
        pruned_heads=None,
        constituent_scale: float | None = None,
        constituent_diagonal: str | None = None,
        kernel: str | None = None,
        **kwargs,
    ):
        kernel = resolve_kernel(kernel, KERNELS, self.old_kernel_field, kwargs, "the Tree Transformer")
        check_prior(prior)
        check_residual_init(residual_init)
        check_constituent_options(constituent_variant, constituent_scale, constituent_diagonal, kernel)
        check_attention_sizes(
            hidden_size,
            num_attention_heads,
            vocab_size=vocab_size,
            num_hidden_layers=num_hidden_layers,
            intermediate_size=intermediate_size,
            max_position_embeddings=max_position_embeddings,
        )
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.prior = prior
        self.constituent_variant = constituent_variant
        self.constituent_scale = constituent_scale
        self.constituent_diagonal = constituent_diagonal
        self.kernel = kernel
        self.residual_init = residual_init
        self.pruned_heads = normalise_pruned_heads(pruned_heads)


# ----------------------------------------------------------------------------------------------
# Model, MLM head
# ----------------------------------------------------------------------------------------------


@dataclass
class TreeTransformerOutput(ModelOutput):
    """Output of :class:`TreeTransformerModel`.

    Attributes:
        last_hidden_state: (B, N, d) after the final LayerNorm.
        link_probs: tuple over layers of (B, N-1) link probabilities a^l (after the hierarchical
            constraint); empty for ``prior="none"``.
        priors: tuple over layers of (B, N, N) constituent priors C^l, when asked.
        attentions: tuple over layers of (B, H, N, N) attention E = C ⊙ softmax, when asked.
        hidden_states: tuple of (B, N, d): embeddings, then each layer's output, when asked.
        prior_loss: the priors' auxiliary loss (scalar, already weighted, e.g. the multi-granularity
            prior's phrase-label NLL), or None.
    """

    last_hidden_state: torch.Tensor | None = None
    link_probs: tuple | None = None
    priors: tuple | None = None
    attentions: tuple | None = None
    hidden_states: tuple | None = None
    prior_loss: torch.Tensor | None = None


@dataclass
class TreeTransformerMaskedLMOutput(ModelOutput):
    """Output of :class:`TreeTransformerForMaskedLM`.

    Attributes:
        loss: mean cross-entropy (nats) over positions whose label is not -100, when labels are given.
        logits: (B, N, V), or (M, V) at the M labelled positions (row-major order) with ``masked_only``.
        link_probs, priors, attentions, hidden_states: as :class:`TreeTransformerOutput`.
    """

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    link_probs: tuple | None = None
    priors: tuple | None = None
    attentions: tuple | None = None
    hidden_states: tuple | None = None


class TreeTransformerPreTrainedModel(HeadPruningMixin, PreTrainedModel):
    """Weight initialisation and the Hugging Face plumbing (save/load, attention selection, head pruning)."""

    config_class = TreeTransformerConfig
    base_model_prefix = "tree_transformer"
    _supports_sdpa = True

    @classmethod
    def _can_set_attn_implementation(cls) -> bool:
        # our kernels are chosen at call time from config._attn_implementation, so switching works
        return True

    def attention_modules(self) -> list[MultiHeadSelfAttention]:
        """Each layer's self-attention, bottom-up (what :meth:`prune_heads` prunes)."""
        return [layer.attention for layer in self.base_model.layers]

    def _init_weights(self, module: nn.Module) -> None:
        """Xavier-uniform matrices, zero biases, LayerNorm (1, 0), embeddings N(0, initializer_range);
        zeros for the residual branches' output projections under ``residual_init="zero"`` (their
        ``zero_init`` attribute)."""
        if zero_init_if_marked(module):
            return
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, SinusoidalEmbeddings):
            # non-persistent buffer, not in checkpoints: transformers 5 builds the model on the meta
            # device and leaves such buffers uninitialised (torch.empty) unless `_init_weights` fills them
            with torch.no_grad():
                module.positions.copy_(sinusoidal_positions(*module.positions.shape))


class TreeTransformerModel(TreeTransformerPreTrainedModel):
    """Embeddings, the pre-LN encoder with the config's prior, final LayerNorm; no output head."""

    def __init__(self, config: TreeTransformerConfig):
        super().__init__(config)
        self.embeddings = SinusoidalEmbeddings(config)
        self.layers = PreLNEncoder(config)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_priors: bool = False,
        output_hidden_states: bool = False,
        structure_inputs: dict[str, torch.Tensor] | None = None,
    ) -> TreeTransformerOutput:
        """input_ids (B, N), attention_mask (B, N) 1 = real / 0 = padding (None: all real), head_mask
        (H,) or (L, H) (1 keeps a head, 0 drops it; original head numbers; None: all heads),
        structure_inputs: per-sentence structure in token positions for priors that read it (e.g.
        ``{"heads": (B, N) long}``: 0-based head position, -1 root, -100 special token / padding, for
        ``prior="structural-position"``; ``"phrase_ids"`` (B, N) for the multi-granularity prior's tree
        heads), handed to the embeddings' position fusion and to every layer's prior; None: none (priors that need it raise InputError)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        key_mask = attention_mask.bool()  # (B, N)
        out = self.layers(
            self.embeddings(input_ids, structure_inputs),
            key_mask,
            head_mask,
            output_attentions,
            output_priors,
            output_hidden_states,
            structure_inputs=structure_inputs,
        )
        return TreeTransformerOutput(
            last_hidden_state=self.norm(out.hidden),
            link_probs=out.records.get("link_probs", ()),
            priors=out.priors,
            attentions=out.attentions,
            hidden_states=out.hidden_states,
            prior_loss=out.loss,
        )


class TreeTransformerForMaskedLM(TreeTransformerPreTrainedModel):
    """Tree Transformer with an (untied, as the public code) output layer for masked language modelling."""

    def __init__(self, config: TreeTransformerConfig):
        super().__init__(config)
        self.tree_transformer = TreeTransformerModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_priors: bool = False,
        output_hidden_states: bool = False,
        masked_only: bool = False,
        return_dict: bool = True,
        structure_inputs: dict[str, torch.Tensor] | None = None,
        masked_positions: torch.Tensor | None = None,
    ) -> TreeTransformerMaskedLMOutput | tuple:
        """Masked-LM forward pass.

        Args:
            input_ids: (B, N) token ids.
            attention_mask: (B, N), 1 = real token, 0 = padding (None: all real).
            labels: (B, N) target ids, -100 = ignored; gives ``loss``.
            head_mask: (H,) or (L, H): 1 keeps a head, 0 drops it (multiplies the head's output;
                original head numbers after pruning); None keeps all.
            output_attentions: return (B, H, N, N) attentions per layer (the sdpa path falls back to
                eager for this call).
            output_priors: return (B, N, N) constituent priors per layer.
            output_hidden_states: return the embeddings and each layer's (B, N, d) output.
            masked_only: compute logits only at labelled positions ((M, V)), the cheap training path;
                requires ``labels``.
            return_dict: False returns a tuple of the non-None fields.
            structure_inputs: per-sentence structure for priors that read it, e.g. ``{"heads": (B, N)
                long}`` (token positions; -1 root, -100 special token or padding) for
                ``prior="structural-position"`` (:meth:`TreeTransformerModel.forward`), or the
                multi-granularity prior's ``"phrase_ids"`` (B, N) and ``"phrase_labels"`` (B, P).
            masked_positions: with ``masked_only``, (M,) long flat indices into B·N of the labelled
                positions, row-major (:func:`~syntaxformer.blocks.mlm_head.labelled_positions`; the
                training batch carries them); None: computed from ``labels``.
        Returns:
            :class:`TreeTransformerMaskedLMOutput`; ``link_probs`` always (empty for ``prior="none"``);
            with labels, ``loss`` = masked-LM cross-entropy + the priors' auxiliary loss, if any
            (e.g. ``mgsa_phrase_loss_weight × phrase-label NLL``, DESIGN.md §3.3).
        Raises:
            ValueError: ``masked_only`` without ``labels``.
        """
        out = self.tree_transformer(
            input_ids,
            attention_mask,
            head_mask,
            output_attentions=output_attentions,
            output_priors=output_priors,
            output_hidden_states=output_hidden_states,
            structure_inputs=structure_inputs,
        )
        logits, loss = masked_lm_output(out.last_hidden_state, self.lm_head, labels, masked_only, masked_positions)
        if loss is not None and out.prior_loss is not None:
            loss = loss + out.prior_loss
        result = TreeTransformerMaskedLMOutput(
            loss=loss,
            logits=logits,
            link_probs=out.link_probs,
            priors=out.priors,
            attentions=out.attentions,
            hidden_states=out.hidden_states,
        )
        return result if return_dict else result.to_tuple()

    @property
    def induces_structure(self) -> bool:
        """Whether the prior records link probabilities (False for ``prior="none"``)."""
        return "link_probs" in getattr(PRIORS[self.config.prior], "record_names", ())

    def induce(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[list[LinkProbabilities]]:
        """The structure interface (:mod:`syntaxformer.structures`): per sentence, its link probabilities.

        Args:
            input_ids: (B, N) unmasked token ids; attention_mask: (B, N), 1 = real (right padding).
        Returns:
            B lists, each ``[LinkProbabilities]`` of shape (L, t-1) over the sentence's t tokens (float64).
        Raises:
            InputError: the model induces no structure (``prior="none"``).
        """
        if not self.induces_structure:
            raise InputError(
                f"this model has prior={self.config.prior!r}: it computes no link probabilities, so it induces no trees"
            )
        out = self.tree_transformer(input_ids, attention_mask)  # the encoder alone: no output layer
        links = torch.stack(out.link_probs, dim=1).double().cpu()  # (B, L, N-1)
        lengths = attention_mask.sum(-1).tolist()
        return [[LinkProbabilities(links[b, :, : t - 1].numpy())] for b, t in enumerate(lengths)]
