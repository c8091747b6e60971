"""Linguistic probing of frozen encoders (Conneau et al., ACL 2018; DESIGN.md §6): the tasks built
from gold trees (:mod:`~syntaxformer.probing.tasks`), mean-pooled sentence vectors per layer
(:mod:`~syntaxformer.probing.features`) and the probe classifiers (:mod:`~syntaxformer.probing.classifiers`).
``syntaxformer probe`` runs them (:mod:`syntaxformer.workflows.probe`)."""

from syntaxformer.probing.tasks import TASKS, WORD_TASKS, ProbeItem, build_tasks, write_task_files

__all__ = ["TASKS", "WORD_TASKS", "ProbeItem", "build_tasks", "write_task_files"]
