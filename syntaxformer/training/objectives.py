"""Training objectives: how the trainer turns token sequences into a batch, keyed on the model.

A model class states what it is trained for in its class attribute ``objective`` (absent =
``"masked-lm"``); :data:`OBJECTIVES` maps that name to an :class:`Objective`, which the
:class:`~syntaxformer.tasks.language_model.Trainer` builds once per run (:func:`build_objective`). The
loss itself is the model's own (``model(input_ids, attention_mask, labels).loss``), so an objective
only decides the inputs and the labels:

* ``masked-lm`` (:class:`MaskedLM`; Tree Transformer, StructFormer, ON-LSTM + self-attention): BERT
  masking (:func:`~syntaxformer.training.mlm.mask_tokens`, ``mask_rate`` / ``mask_replace``);
  labels = the original ids at the selected positions, -100 elsewhere; the selected positions also as
  an index list (``masked_positions``, :func:`~syntaxformer.blocks.mlm_head.labelled_positions`,
  computed here on the CPU) for the model's ``masked_only`` path.
* ``causal-lm`` (:class:`CausalLM`; ON-LSTM): next-word prediction. Each sentence is framed by the
  sentence-boundary token, ``[CLS] w_1 ... w_n [CLS]`` (the public ON-LSTM code trains on running
  text with ``<eos>`` between sentences, so every sentence is read after a boundary and its end is
  predicted; ``[CLS]`` plays ``<eos>``), nothing is masked; labels = the input ids with padding set
  to -100, shifted inside the model (Hugging Face's causal-LM convention: the logits at t are scored
  against ``labels[t + 1]``), so the n words and the closing boundary are predicted. The model's
  ``parse_prefix_token_id`` defaults to the boundary, so ``induce`` reads a sentence after it too.

**Fixed shapes** (``fixed_shapes``, for an accelerator's captured or compiled step: one graph per
shape): the columns are padded to a multiple of ``pad_to_multiple`` (:data:`FIXED_MULTIPLE` when not
given), a short batch gets empty rows (attention mask 0, labels -100) up to ``batch_size``, and the
masked LM's ``masked_positions`` is a list of a fixed size per ``(B, N)``
(:func:`mask_capacity`; padded with a dummy position labelled -100,
:func:`~syntaxformer.blocks.mlm_head.padded_positions`). The masks are drawn before any padding, so
they, the targets and their order are those of the unpadded batch, and so are the loss and the
gradients (empty rows and dummy entries add zero terms; tests/kernels/test_fixed_shapes.py).

The validation loss is the same objective on the held-out sentences (fixed masks for the masked LM),
mean cross-entropy in nats over :meth:`Objective.n_targets`; its exp is the validation perplexity
(``training.json``: ``final_valid_perplexity``; TensorBoard ``valid/perplexity``).
"""

from __future__ import annotations

import logging
import math

import torch

from syntaxformer.blocks.mlm_head import labelled_positions, padded_positions
from syntaxformer.data.batching import pad_batch, pad_columns, padded_length
from syntaxformer.data.tokenization import BOUNDARY_ID, frame_sentence
from syntaxformer.errors import InputError
from syntaxformer.training.batch import TokenBatch
from syntaxformer.training.mlm import IGNORE_INDEX, MASK_REPLACE, mask_tokens

logger = logging.getLogger(__name__)

#: with ``fixed_shapes`` and no ``pad_to_multiple``: the multiple the columns are padded to
FIXED_MULTIPLE = 8
#: with ``fixed_shapes``: the masked-position list holds this many times the expected number of targets
MASK_CAPACITY_MARGIN = 1.25


