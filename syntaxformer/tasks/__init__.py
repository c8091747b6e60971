"""Tasks beyond masked language modelling (DESIGN.md §6): sentence encoders, pair classification, the
propositional-logic inference task and natural-language inference, each a task of the training loop
(:class:`~syntaxformer.training.loop.TrainingLoop`).

* sentence encoders are the registry's ``encoder`` uses (:data:`syntaxformer.models.ENCODERS`: ON-LSTM,
  Tree Transformer, plain Transformer, LSTM, ON-LSTM + self-attention), pooled by
  :data:`syntaxformer.blocks.pooling.POOLINGS`.
* :mod:`~syntaxformer.tasks.pair` -- :class:`PairClassifier`: any registered encoder, pooled, and the one
  pair head (:class:`syntaxformer.blocks.pair_head.PairClassificationHead`, ``[u; v; u*v; |u-v|]`` -> MLP).
* :mod:`~syntaxformer.tasks.logic` -- the logic task's options, data, trainer and evaluation by
  operator count (``syntaxformer logic``).
* :mod:`~syntaxformer.tasks.nli` -- the sentence-pair classifier's trainer (``syntaxformer nli train``).

Submodules are imported on use.
"""
