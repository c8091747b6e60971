"""The studies' job runner (``benchmarks/tools/jobs.py``): K jobs at a time, done jobs skipped, failures
named, ``--dry-run`` prints and runs nothing; tiny ``python -c`` jobs, no study."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.tools.jobs import Job, add_job_options, describe, passed_on, run_jobs


def write_job(name: str, folder: Path, code: str = "pass") -> Job:
    """A job that runs ``code`` then writes ``folder/NAME`` (its work), done when that file exists."""
    out = folder / name
    command = [sys.executable, "-c", f"{code}; import pathlib; pathlib.Path({str(out)!r}).write_text('x')"]
    return Job(name, command, log=folder / f"{name}.log", done=out.is_file)


def test_jobs_run_skip_the_done_and_name_the_failures(tmp_path):
    (tmp_path / "done").write_text("x")
    ran_before = (tmp_path / "done").stat().st_mtime_ns
    jobs = [
        write_job("a", tmp_path, "print('job a')"),
        write_job("done", tmp_path),
        Job("exits-1", [sys.executable, "-c", "raise SystemExit(1)"], log=tmp_path / "exits-1.log"),
        Job("not-done", [sys.executable, "-c", "pass"], done=lambda: False),
        Job("not-started", lambda: None),
    ]
    failed = run_jobs(jobs, parallel=2, poll_seconds=0.05)
    assert failed == ["exits-1", "not-done"]
    assert (tmp_path / "a").is_file() and "job a" in (tmp_path / "a.log").read_text()
    assert (tmp_path / "done").stat().st_mtime_ns == ran_before  # skipped
    assert not (tmp_path / "done.log").exists()


def test_at_most_k_jobs_at_once(tmp_path):
    """Each job records how many jobs' marker files exist while it runs; with K = 2 never more than 2."""
    code = (
        "import pathlib, time\n"
        f"folder = pathlib.Path({str(tmp_path)!r})\n"
        "me = folder / f'running-{time.time_ns()}'; me.write_text('')\n"
        "time.sleep(0.3)\n"
        "(folder / f'seen-{me.name}').write_text(str(len(list(folder.glob('running-*')))))\n"
        "me.unlink()\n"
    )
    jobs = [Job(f"j{i}", [sys.executable, "-c", code]) for i in range(5)]
    assert run_jobs(jobs, parallel=2, poll_seconds=0.05) == []
    seen = [int(p.read_text()) for p in tmp_path.glob("seen-*")]
    assert len(seen) == 5 and max(seen) <= 2


def test_dry_run_prints_and_runs_nothing(tmp_path, capsys):
    (tmp_path / "done").write_text("x")
    jobs = [write_job("a", tmp_path), write_job("done", tmp_path), Job("later", lambda: None)]
    assert run_jobs(jobs, parallel=3, dry_run=True) == []
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("a: ") and lines[0].endswith(f" >> {tmp_path / 'a.log'}")
    assert lines[1:] == ["done: done", "later: not started"] == describe(jobs)[1:]
    assert not (tmp_path / "a").exists()


def test_the_one_option_set():
    parser = argparse.ArgumentParser()
    add_job_options(parser, jobs=3, threads=1)
    args = parser.parse_args([])
    assert (args.jobs, args.threads, args.dry_run) == (3, 1, False)
    args = parser.parse_args(["--jobs", "4", "--threads-per-job", "2", "--dry-run"])
    assert (args.jobs, args.threads, args.dry_run) == (4, 2, True)
    assert parser.parse_args(["--threads", "5"]).threads == 5  # the studies' earlier name
    assert passed_on(["--jobs", "3", "--dry-run", "--seeds", "0"]) == ["--jobs", "3", "--seeds", "0"]
