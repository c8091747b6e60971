"""Learning curves: unsupervised-parsing F1 of a model *during* training (``train --eval-treebank``).

:class:`ParseCurve` holds a gold treebank (e.g. ``ptb-sample:dev``, DESIGN.md §7) and, called with
the model being trained, parses its sentences (unmasked, :func:`syntaxformer.parsing.model_structures`)
and scores every decoder the model offers, with the field's protocol
(:mod:`syntaxformer.evaluation.constituency`):

* Tree Transformer: Algorithm 1 (threshold 0.8) with every minimum layer ``m = 0 .. L-1``, under the
  paper's rule (``"algorithm1_m{m}"``) and with the public code's 0.7 descend rule
  (``"algorithm1_m{m}_descend"``), and the single-layer top-down split of every layer (``"layer{l}"``);
* StructFormer: the top-down split at the largest syntactic distance (``"distance"``);
* ON-LSTM: the same split of the default layer's distances (``"distance"``) and of every layer
  (``"layer{l}"``).

Each decoder gets ``{"sentence_f1", "corpus_f1"}`` in percent (0-100). The trainer records one point
per evaluation (step 0 included: the untrained model is the control) with the step, tokens seen and
minutes, in ``training.json`` (``parse_curve``) and TensorBoard (``parse/<decoder>/sentence_f1``).
"""

from __future__ import annotations

from syntaxformer.data import load_gold_trees
from syntaxformer.decoding.spans import brackets
from syntaxformer.decoding.tree_transformer import OFFICIAL_DESCEND_THRESHOLD
from syntaxformer.evaluation.constituency import bracket_scores
from syntaxformer.parsing import model_structures


class ParseCurve:
    """Parse a gold treebank with a model and score every decoder (module docstring).

    Args:
        treebank: a :func:`~syntaxformer.data.load_gold_trees` source (``"ptb-sample:dev"``, a path).
        batch_size: sentences per forward pass.
    Raises:
        InputError: an unreadable treebank (at construction, so a bad flag fails before training).
    """

    def __init__(self, treebank: str, batch_size: int = 64):
        gold = load_gold_trees(treebank)
        self.treebank = treebank
        self.batch_size = batch_size
        self.sentences = [tree.leaves() for tree in gold]
        self.gold_brackets = [brackets(tree) for tree in gold]
        self.lengths = [len(words) for words in self.sentences]

    def __call__(self, model, tokenizer) -> dict[str, dict]:
        """Parse the treebank with ``model`` as it is now and score every decoder.

        Args:
            model: a trained parser's language model (Tree Transformer, StructFormer, ON-LSTM; any
                device); put in evaluation mode for the pass and back in its previous mode after.
            tokenizer: its tokenizer.
        Returns:
            ``{decoder name: {"sentence_f1", "corpus_f1"}}`` in percent (module docstring).
        Raises:
            InputError: as :func:`~syntaxformer.parsing.model_structures` (e.g. a plain Transformer,
                which induces no trees).
        """
        was_training = model.training
        model.eval()
        try:
            structures = model_structures(model, tokenizer, self.sentences, batch_size=self.batch_size)
        finally:
            model.train(was_training)
        decoders = [s.constituency.decoders() for s in structures]  # every decoder the structure has
        return {
            name: bracket_scores([d[name]() for d in decoders], self.gold_brackets, self.lengths)
            for name in decoders[0]
        }


def curve_decoder_name(decoder: dict, decoders) -> str:
    """The learning curve's key for the decoder settings ``decoder`` (a report's ``"decoder"``: ``layer``,
    ``min_layer``, ...) among the curve's keys ``decoders`` (module docstring): ``"layer{l}"`` for a single
    layer, else ``"distance"`` where the curve has it (StructFormer, ON-LSTM), ``"max-marginal"`` where it
    has that (the PCFGs' span marginals), else Algorithm 1's
    ``"algorithm1_m{m}"`` (no minimum layer: m = 0), ``"algorithm1_m{m}_descend"`` for the public descend
    rule (0.7, the only one the curve scores) where the curve has it (curves recorded before it was scored
    have only the paper's rule)."""
    if decoder.get("layer") is not None:
        return f"layer{decoder['layer']}"
    if "distance" in decoders:
        return "distance"
    if "max-marginal" in decoders:
        return "max-marginal"
    name = f"algorithm1_m{decoder.get('min_layer') or 0}"
    if decoder.get("descend_threshold") == OFFICIAL_DESCEND_THRESHOLD and f"{name}_descend" in decoders:
        return f"{name}_descend"
    return name


__all__ = ["ParseCurve", "curve_decoder_name"]
