"""The ``kernel`` config field: one switch per model for how its math is computed.

Every model whose math has fast paths takes one config field, ``kernel``:

``"reference"`` (the default)
    the equations as written in :mod:`syntaxformer.priors`, :mod:`syntaxformer.blocks` and
    :mod:`syntaxformer.models`, differentiated by autograd; the numerics of every recorded run.
``"fused"``
    hand-written PyTorch kernels (:mod:`syntaxformer.kernels`) for the same functions; float rounding
    differs. Only the Tree Transformer's constituent prior has them
    (:mod:`syntaxformer.kernels.constituent`); a model without them refuses the value.
``"triton"``
    Triton kernels (:mod:`syntaxformer.kernels`'s ``triton_*`` modules) where
    :func:`~syntaxformer.kernels.triton_runs_on` the tensors' device and the batch fits them; elsewhere
    the path each family names (the constituent prior: ``"fused"``; the others: ``"reference"``).

Each family resolves the value once, when its module is built, into the function its forward calls (a
table per family: :data:`~syntaxformer.priors.constituent.LINK_CHAIN_KERNELS`,
:data:`~syntaxformer.blocks.on_lstm.CELL_KERNELS`,
:data:`~syntaxformer.models.structformer_parse.PARSE_STAGE_KERNELS`,
:data:`~syntaxformer.models.structformer.ATTENTION_KERNELS`). Hugging Face's ``attn_implementation``
(``"eager"`` / ``"sdpa"``) stays a field of its own.

Before this field each family had its own (:data:`OLD_KERNEL_FIELDS`): a config's ``__init__`` still
takes its model's old field and maps it (:func:`resolve_kernel`), so saved configs and ``--set``
spellings keep working; a saved config writes ``kernel`` only.
"""

from __future__ import annotations

#: every value of the ``kernel`` field, in the order of the module docstring
KERNELS = ("reference", "fused", "triton")

#: the fields the ``kernel`` field replaces: ``{old field: {old value: kernel}}``
OLD_KERNEL_FIELDS = {
    # the Tree Transformer family (the constituent prior)
    "constituent_fused": {False: "reference", True: "fused", "triton": "triton"},
    # StructFormer's parse stage and attention
    "dependency_kernel": {"autograd": "reference", "triton": "triton"},
    # the ON-LSTM cell (ON-LSTM and ON-LSTM-SAN)
    "cell_kernel": {"autograd": "reference", "triton": "triton"},
}


def _old_kernel(field: str, value) -> str:
    """The kernel an old field's value names. Raises ValueError for a value the old field never took."""
    mapping = OLD_KERNEL_FIELDS[field]
    try:
        return mapping[value]
    except (KeyError, TypeError):  # TypeError: an unhashable value (a list from --set)
        raise ValueError(f"unknown {field} {value!r}; expected one of {tuple(mapping)}") from None


def resolve_kernel(kernel: str | None, allowed, old_field: str, kwargs: dict, model: str) -> str:
    """The ``kernel`` of a config from its ``kernel`` argument and its model's old field.

    Args:
        kernel: the ``kernel`` argument (None: not given).
        allowed: the values the model takes (a subset of :data:`KERNELS`, in that order).
        old_field: the model's old field (a key of :data:`OLD_KERNEL_FIELDS`).
        kwargs: the config's other keyword arguments; ``old_field`` is removed from them when there, so
            that it is neither stored nor saved.
        model: the model's name, for the messages.
    Returns:
        One of ``allowed``: ``kernel``, else what the old field maps to, else ``"reference"``.
    Raises:
        ValueError: a ``kernel`` not in ``allowed`` (naming the allowed values), an old field's value it
            never took, or an old field that names another kernel than ``kernel``.
    """
    old = _old_kernel(old_field, kwargs.pop(old_field)) if old_field in kwargs else None
    if kernel is not None and old is not None and kernel != old:
        raise ValueError(f"kernel={kernel!r} and {old_field} (kernel={old!r}) disagree: give kernel alone")
    chosen = kernel if kernel is not None else old if old is not None else "reference"
    if chosen not in allowed:
        missing = f"{model} has no {chosen!r} kernel; " if chosen in KERNELS else f"unknown kernel {chosen!r}; "
        raise ValueError(f"{missing}expected one of {tuple(allowed)}")
    return chosen


def accepted_fields(config) -> set[str]:
    """The fields a config takes by name: those it saves (``to_dict``) and its model's old kernel field
    (the class attribute ``old_kernel_field``, where it has one), for checking ``--set`` overrides."""
    old = getattr(type(config), "old_kernel_field", None)
    return set(config.to_dict()) | ({old} if old else set())


__all__ = ["KERNELS", "OLD_KERNEL_FIELDS", "resolve_kernel", "accepted_fields"]
