"""The runtime: device choice, float state and the code's identity, in one place.

* :func:`resolve_device` -- the torch device a ``--device`` value names.
* :func:`code_version` -- the package version and git commit that every report names.
* Denormal floats: the constituent prior multiplies many probabilities, and CPU arithmetic on float32
  denormals (< 1.2e-38) is 10-100× slower (DESIGN.md §5). :func:`prepare_process` sets flush-to-zero
  for the whole process before any tensor work (the command line calls it first thing: PyTorch's
  intra-op worker threads inherit the flag only when it is set before they exist);
  :func:`prepare_cpu_loop` sets it for the calling thread (the library's long CPU loops:
  training, perplexity). Importing the package and running a model's ``forward`` change nothing: where
  flush-to-zero is off (:func:`flush_to_zero_is_on`), the attention kernels flush the values they
  produce themselves, so results agree either way.
* The CPU allocator: glibc's ``malloc`` gives every block above its mmap threshold (at most 32 MB, set
  by the sizes freed before) fresh pages from the kernel and returns them on ``free``; a training step
  allocates and frees its activations and gradients (megabytes each, a 4,096-token batch's logits
  160 MB) every step, so each step page-faults on all of them anew: a quarter of a CPU step's time
  went to the kernel (DESIGN.md §5). :func:`tune_cpu_allocator` (called by :func:`prepare_process`)
  raises both glibc thresholds so that freed memory is kept and reused.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from syntaxformer.errors import InputError


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """The torch device a ``--device`` value names; ``None`` = CUDA if available, else CPU.

    Raises:
        InputError: not a device name (e.g. ``"gpu"``), or a CUDA device this machine lacks.
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise InputError(f"--device {device!r} is not a torch device: {str(e).splitlines()[0]}") from None
    if resolved.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (resolved.index is not None and resolved.index >= count):
            raise InputError(f"--device {device!r}: this machine has {count} CUDA device(s)")
    return resolved


def prepare_process() -> None:
    """Process-wide CPU settings, before any tensor work: flush denormal floats to zero, and glibc's
    allocator keeps freed memory for reuse (:func:`tune_cpu_allocator`; module docstring)."""
    torch.set_flush_denormal(True)
    tune_cpu_allocator()


#: ``mallopt`` parameters (glibc's ``malloc.h``)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: bytes: blocks below it come from the heap, not fresh pages; free memory up to it stays in the process
ALLOCATOR_THRESHOLD = 1 << 30
#: set to ``default`` to leave glibc's allocator as it is (the process then gives freed memory back sooner)
ALLOCATOR_VARIABLE = "SYNTAXFORMER_MALLOC"


@functools.cache
def tune_cpu_allocator() -> bool:
    """Raise glibc's mmap and trim thresholds to :data:`ALLOCATOR_THRESHOLD` (``mallopt(3)``; the
    environment's ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` set the same before a process
    starts), so a loop's allocations of the same sizes reuse the memory freed before instead of
    page-faulting on fresh pages every time (module docstring; PyTorch's performance tuning guide
    swaps the allocator for the same reason). The process keeps up to that much freed memory.

    Returns:
        True where set (Linux with glibc, :data:`ALLOCATOR_VARIABLE` not ``default``); False elsewhere
        (other systems and C libraries keep their allocators), once per process.
    """
    if not sys.platform.startswith("linux") or os.environ.get(ALLOCATOR_VARIABLE) == "default":
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, ALLOCATOR_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, ALLOCATOR_THRESHOLD))


def prepare_cpu_loop(device: torch.device) -> None:
    """When ``device`` is a CPU: ``torch.set_flush_denormal(True)`` for the calling thread, and the
    allocator's thresholds raised for the process (:func:`tune_cpu_allocator`).

    The flush flag is per thread; worker threads created earlier keep theirs (module docstring). Called
    by the library's long CPU loops (training, perplexity), never by a model's ``forward``.
    """
    if torch.device(device).type == "cpu":
        torch.set_flush_denormal(True)
        tune_cpu_allocator()


def flush_to_zero_is_on() -> bool:
    """Whether the calling thread's float arithmetic flushes denormals to zero on CPU.

    A one-element probe (``1e-30 · 1e-10`` is a float32 denormal), a few microseconds. The product is
    taken by numpy, in the same thread's floating-point unit whose flush flag ``torch.set_flush_denormal``
    sets, so the probe runs no torch operation (a training step's kernels ask it; it must not show as a
    read of a tensor's value).
    """
    return float(np.float32(1e-30) * np.float32(1e-10)) == 0.0


def _git(*args: str) -> str | None:
    """Output of ``git -C <this package> args`` (stripped), or None where git or a checkout is absent."""
    try:
        done = subprocess.run(
            ["git", "-C", str(Path(__file__).parent), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.cache
def code_version() -> dict:
    """The code that runs, as reports name it: ``{"version", "commit", "modified"}``.

    ``version`` is the installed package's (``importlib.metadata``; ``"unknown"`` when not installed).
    ``commit`` is the git commit of the checkout this package's files are tracked in (an editable
    install of a clone), ``modified`` whether its tracked files under ``syntaxformer/`` differ from that
    commit; both None for an installed wheel or without git. Cached for the process.
    """
    try:
        version = importlib.metadata.version("syntaxformer")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    tracked = _git("ls-files", "--error-unmatch", Path(__file__).name)
    commit = _git("rev-parse", "HEAD") if tracked else None
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".") if commit else None
    return {"version": version, "commit": commit, "modified": None if status is None else bool(status)}
