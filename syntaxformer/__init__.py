"""syntaxformer: Transformers that induce syntax from raw text.

Conventions used everywhere in the package:

* **Spans are half-open word intervals** ``(i, j)``: the constituent covering words ``i .. j-1``
  (0-based). A sentence of ``n`` words has the whole-sentence span ``(0, n)``.
* **Link probabilities** ``a[k]`` (Tree Transformer) are indexed by the gap between words ``k`` and
  ``k+1``, ``k = 0 .. n-2``; **syntactic distances** (StructFormer) use the same gap index.
* Scores (F1, UAS, recall) are percentages, 0-100.
"""
__version__ = "0.1.0"

from transformers import AutoConfig, AutoModelForMaskedLM

from .models.structformer import StructFormerConfig, StructFormerForMaskedLM
from .models.tree_transformer import TreeTransformerConfig, TreeTransformerForMaskedLM
from .priors.constituent import ConstituentAttention
from .pretrained import load_pretrained

# `import syntaxformer` makes AutoConfig / AutoModelForMaskedLM.from_pretrained(folder) load saved models
AutoConfig.register(TreeTransformerConfig.model_type, TreeTransformerConfig, exist_ok=True)
AutoModelForMaskedLM.register(TreeTransformerConfig, TreeTransformerForMaskedLM, exist_ok=True)
AutoConfig.register(StructFormerConfig.model_type, StructFormerConfig, exist_ok=True)
AutoModelForMaskedLM.register(StructFormerConfig, StructFormerForMaskedLM, exist_ok=True)
