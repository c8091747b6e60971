"""benchmarks/speed/compile_trace.py where it cannot run: a CPU build of PyTorch cannot make fake CUDA
tensors, so it says what it needs and exits 2, writing nothing. (With a CUDA build it traces every case:
its records in records/benchmarks/compile-trace-*.json; docs/results/speed.md.)"""

from __future__ import annotations

import pytest
import torch

from benchmarks.speed import compile_trace


@pytest.mark.skipif(torch.version.cuda is not None, reason="a CUDA build of PyTorch: the script runs for real")
def test_a_cpu_build_of_pytorch_is_refused_with_one_line(tmp_path, capsys):
    out = tmp_path / "trace.json"
    assert compile_trace.main(["--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["compile_trace: needs a CUDA build of PyTorch (no GPU needed); see the module docstring"]
    assert not out.exists()
