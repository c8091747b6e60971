"""The CPU allocator setting of :func:`syntaxformer.runtime.tune_cpu_allocator`: with it, a loop that
allocates and frees the same large tensor reuses the memory instead of page-faulting on fresh pages
every time; without it (glibc's default, or ``SYNTAXFORMER_MALLOC=default``) every 64 MB tensor costs
its 16,384 pages anew, ten times over. Each case runs in its own process (the setting is process-wide)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator is Linux's")

CYCLES = 10
PAGES = 64 * 1024 * 1024 // 4096  # a 64 MB tensor, above glibc's largest default mmap threshold (32 MB)

PROGRAM = f"""
import resource, torch
from syntaxformer.runtime import prepare_process, tune_cpu_allocator
prepare_process()
def cycle():
    x = torch.ones({PAGES * 1024})  # float32: {PAGES} pages
    del x
cycle()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range({CYCLES}):
    cycle()
print(tune_cpu_allocator(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(**environment) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")} | environment
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, check=True)
    tuned, faults = done.stdout.split()
    return tuned, int(faults)


def test_a_tuned_process_reuses_freed_memory_and_the_default_faults_on_every_page():
    tuned, faults = page_faults()
    default, default_faults = page_faults(SYNTAXFORMER_MALLOC="default")
    if tuned != "True":
        pytest.skip("this C library is not glibc (no mallopt)")
    assert default == "False"
    assert default_faults >= CYCLES * PAGES  # every cycle touches fresh pages
    # the memory freed by one cycle serves the next: at most one tensor's pages over all the cycles (the heap
    # grows once more when the aligned block does not fit the space freed)
    assert faults <= PAGES + 100