def mask_capacity(rows: int, length: int, rate: float, margin: float = MASK_CAPACITY_MARGIN) -> int:
    """The fixed size of the masked-position list of a ``(rows, length)`` batch: ``margin`` times an
    upper estimate of its targets (``rate`` of the positions plus one per row, the sentence that
    :func:`~syntaxformer.training.mlm.mask_tokens` gives at least one), rounded up to a multiple of 8,
    at most ``rows · length``. A batch with more targets gets the next multiple of 8 above its count
    (another shape, rare: logged once).

    Args:
        rows, length: the padded batch's ``(B, N)``.
        rate: the selection rate (``mask_rate``).
        margin: the factor over the estimate.
    Returns:
        the list's size, an int.
    """
    estimate = math.ceil(margin * (rate * rows * length + rows))
    return min(rows * length, -(-estimate // 8) * 8)


def pad_rows_to(x: torch.Tensor, rows: int, value: int) -> torch.Tensor:
    """``x`` ``(B, N)`` with rows of ``value`` appended up to ``(rows, N)`` (itself when B is ``rows``)."""
    missing = rows - x.shape[0]
    if missing <= 0:
        return x
    return torch.cat([x, x.new_full((missing, x.shape[1]), value)])


class Objective:
    """What a run's batches are (base class; one subclass per objective name).

    Attributes:
        name: the objective's name (``model_class.objective``).
        description: one line for reports (what is predicted, how).
        config_defaults: model config fields the objective sets unless the run overrides them (only
            fields the model's config has).
    """

    name = ""
    description = ""
    config_defaults: dict = {}

    def __init__(self, args, tokenizer, special_ids: list[int]):
        self.args, self.tokenizer, self.special_ids = args, tokenizer, special_ids
        self.fixed_shapes = bool(getattr(args, "fixed_shapes", False))
        if self.fixed_shapes and args.batch_size is None and getattr(args, "min_batch_tokens", None) is None:
            raise InputError(
                "--fixed-shapes pads every batch to --batch-size rows, or with --min-batch-tokens to the most "
                "rows of a batch of its padded length: give one of them"
            )
        #: with ``fixed_shapes`` and ``min_batch_tokens``: padded length -> rows (:meth:`fix_rows`)
        self.rows_by_length: dict[int, int] = {}

    def framed_length(self, n: int) -> int:
        """Tokens of a batch row built from a sequence of ``n`` token ids (the same; framing adds some)."""
        return n

    def fix_rows(self, batches: list[list[int]]) -> None:
        """With ``fixed_shapes`` and ``min_batch_tokens`` (batches of the length-sorted corpus, the same every
        epoch): for every padded length, the most rows of any of ``batches`` (the token counts of each
        batch's sequences) padded to it, which every batch of that length is then filled to: one shape per
        padded length. Batches of a length not seen keep their rows."""
        multiple = self.args.pad_to_multiple or FIXED_MULTIPLE
        for lengths in batches:
            n = padded_length(self.framed_length(max(lengths)), multiple)
            self.rows_by_length[n] = max(self.rows_by_length.get(n, 0), len(lengths))

    def batch_shape(self, rows: int, longest: int) -> tuple[int, int]:
        """The ``(B, N)`` a batch of ``rows`` sequences, the longest of ``longest`` tokens, is padded to:
        ``N`` = ``longest`` rounded up to ``pad_to_multiple`` (with ``fixed_shapes``: to
        :data:`FIXED_MULTIPLE` when not given); ``B`` = ``rows``, or with ``fixed_shapes`` ``batch_size``
        (token budgets: the rows of ``N`` from :meth:`fix_rows`)."""
        if not self.fixed_shapes:
            return rows, padded_length(longest, self.args.pad_to_multiple)
        n = padded_length(longest, self.args.pad_to_multiple or FIXED_MULTIPLE)
        target = self.args.batch_size if self.args.batch_size is not None else self.rows_by_length.get(n, rows)
        return max(rows, target), n

    def padded(self, x: torch.Tensor, shape: tuple[int, int], value: int) -> torch.Tensor:
        """``x`` ``(B, N)`` right-padded with ``value`` to ``shape`` (columns, then rows)."""
        return pad_rows_to(pad_columns(x, shape[1], value), shape[0], value)

    def batch(self, sequences: list[list[int]], generator: torch.Generator) -> TokenBatch:
        """A :class:`~syntaxformer.training.batch.TokenBatch` (``input_ids``, ``attention_mask``,
        ``labels``, each ``(B, N)`` long; no ``structure_inputs``) from token ids per sequence; any
        randomness from ``generator``."""
        raise NotImplementedError

    def n_targets(self, labels: torch.Tensor) -> int:
        """How many tokens the model's loss averages over for ``labels`` ``(B, N)``."""
        raise NotImplementedError


class MaskedLM(Objective):
    """BERT masking (module docstring); every selected token is a target.

    Raises:
        InputError: a tokenizer without ``[MASK]`` (at construction).
    """

    name = "masked-lm"
    description = "masked LM: predict the selected tokens (BERT masking)"

    def __init__(self, args, tokenizer, special_ids: list[int]):
        super().__init__(args, tokenizer, special_ids)
        if tokenizer.mask_token_id is None:
            raise InputError("the masked-LM objective needs a tokenizer with a [MASK] token")

    def batch(self, sequences, generator):
        ids, attention_mask = pad_batch(sequences, self.tokenizer.pad_token_id)  # (B, N): masks drawn at N
        inputs, labels = mask_tokens(
            ids,
            attention_mask,
            self.tokenizer.mask_token_id,
            len(self.tokenizer),
            self.args.mask_rate,
            generator,
            self.special_ids,
            **MASK_REPLACE[self.args.mask_replace],
        )
        shape = self.batch_shape(*ids.shape)  # then padded on: the same masks
        inputs, attention_mask = (
            self.padded(inputs, shape, self.tokenizer.pad_token_id),
            self.padded(attention_mask, shape, 0),
        )
        labels = self.padded(labels, shape, IGNORE_INDEX)
        return TokenBatch(inputs, attention_mask, labels, masked_positions=self.positions(labels))

    def positions(self, labels: torch.Tensor) -> torch.Tensor:
        """The batch's ``masked_positions`` from its ``labels`` ``(B, N)``: ``(M,)``
        (:func:`~syntaxformer.blocks.mlm_head.labelled_positions`), or with ``fixed_shapes`` a list of
        :func:`mask_capacity` entries (module docstring)."""
        if not self.fixed_shapes:
            return labelled_positions(labels)
        size = mask_capacity(*labels.shape, self.args.mask_rate)
        count = int((labels != IGNORE_INDEX).sum())
        if count > size:
            if not getattr(self, "_overflow_logged", False):
                logger.info("a batch of %s has %d targets, over its fixed list of %d", tuple(labels.shape), count, size)
                self._overflow_logged = True
            size = min(labels.numel(), -(-count // 8) * 8)
        return padded_positions(labels, size)

    def n_targets(self, labels):
        return int((labels != IGNORE_INDEX).sum())


class CausalLM(Objective):
    """Next-word prediction of sentences framed by the boundary token ``[CLS]`` (module docstring).

    Raises:
        InputError: a tokenizer whose ``[CLS]`` is not :attr:`BOUNDARY_ID` (every tokenizer this
            package builds has it there), at construction.
    """

    name = "causal-lm"
    description = "causal LM: predict every next token of [CLS] w_1 .. w_n [CLS] (no masking)"
    #: the boundary token's id: ``[CLS]`` in every tokenizer of :mod:`syntaxformer.data.tokenization`
    BOUNDARY_ID = BOUNDARY_ID
    config_defaults = {"parse_prefix_token_id": BOUNDARY_ID}

    def __init__(self, args, tokenizer, special_ids: list[int]):
        super().__init__(args, tokenizer, special_ids)
        if tokenizer.cls_token_id != self.BOUNDARY_ID:
            raise InputError(
                f"the causal-LM objective frames sentences with [CLS] = id {self.BOUNDARY_ID}; "
                f"this tokenizer has {tokenizer.cls_token_id}"
            )

    #: ``[CLS] ids [CLS]`` (:func:`syntaxformer.data.tokenization.frame_sentence`)
    frame = staticmethod(frame_sentence)

    def framed_length(self, n):
        return len(self.frame([0] * n))

    def batch(self, sequences, generator):
        ids, attention_mask = pad_batch([self.frame(s) for s in sequences], self.tokenizer.pad_token_id)
        shape = self.batch_shape(*ids.shape)
        ids, attention_mask = (
            self.padded(ids, shape, self.tokenizer.pad_token_id),
            self.padded(attention_mask, shape, 0),
        )
        labels = ids.masked_fill(attention_mask == 0, IGNORE_INDEX)  # (B, N)
        return TokenBatch(ids, attention_mask, labels)

    def n_targets(self, labels):
        return int((labels[:, 1:] != IGNORE_INDEX).sum())  # the model scores labels[:, 1:]


#: objective name (a model class's ``objective``) -> :class:`Objective` subclass
OBJECTIVES: dict[str, type[Objective]] = {"masked-lm": MaskedLM, "causal-lm": CausalLM}


def objective_name(model_class) -> str:
    """The objective a model class is trained for: its ``objective`` attribute, else ``"masked-lm"``."""
    return getattr(model_class, "objective", "masked-lm")


def objective_class(model_class) -> type[Objective]:
    """The :class:`Objective` subclass of ``model_class``.

    Raises:
        InputError: an objective name not in :data:`OBJECTIVES`.
    """
    name = objective_name(model_class)
    if name not in OBJECTIVES:
        raise InputError(
            f"{model_class.__name__} is trained for {name!r}, which the trainer does not know "
            f"(objectives: {', '.join(sorted(OBJECTIVES))})"
        )
    return OBJECTIVES[name]


def build_objective(model_class, args, tokenizer, special_ids: list[int]) -> Objective:
    """The objective of a run: :func:`objective_class` of the model built with the run's options.

    Raises:
        InputError: an unknown objective, or a tokenizer the objective cannot use.
    """
    return objective_class(model_class)(args, tokenizer, special_ids)


__all__ = [
    "FIXED_MULTIPLE",
    "MASK_CAPACITY_MARGIN",
    "mask_capacity",
    "pad_rows_to",
    "Objective",
    "MaskedLM",
    "CausalLM",
    "OBJECTIVES",
    "objective_name",
    "objective_class",
    "build_objective",
]
