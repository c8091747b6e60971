"""Readers (one per format), the field's preprocessing, the embedded ``ptb-sample``, training corpora.

* :mod:`~syntaxformer.data.embedded`: the Penn Treebank sample shipped in the package
  (``"ptb-sample"`` selects it wherever a treebank or dependency source is accepted).
* :mod:`~syntaxformer.data.treebank`: bracketed trees -> ``nltk.Tree`` (:func:`read_treebank`).
* :mod:`~syntaxformer.data.preprocess`: the PRPN / ON-LSTM / Tree Transformer preprocessing
  (:func:`preprocess_tree`, :func:`load_gold_trees`, :func:`normalise_word`).
* :mod:`~syntaxformer.data.dependency`: CoNLL-U and ``.dp`` readers, CoNLL-U writer.
* :mod:`~syntaxformer.data.text`: raw text, one sentence per line.
* :mod:`~syntaxformer.data.corpus`: training text (:func:`load_corpus`).
"""

from syntaxformer.data.corpus import load_corpus
from syntaxformer.data.dependency import (
    DependencySentence,
    read_conllu,
    read_dependencies,
    read_ptb_dependency,
    write_conllu,
)
from syntaxformer.data.embedded import PTB_SAMPLE, PTB_SAMPLE_PARTS, ptb_sample_members, ptb_sample_part
from syntaxformer.data.preprocess import (
    PRPN,
    WORD_TAGS,
    GoldTrees,
    Preprocessing,
    load_gold_trees,
    normalise_word,
    preprocess_tree,
    split_label,
    strip_function_tag,
)
from syntaxformer.data.text import read_text
from syntaxformer.data.treebank import parse_bracketed, read_treebank

__all__ = [
    "PTB_SAMPLE",
    "PTB_SAMPLE_PARTS",
    "ptb_sample_members",
    "ptb_sample_part",
    "parse_bracketed",
    "read_treebank",
    "PRPN",
    "WORD_TAGS",
    "GoldTrees",
    "Preprocessing",
    "load_gold_trees",
    "normalise_word",
    "preprocess_tree",
    "split_label",
    "strip_function_tag",
    "DependencySentence",
    "read_conllu",
    "read_ptb_dependency",
    "read_dependencies",
    "write_conllu",
    "read_text",
    "load_corpus",
]
