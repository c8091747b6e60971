"""Structure sources: the per-sentence structure a prior reads (dependency trees or phrases, as the
prior declares, :attr:`syntaxformer.priors.base.StructuralPrior.structure_input`), gold from a treebank
or induced by a trained model (the value of ``--trees`` / ``--phrases``:
:class:`syntaxformer.data.structure_source.StructureSource`).

The layer above :mod:`syntaxformer.parsing` (it runs models) and below training and evaluation (which
read structures); :mod:`syntaxformer.data` holds the readers, the per-token mapping and the padding,
and runs no model.

* :mod:`~syntaxformer.sources.corpus`: a corpus with its trees / phrases (``--trees``, ``--phrases``);
* :mod:`~syntaxformer.sources.induced`: structures a trained model induces, per sentence or per masked
  input;
* :mod:`~syntaxformer.sources.checks`: which structure a model reads, as its prior declares.
"""

from syntaxformer.sources.checks import (
    check_model_phrases,
    check_model_structure,
    check_model_trees,
    model_reads_phrases,
    model_reads_trees,
    model_structure_input,
    model_tree_level,
    tree_level,
)
from syntaxformer.sources.corpus import load_phrase_trees, load_structured_corpus, load_tree_corpus
from syntaxformer.sources.induced import (
    MaskedInputInducer,
    induced_heads,
    induced_phrase_trees,
    masked_copy_structures,
    model_heads,
    model_phrase_trees,
)

__all__ = [
    "check_model_phrases",
    "check_model_structure",
    "check_model_trees",
    "model_reads_phrases",
    "model_reads_trees",
    "model_structure_input",
    "model_tree_level",
    "tree_level",
    "load_phrase_trees",
    "load_structured_corpus",
    "load_tree_corpus",
    "MaskedInputInducer",
    "induced_heads",
    "induced_phrase_trees",
    "masked_copy_structures",
    "model_heads",
    "model_phrase_trees",
]
