"""What the training loop (:class:`~syntaxformer.training.loop.TrainingLoop`) trains, one module per task:
the language models, running text, fine-tuning with head gates, sentence encoders, pair classification,
the propositional-logic inference task and natural-language inference (DESIGN.md §6); and the
distillation of an ensemble's trees into one student.

* :mod:`~syntaxformer.tasks.language_model` -- :class:`Trainer`: the masked / causal LM task (every model of
  the registry), its data (:mod:`~syntaxformer.tasks.language_model_data`); :mod:`~syntaxformer.tasks.run`
  -- ``train(args)``, the ``syntaxformer train`` run (the LM, fine-tuning or running text).
* :mod:`~syntaxformer.tasks.running_text` -- the AWD-LSTM procedure on running text (``--bptt``).
* :mod:`~syntaxformer.tasks.finetune` -- fine-tuning a trained model, with hard-concrete head gates.
* :mod:`~syntaxformer.tasks.distill` -- an ensemble's trees taught to one student's syntactic distances.

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
