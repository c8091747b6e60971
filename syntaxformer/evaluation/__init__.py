"""The field's evaluation protocols (DESIGN.md §4): one evaluator per task, used by every command.

* :mod:`~syntaxformer.evaluation.constituency`: unlabelled bracket F1 — sentence-level (PRPN rule),
  corpus-level (micro), WSJ-10, per-label recall, mean depth (:func:`evaluate_constituency`).
* :mod:`~syntaxformer.evaluation.protocols`: every paper's constituency scoring protocol side by
  side (``prpn`` = the above, ``cpcfg``, ``cpcfg-trees``, ``evalb``; :data:`PROTOCOLS`).
* :mod:`~syntaxformer.evaluation.dependency`: UAS / UUAS, punctuation excluded
  (:func:`evaluate_dependency`).
* :mod:`~syntaxformer.evaluation.baselines`: left/right-branching, random and balanced binary trees,
  left/right dependency chains (:func:`run_baselines`).
* :mod:`~syntaxformer.evaluation.report`: plain-text tables and JSON shared by the commands' reports.
* :mod:`~syntaxformer.evaluation.perplexity`: masked-LM perplexity (imported on its own; needs torch).
"""

from syntaxformer.evaluation.baselines import (
    balanced,
    baseline_trees,
    left_branching,
    left_chain,
    random_binary,
    right_branching,
    right_chain,
    run_baselines,
)
from syntaxformer.evaluation.constituency import PROTOCOL as CONSTITUENCY_PROTOCOL
from syntaxformer.evaluation.constituency import (
    GoldBrackets,
    bracket_depth,
    bracket_scores,
    corpus_f1,
    evaluate_constituency,
    read_gold_brackets,
    sentence_f1,
)
from syntaxformer.evaluation.dependency import PROTOCOL as DEPENDENCY_PROTOCOL
from syntaxformer.evaluation.dependency import evaluate_dependency, reattach_heads
from syntaxformer.evaluation.protocols import PROTOCOLS, Protocol, get_protocol

__all__ = [
    "CONSTITUENCY_PROTOCOL",
    "GoldBrackets",
    "read_gold_brackets",
    "bracket_scores",
    "corpus_f1",
    "evaluate_constituency",
    "sentence_f1",
    "bracket_depth",
    "DEPENDENCY_PROTOCOL",
    "evaluate_dependency",
    "reattach_heads",
    "PROTOCOLS",
    "Protocol",
    "get_protocol",
    "balanced",
    "baseline_trees",
    "left_branching",
    "left_chain",
    "random_binary",
    "right_branching",
    "right_chain",
    "run_baselines",
]
