"""Shared fixtures: the real corpora of ``../shared/data`` and the preprocessed embedded ptb-sample."""
from __future__ import annotations

from pathlib import Path

import pytest

#: ``../shared/data`` relative to the repository root (``/work/shared/data`` in development).
SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test when that folder is absent (e.g. a fresh clone)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"needs the shared corpora folder {SHARED_DATA} (../shared/data), which is absent")
    return SHARED_DATA


@pytest.fixture(scope="session")
def ptb_gold():
    """The 3,914 PRPN-preprocessed trees of the embedded ptb-sample (a ``GoldTrees`` list).

    Shared by the session: do not modify the trees.
    """
    from syntaxformer.data.preprocess import load_gold_trees
    return load_gold_trees("ptb-sample")
