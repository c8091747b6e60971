"""The one job runner of the studies: N jobs (processes), K at a time.

A study turns its work into :class:`Job` s (a name, a command, a log file, and how to tell that the job is
already done) and hands them to :func:`run_jobs`; its command line gets the runner's options from
:func:`add_job_options`:

``--jobs K``
    run at most K jobs at once (default 1: one after the other);
``--threads-per-job T`` (also ``--threads``)
    the torch threads each job uses (the study passes them on in the job's command);
``--dry-run``
    print every job, done or its command and log, and run nothing.

A job already done (its ``done`` check is true) is skipped, so the same command serves the first start
and every restart; the studies' jobs resume an interrupted run from its checkpoint. SIGTERM and SIGINT
sent to the runner are passed on to the running jobs (the trainers checkpoint and stop) and no new job
starts; rerun the command to go on. A job whose process exits non-zero, or that is not done when it
exits, has failed: :func:`run_jobs` returns the failures' names after the other jobs have run.

Jobs run with the repository root on ``PYTHONPATH``, so a job's command may be ``python -m benchmarks...``
(:func:`module_command`) from any working folder.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from benchmarks import ROOT

logger = logging.getLogger("benchmarks.jobs")

#: lines of a failed job's log repeated in the runner's log
TAIL_LINES = 20


@dataclass
class Job:
    """One process of a study.

    Attributes:
        name: how the runner's log names the job.
        command: the argv, or a function that builds it when the job starts (None: the job is not
            started, e.g. no time is left before a deadline).
        log: stdout and stderr are appended to this file (its folder is made); None: the runner's own.
        done: whether the job's work is already done (it is then skipped, and a job that exits without
            it being done has failed); None: a job is never done before it runs, and it succeeds when
            its process exits with status 0.
    """

    name: str
    command: list[str] | Callable[[], list[str] | None]
    log: Path | None = None
    done: Callable[[], bool] | None = None

    def is_done(self) -> bool:
        return self.done is not None and self.done()


def module_command(module: str, *arguments) -> list[str]:
    """``python -m MODULE ARGUMENTS...`` with this interpreter (arguments made strings)."""
    return [sys.executable, "-m", module, *map(str, arguments)]


def passed_on(argv: list[str]) -> list[str]:
    """A study's own arguments for the jobs it starts as itself: ``argv`` without ``--dry-run``."""
    return [a for a in argv if a != "--dry-run"]


def add_job_options(
    parser: argparse.ArgumentParser, jobs_help: str = "jobs at once", jobs: int = 1, threads: int | None = None
) -> None:
    """The runner's options, in a group of ``parser``: ``--jobs`` (default ``jobs``), ``--threads-per-job``
    / ``--threads`` (``args.threads``; default ``threads``, None: the job's own default) and ``--dry-run``."""
    group = parser.add_argument_group("jobs (benchmarks/tools/jobs.py)")
    group.add_argument("--jobs", type=int, default=jobs, help=jobs_help)
    group.add_argument(
        "--threads-per-job", "--threads", dest="threads", type=int, default=threads, help="torch threads of each job"
    )
    group.add_argument("--dry-run", action="store_true", help="print the jobs (done, or command and log); run nothing")


def job_environment() -> dict[str, str]:
    """This process's environment with the repository root first on ``PYTHONPATH``."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def describe(jobs: list[Job]) -> list[str]:
    """One line per job: ``NAME: done``, ``NAME: not started`` (its command builder said so) or
    ``NAME: COMMAND [>> LOG]`` (a command built when the job starts: as it would be built now)."""
    lines = []
    for job in jobs:
        command = None if job.is_done() else job.command() if callable(job.command) else job.command
        if command is None:
            lines.append(f"{job.name}: {'done' if job.is_done() else 'not started'}")
            continue
        lines.append(f"{job.name}: {shlex.join(command)}" + (f" >> {job.log}" if job.log else ""))
    return lines


class _Running:
    """A started job: its process and open log."""

    def __init__(self, job: Job, command: list[str]):
        self.job = job
        self.log = None
        if job.log is not None:
            job.log.parent.mkdir(parents=True, exist_ok=True)
            self.log = open(job.log, "a")
        output = dict(stdout=self.log, stderr=subprocess.STDOUT) if self.log else {}
        self.process = subprocess.Popen(command, env=job_environment(), **output)
        logger.info("started %s", job.name)

    def finish(self) -> bool:
        """Close the log; whether the job succeeded (logged, with the log's tail when it failed)."""
        if self.log is not None:
            self.log.close()
        code = self.process.returncode
        ok = code == 0 and (self.job.done is None or self.job.done())
        logger.info("%s ended (exit %d)%s", self.job.name, code, "" if ok else ": FAILED")
        if not ok and self.job.log is not None and self.job.log.is_file():
            tail = self.job.log.read_text(errors="replace").splitlines()[-TAIL_LINES:]
            logger.error("%s: the end of %s:\n%s", self.job.name, self.job.log, "\n".join(tail))
        return ok


def run_jobs(jobs: list[Job], parallel: int = 1, dry_run: bool = False, poll_seconds: float = 1.0) -> list[str]:
    """Run the jobs not yet done, in order, at most ``parallel`` at a time; with ``dry_run`` print them
    instead. Returns the names of the jobs that failed (SIGTERM / SIGINT: see the module docstring)."""
    if dry_run:
        print("\n".join(describe(jobs)))
        return []
    todo = [job for job in jobs if not job.is_done()]
    logger.info("%d jobs to do (%d done), %d at a time", len(todo), len(jobs) - len(todo), max(parallel, 1))
    running: list[_Running] = []
    failed: list[str] = []

    def stop(signum, frame):
        todo.clear()
        for started in running:
            started.process.send_signal(signal.SIGTERM)
        logger.warning("signal %d: the running jobs checkpoint and stop; rerun to go on", signum)

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while todo or running:
            while todo and len(running) < max(parallel, 1):
                job = todo.pop(0)
                command = job.command() if callable(job.command) else job.command
                if command is None:
                    logger.info("%s: not started", job.name)
                    continue
                running.append(_Running(job, command))
            time.sleep(poll_seconds if running else 0)
            for started in [r for r in running if r.process.poll() is not None]:
                running.remove(started)
                if not started.finish():
                    failed.append(started.job.name)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return failed
