"""Machine-independent study records (``docs/``): paths, and the code that ran.

A study records the folders it read (``--data``, ``--ud-ewt``, run folders) as the absolute paths of
the machine that ran it. :func:`portable` rewrites every absolute path below the folder that holds
the repository (where ``../shared/data`` lives, DESIGN.md §6) relative to the repository root, so
a record reads ``../shared/data/ud-ewt/en_ewt-ud-dev.conllu`` or ``runs/logic/on-lstm-seed0`` on any
clone. Other strings are unchanged. :func:`record_code_version` names the code a run was made by, so a
record written on one machine still says which code produced it.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks import ROOT


def portable(record, root: Path = ROOT):
    """``record`` (JSON-like: dicts, lists, strings, numbers) with every string (keys included) that
    is an absolute path under ``root.parent`` made relative to ``root``."""
    base = str(root.parent.resolve()) + os.sep

    def path(text):
        return os.path.relpath(text, root) if isinstance(text, str) and text.startswith(base) else text

    if isinstance(record, dict):
        return {path(key): portable(value, root) for key, value in record.items()}
    if isinstance(record, (list, tuple)):
        return [portable(value, root) for value in record]
    return path(record)


#: in a run folder: the commit that finished the run (:func:`record_code_version`)
CODE_JSON = "code.json"


def record_code_version(folder: Path) -> None:
    """Write :func:`syntaxformer.runtime.code_version` (package version, commit, modified flag) to
    ``folder / CODE_JSON`` (called when a study's run finishes)."""
    import json

    from syntaxformer.runtime import code_version

    (Path(folder) / CODE_JSON).write_text(json.dumps(code_version()) + "\n")
