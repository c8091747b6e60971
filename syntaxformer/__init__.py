"""syntaxformer: Transformers that induce syntax from raw text.

Conventions used everywhere in the package:

* **Spans are half-open word intervals** ``(i, j)``: the constituent covering words ``i .. j-1``
  (0-based). A sentence of ``n`` words has the whole-sentence span ``(0, n)``.
* **Link probabilities** ``a[k]`` (Tree Transformer) are indexed by the gap between words ``k`` and
  ``k+1``, ``k = 0 .. n-2``; **syntactic distances** (StructFormer) use the same gap index.
* Scores (F1, UAS, recall) are percentages, 0-100.
"""

import sys as _sys

__version__ = "0.1.0"

# `import syntaxformer` registers the models (syntaxformer.models: the registry, and the Auto classes, so
# AutoConfig / AutoModelForMaskedLM.from_pretrained(folder) load saved models)
from .models import (
    REGISTRY,
    StructFormerConfig,
    StructFormerForMaskedLM,
    TreeTransformerConfig,
    TreeTransformerForMaskedLM,
)
from .parser import Parser, load_parser, parse
from .pretrained import load_pretrained
from .priors.constituent import ConstituentAttention


def load_translator(model="multi30k-en-de", device=None, beam: int = 5, batch_size: int = 64):
    """A translator (raw text in, raw text out) from a folder ``translation train`` wrote or a shipped
    name: :func:`syntaxformer.tasks.translator.load_translator` (imported on first use)."""
    from .tasks.translator import load_translator as load

    return load(model, device=device, beam=beam, batch_size=batch_size)


if _sys.modules.get("spacy") is not None:  # spaCy already imported: register the "syntaxformer" pipeline component now
    from . import spacy_component  # noqa: F401  (otherwise spaCy imports it through its entry point)

__all__ = [
    "__version__",
    "REGISTRY",
    "StructFormerConfig",
    "StructFormerForMaskedLM",
    "TreeTransformerConfig",
    "TreeTransformerForMaskedLM",
    "Parser",
    "load_parser",
    "parse",
    "load_pretrained",
    "load_translator",
    "ConstituentAttention",
]
