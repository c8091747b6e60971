"""Shared fixtures: the real corpora of ``../shared/data``, the preprocessed embedded ptb-sample, tiny
model folders and a small SICK-format file. Plain functions shared by test modules are in helpers.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from helpers import SICK_HEADER, SICK_PAIRS, shared_data_folder, sick_line
from transformers.utils import logging as hf_logging

# transformers 5 draws tqdm bars on stderr when it saves or loads weights; a session fixture built
# inside a test would put them in that test's captured stderr
hf_logging.disable_progress_bar()

# without a GPU, the Triton kernels (syntaxformer/kernels/triton_prior.py) run in Triton's interpreter on
# CPU tensors, so their tests check them everywhere; it must be set before Triton's first import
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

#: ``../shared/data`` relative to the repository root (``/work/shared/data`` in development), or
#: ``$SYNTAXFORMER_SHARED_DATA`` (:func:`helpers.shared_data_folder`).
SHARED_DATA = shared_data_folder()


def _require_corpus(name: str) -> Path:
    """``SHARED_DATA / name``; skips the running test, naming the folder, when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"needs the shared corpora folder {SHARED_DATA} (../shared/data), which is absent")
    folder = SHARED_DATA / name
    if not folder.is_dir():
        pytest.skip(f"needs the shared corpus folder {folder} (../shared/data/{name}), which is absent")
    return folder


class SharedData(type(Path())):
    """``../shared/data`` whose ``/`` checks the corpus folder it enters: ``shared_data / "ud-ewt" / ...``
    skips the running test, naming ``../shared/data/ud-ewt``, when that one corpus is absent (so a
    shared folder without one corpus skips that corpus's tests, not errors). ``/`` returns a plain
    ``Path``; only the first component after the root is checked."""

    def __truediv__(self, key) -> Path:
        first = Path(key).parts[0]
        return _require_corpus(first) / Path(*Path(key).parts[1:])


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data`` (a :class:`SharedData`); skips the test when that folder is absent
    (e.g. a fresh clone), and when a corpus folder entered with ``/`` is absent (naming it)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"needs the shared corpora folder {SHARED_DATA} (../shared/data), which is absent")
    return SharedData(SHARED_DATA)


@pytest.fixture(scope="session")
def shared_corpus():
    """Factory ``shared_corpus(name) -> Path``: the folder ``../shared/data/NAME`` (e.g. ``"ud-ewt"``);
    skips the test, naming the folder, when it (or ``../shared/data``) is absent."""
    return _require_corpus


@pytest.fixture(scope="session")
def ptb_gold():
    """The 3,914 PRPN-preprocessed trees of the embedded ptb-sample (a ``GoldTrees`` list).

    Shared by the session: do not modify the trees.
    """
    from syntaxformer.data.preprocess import load_gold_trees

    return load_gold_trees("ptb-sample")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, ptb_gold):
    """Factory ``tiny_model(model="tree-transformer", tokenizer="word") -> Path``: a model folder.

    An untrained (seed 0) ``tiny`` preset model saved with ``save_pretrained`` beside its tokenizer,
    as ``syntaxformer train`` leaves it (without ``training.json``). The word tokenizer's vocabulary
    is every normalised word of ptb-sample; the WordPiece one (``tokenizer="wordpiece"``) is trained
    on 300 sentences with 300 entries, so most words split into several pieces. Built once per
    session and argument pair; skips when ``model`` is not registered in ``syntaxformer.models``.
    """
    import torch

    from syntaxformer.data.tokenization import build_word_tokenizer, build_wordpiece_tokenizer
    from syntaxformer.models import MODELS, make_config

    words = [tree.leaves() for tree in ptb_gold]  # already normalised (lower-case, digits -> N)
    folders: dict[tuple[str, str], Path] = {}

    def make(model: str = "tree-transformer", tokenizer: str = "word") -> Path:
        if model not in MODELS:
            pytest.skip(f"model {model!r} is not registered in syntaxformer.models.MODELS")
        if (model, tokenizer) not in folders:
            if tokenizer == "word":
                tok = build_word_tokenizer(words)
            else:
                tok = build_wordpiece_tokenizer(words[:300], vocab_size=300)
            torch.manual_seed(0)
            net = MODELS[model](make_config(model, "tiny", len(tok)))
            folder = tmp_path_factory.mktemp(f"{model}-{tokenizer}")
            net.save_pretrained(folder)
            tok.save_pretrained(folder)
            folders[model, tokenizer] = folder
        return folders[model, tokenizer]

    return make


@pytest.fixture
def sick_file(tmp_path):
    """A SICK-format file (CRLF line ends, as the release) with 6 TRAIN, 3 TRIAL and 3 TEST pairs."""
    lines = [SICK_HEADER]
    splits = ["TRAIN"] * 6 + ["TRIAL"] * 3 + ["TEST"] * 3
    for i, split in enumerate(splits):
        a, b, label = SICK_PAIRS[i % len(SICK_PAIRS)]
        lines.append(sick_line(i + 1, a, b, label, split))
    path = tmp_path / "SICK.txt"
    path.write_bytes("\r\n".join(lines).encode())
    return path


@pytest.fixture(autouse=True)
def _ieee_floats_between_tests():
    """Each test starts with IEEE denormals, whatever an earlier test's model forward set.

    The models and commands set ``torch.set_flush_denormal(True)`` on CPU (DESIGN.md §5); that state
    outlives a test and would break later ones that need subnormal floats (hypothesis's float
    strategies refuse to run under flush-to-zero).
    """
    import torch

    torch.set_flush_denormal(False)
    yield
    torch.set_flush_denormal(False)


@pytest.fixture
def step_clock(monkeypatch):
    """A clock of the test's own for the trainer's time limits: ``time.monotonic`` as the trainer, its
    loop and its callbacks read it stands still except for 0.7 s added by each optimizer step (so a cap
    of 0.05 minutes, 3 s, is passed by step 5: 3.5 s; step 4 is at 2.8 s). Yields the clock's dict."""
    import time
    import types

    import syntaxformer.tasks.language_model as trainer_module
    import syntaxformer.training.callbacks as callbacks_module
    import syntaxformer.training.loop as loop_module

    clock = {"now": 1000.0}
    fake_time = types.SimpleNamespace(**{name: getattr(time, name) for name in dir(time) if not name.startswith("_")})
    fake_time.monotonic = lambda: clock["now"]
    for module in (trainer_module, loop_module, callbacks_module):
        monkeypatch.setattr(module, "time", fake_time)
    real_step = trainer_module.Trainer.training_step

    def step(self, batch):
        output = real_step(self, batch)
        clock["now"] += 0.7
        return output

    monkeypatch.setattr(trainer_module.Trainer, "training_step", step)
    return clock
