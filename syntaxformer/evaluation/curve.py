"""Learning curves: unsupervised-parsing F1 of a model *during* training (``train --eval-treebank``).

:class:`ParseCurve` holds a gold treebank (e.g. ``ptb-sample:dev``, DESIGN.md §7) and, called with
the model being trained, parses its sentences (unmasked, :func:`syntaxformer.parsing.model_structures`)
and scores every decoder the model offers, with the field's protocol
(:mod:`syntaxformer.evaluation.constituency`):

* Tree Transformer: Algorithm 1 (threshold 0.8) with every minimum layer ``m = 0 .. L-1``
  (``"algorithm1_m{m}"``) and the single-layer top-down split of every layer (``"layer{l}"``);
* StructFormer: the top-down split at the largest syntactic distance (``"distance"``).

Each decoder gets ``{"sentence_f1", "corpus_f1"}`` in percent (0-100). The trainer records one point
per evaluation (step 0 included: the untrained model is the control) with the step, tokens seen and
minutes, in ``training.json`` (``parse_curve``) and TensorBoard (``parse/<decoder>/sentence_f1``).
"""
from __future__ import annotations

from collections.abc import Sequence

from syntaxformer.data import load_gold_trees
from syntaxformer.decoding.spans import Span, brackets, split_by_distance
from syntaxformer.decoding.tree_transformer import algorithm1, single_layer
from syntaxformer.evaluation.constituency import corpus_f1, sentence_f1


def bracket_scores(pred_spans: Sequence[set[Span]], gold_brackets: Sequence[set[Span]],
                   lengths: Sequence[int]) -> dict:
    """Sentence-level and corpus-level unlabelled F1 (percent) of span sets against gold brackets.

    The two headline numbers of :func:`~syntaxformer.evaluation.constituency.score_brackets`, without
    its label recall, WSJ-10 and depth (a training-time evaluation runs this many times).

    Args:
        pred_spans: one set of half-open spans per sentence (any length; lengths < 2 and the whole
            sentence are ignored).
        gold_brackets: the gold brackets (:func:`~syntaxformer.decoding.spans.brackets`) per sentence.
        lengths: words per sentence.
    Returns:
        ``{"sentence_f1": float, "corpus_f1": float}`` in percent.
    """
    f1s, tp, n_pred, n_gold = [], 0, 0, 0
    for spans, gold, n in zip(pred_spans, gold_brackets, lengths, strict=True):
        pred = {(i, j) for i, j in spans if j - i >= 2 and (i, j) != (0, n)}
        f1s.append(sentence_f1(pred, gold))
        if n > 1:
            tp, n_pred, n_gold = tp + len(pred & gold), n_pred + len(pred), n_gold + len(gold)
    return {"sentence_f1": 100 * sum(f1s) / max(1, len(f1s)), "corpus_f1": 100 * corpus_f1(tp, n_pred, n_gold)}


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
        """``{decoder name: {"sentence_f1", "corpus_f1"}}`` (percent) for ``model`` as it is now.

        The model is put in evaluation mode for the pass and back in its previous mode after.
        """
        from syntaxformer.parsing import model_structures
        was_training = model.training
        model.eval()
        try:
            structures = model_structures(model, tokenizer, self.sentences, batch_size=self.batch_size)
        finally:
            model.train(was_training)
        decoders = {}
        if structures[0].link_probs is not None:
            n_layers = structures[0].link_probs.shape[0]
            for m in range(n_layers):
                decoders[f"algorithm1_m{m}"] = lambda s, m=m: algorithm1(s.link_probs, min_layer=m)
            for layer in range(n_layers):
                decoders[f"layer{layer}"] = lambda s, layer=layer: single_layer(s.link_probs[layer])
        else:
            decoders["distance"] = lambda s: split_by_distance(list(s.distances))
        return {name: bracket_scores([decode(s) for s in structures], self.gold_brackets, self.lengths)
                for name, decode in decoders.items()}


__all__ = ["ParseCurve", "bracket_scores"]
