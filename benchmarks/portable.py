"""Machine-independent study records (``docs/``): paths, and the code that ran.

A study records the folders it read (``--data``, ``--ud-ewt``, run folders) as the absolute paths of
the machine that ran it. :func:`portable` rewrites every absolute path below the folder that holds
the repository (where ``../shared/data`` lives, DESIGN.md §6) relative to the repository root, so
a record reads ``../shared/data/ud-ewt/en_ewt-ud-dev.conllu`` or ``runs/logic/on-lstm-seed0`` on any
clone. Other strings are unchanged. :func:`code_version` names the commit a run was made by, so a
record written on one machine still says which code produced it.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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


def code_version(root: Path = ROOT) -> dict | None:
    """The code a study ran: ``{"commit": full hash, "modified": tracked files differ from it}`` of the
    repository at ``root``, or None outside a git checkout (or without git)."""
    import subprocess

    def git(*argv):
        return subprocess.run(["git", "-C", str(root), *argv], capture_output=True, text=True, check=True).stdout

    try:
        return dict(
            commit=git("rev-parse", "HEAD").strip(),
            modified=bool(git("status", "--porcelain", "--untracked-files=no").strip()),
        )
    except (OSError, subprocess.CalledProcessError):
        return None


#: in a run folder: the commit that finished the run (:func:`record_code_version`)
CODE_JSON = "code.json"


def record_code_version(folder: Path, root: Path = ROOT) -> None:
    """Write :func:`code_version` to ``folder / CODE_JSON`` (called when a study's run finishes)."""
    import json

    (Path(folder) / CODE_JSON).write_text(json.dumps(code_version(root)) + "\n")
