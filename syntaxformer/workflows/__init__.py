"""Workflows: library functions that run a whole job from explicit arguments and return its report.

A workflow is what a command of the ``syntaxformer`` command line does, minus the command line:
it takes plain Python arguments (paths, names, numbers, a
:class:`~syntaxformer.structures.DecoderOptions`), loads data and models, trains, decodes, scores,
writes its output files and returns the report as a dict (the same dict the command prints as JSON).
It knows nothing of ``argparse`` and never prints: progress goes through :mod:`logging`, and bad
input raises :class:`syntaxformer.errors.InputError`. The command line (:mod:`syntaxformer.cli`)
turns arguments into a workflow's parameters, calls it and prints the report.

* :mod:`~syntaxformer.workflows.induce` -- :func:`~syntaxformer.workflows.induce.run_induce`: train,
  parse, score against gold and baselines (``syntaxformer induce``).
* :mod:`~syntaxformer.workflows.parse` -- :func:`~syntaxformer.workflows.parse.run_parse`: parse
  sentences with a model folder and write the trees (``syntaxformer parse``).
* :mod:`~syntaxformer.workflows.outputs` -- the files a parse writes (``trees.txt``,
  ``dependencies.conllu``, ``structures.json``).
* :mod:`~syntaxformer.workflows.evaluate` -- score prediction files against gold
  (``syntaxformer evaluate``).
* :mod:`~syntaxformer.workflows.baselines` -- structure-free baselines of a treebank
  (``syntaxformer baselines``).
* :mod:`~syntaxformer.workflows.perplexity` -- masked-LM perplexity of a model folder
  (``syntaxformer perplexity``).
* :mod:`~syntaxformer.workflows.compare` -- Tree Transformer vs plain Transformers, same data, steps
  and seed (``syntaxformer compare``).
* :mod:`~syntaxformer.workflows.show` -- :func:`~syntaxformer.workflows.show.run_show`: figures of
  what a model computes for a few sentences, and an ``index.html`` (``syntaxformer show``).

Submodules are imported on use (each pulls in torch and the models).
"""
