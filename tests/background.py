"""Child processes whose output a test checks, run beside the other tests.

A test that starts a child process and only waits for it (a linter, a live
TensorFlow recording, a case that must crash TensorFlow) leaves a core idle
while it waits. Such a child is defined here as a job, when its test module
is imported; the test carries ``@pytest.mark.background(key)``. Once the
session has collected its tests, the jobs of the selected ones run one at a
time in a thread of their own (``start_for``), in the order of their tests,
while the session's other tests run; the test then checks ``result(key)``.
A job not yet started when its test comes runs in the test itself, as if it
were not a job. At the session's end (``stop``) a child still running is
killed by its pid.

A job is defined only where its test would run it: a test that skips (the
tool is not installed) has no job, and its marker is ignored.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class Job:
    """One child process: ``argv`` run in ``cwd`` with ``env``, bounded by ``timeout``."""

    def __init__(self, argv: list[str], env: dict[str, str] | None, timeout: float) -> None:
        self.argv = argv
        self.env = env
        self.timeout = timeout
        self.claimed = False  # under _LOCK: a thread has started (or is about to start) it
        self.done = threading.Event()
        self.popen: subprocess.Popen[str] | None = None
        self.outcome: subprocess.CompletedProcess[str] | BaseException | None = None

    def run(self) -> None:
        try:
            with _LOCK:  # so that ``stop`` sees every child started
                if _STOPPED:
                    raise RuntimeError("the session has ended")
                self.popen = subprocess.Popen(
                    self.argv,
                    cwd=ROOT,
                    env=self.env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            try:
                out, err = self.popen.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired as expired:
                self.popen.kill()
                self.popen.communicate()
                self.outcome = expired
            else:
                self.outcome = subprocess.CompletedProcess(
                    self.argv, self.popen.returncode, out, err
                )
        except BaseException as error:  # handed to the test, which raises it
            self.outcome = error
        finally:
            self.done.set()


_LOCK = threading.Lock()
_JOBS: dict[str, Job] = {}
_QUEUE: list[Job] = []
_RUNNER: threading.Thread | None = None
_TEMP: list[Path] = []
_STOPPED = False


def define(
    key: str, argv: list[str], env: dict[str, str] | None = None, timeout: float = 600
) -> str:
    """Define the job ``key`` (a second definition of the same key is ignored); returns ``key``."""
    with _LOCK:
        _JOBS.setdefault(key, Job(argv, env, timeout))
    return key


def defined(key: str) -> bool:
    return key in _JOBS


def scratch() -> Path:
    """A directory for the jobs' output files, removed by ``stop``."""
    with _LOCK:
        if not _TEMP:
            _TEMP.append(Path(tempfile.mkdtemp(prefix="tf_accum-jobs-")))
        return _TEMP[0]


def _claim(job: Job) -> bool:
    with _LOCK:
        if job.claimed:
            return False
        job.claimed = True
        return True


def _run_queue() -> None:
    while True:
        with _LOCK:
            if not _QUEUE:
                return
            job = _QUEUE.pop(0)
        if _claim(job):
            job.run()


def start_for(items: Iterable[Any]) -> None:
    """Start the jobs the ``background`` markers of ``items`` (pytest items) name."""
    global _RUNNER
    keys = []
    for item in items:
        for mark in item.iter_markers("background"):
            key = mark.args[0]
            if key in _JOBS and key not in keys:
                keys.append(key)
    with _LOCK:
        _QUEUE.extend(_JOBS[key] for key in keys if not _JOBS[key].claimed)
        if not _QUEUE or (_RUNNER is not None and _RUNNER.is_alive()):
            return
        _RUNNER = threading.Thread(target=_run_queue, name="background jobs", daemon=True)
        _RUNNER.start()


def result(key: str) -> subprocess.CompletedProcess[str]:
    """The finished job's outcome (run here and now if it has not started).

    Raises:
        subprocess.TimeoutExpired: the child ran past the job's timeout (it was killed).
    """
    job = _JOBS[key]
    if _claim(job):
        job.run()
    # bounded: the job's own timeout ends the child, and the outcome follows
    job.done.wait(job.timeout + 60)
    if not isinstance(job.outcome, subprocess.CompletedProcess):
        raise job.outcome or TimeoutError(f"background job {key} did not finish")
    return job.outcome


def stop() -> None:
    """Kill, by pid, any job's child still running; drop what was not started."""
    global _STOPPED
    with _LOCK:
        _STOPPED = True
        _QUEUE.clear()
        running = [job.popen for job in _JOBS.values() if job.popen is not None]
    for popen in running:
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(popen.pid, signal.SIGKILL)
    if _RUNNER is not None:
        _RUNNER.join(60)
    for path in _TEMP:
        shutil.rmtree(path, ignore_errors=True)
    _TEMP.clear()
