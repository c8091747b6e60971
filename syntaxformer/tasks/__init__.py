"""Tasks beyond masked language modelling (DESIGN.md §6): sentence encoders, pair classification and
the propositional-logic inference task.

* :mod:`~syntaxformer.tasks.encoders` -- the sentence-encoder registry (:data:`ENCODERS`: ON-LSTM,
  Tree Transformer, plain Transformer, LSTM) and the poolings (:data:`POOLINGS`).
* :mod:`~syntaxformer.tasks.pair` -- :class:`PairClassifier`: ``[u; v; u*v; |u-v|]`` -> MLP.
* :mod:`~syntaxformer.tasks.logic` -- the logic task's options, data, trainer and evaluation by
  operator count (``syntaxformer logic``).

Submodules are imported on use.
"""
