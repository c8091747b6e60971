"""Reports name the code that made them (:func:`syntaxformer.runtime.code_version`)."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
from pathlib import Path

import pytest

import syntaxformer
from syntaxformer.runtime import code_version

PACKAGE = Path(syntaxformer.__file__).parent


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(PACKAGE), *args], capture_output=True, text=True)


def test_the_version_is_the_installed_packages():
    assert code_version()["version"] == importlib.metadata.version("syntaxformer")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_commit_is_the_checkouts_head_when_the_package_is_tracked():
    if _git("ls-files", "--error-unmatch", "runtime.py").returncode != 0:
        pytest.skip("the package is not tracked in a git checkout here (an installed wheel)")
    head = _git("rev-parse", "HEAD").stdout.strip()
    modified = bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".").stdout.strip())
    assert code_version() == {"version": code_version()["version"], "commit": head, "modified": modified}
    assert len(head) == 40
