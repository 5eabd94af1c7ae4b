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

The runner thread allocates nothing while a child runs (its output goes to
files, read by the test that asks, and its timeout is kept by ``timeout(1)``,
not by a Python loop), so that tests measuring allocations with tracemalloc
see only their own; ``quiet()`` keeps it from starting or finishing a job
while such a test measures.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class Job:
    """One child process: ``argv`` run in ROOT with ``env``, killed after ``timeout`` seconds."""

    def __init__(self, argv: list[str], env: dict[str, str] | None, timeout: float) -> None:
        self.argv = argv
        self.env = env
        self.timeout = timeout
        self.claimed = False  # under the jobs' lock: a thread runs (or is about to run) it
        self.done = threading.Event()
        self.popen: subprocess.Popen[str] | None = None
        self.outcome: subprocess.CompletedProcess[str] | BaseException | None = None
        self.output: tuple[Path, Path] | None = None  # the child's stdout and stderr files


class Jobs:
    """The session's jobs (one instance, below; the tests of this module make their own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._queue: list[Job] = []
        self._runner: threading.Thread | None = None
        self._temp: list[Path] = []
        self._stopped = False

    def define(
        self, key: str, argv: list[str], env: dict[str, str] | None = None, timeout: float = 600
    ) -> str:
        """Define the job ``key`` (a second definition of the key is ignored); returns ``key``."""
        with self._lock:
            self._jobs.setdefault(key, Job(argv, env, timeout))
        return key

    def scratch(self) -> Path:
        """A directory for the jobs' output files, removed by ``stop``."""
        with self._lock:
            if not self._temp:
                self._temp.append(Path(tempfile.mkdtemp(prefix="tf_accum-jobs-")))
            return self._temp[0]

    def start_for(self, items: Iterable[Any]) -> None:
        """Start the jobs the ``background`` markers of ``items`` (pytest items) name."""
        keys = []
        for item in items:
            for mark in item.iter_markers("background"):
                key = mark.args[0]
                if key in self._jobs and key not in keys:
                    keys.append(key)
        with self._lock:
            self._queue.extend(self._jobs[key] for key in keys if not self._jobs[key].claimed)
            if not self._queue or (self._runner is not None and self._runner.is_alive()):
                return
            self._runner = threading.Thread(target=self._run_queue, name="background jobs")
            self._runner.daemon = True
            self._runner.start()

    def result(self, key: str) -> subprocess.CompletedProcess[str]:
        """The finished job's outcome (run here and now if it has not started).

        Raises:
            subprocess.TimeoutExpired: the child ran past the job's timeout (it was killed).
        """
        job = self._jobs[key]
        if self._claim(job):
            self._run(job)
        # bounded: the job's own timeout ends the child, and the outcome follows
        job.done.wait(job.timeout + 60)
        with self._lock:
            if job.outcome is None and job.output is not None and job.popen is not None:
                job.outcome = self._outcome(job, job.popen, *job.output)
        if not isinstance(job.outcome, subprocess.CompletedProcess):
            raise job.outcome or TimeoutError(f"background job {key} did not finish")
        return job.outcome

    def _outcome(
        self, job: Job, popen: subprocess.Popen[str], out: Path, err: Path
    ) -> subprocess.CompletedProcess[str] | BaseException:
        stdout, stderr = out.read_text(), err.read_text()
        if popen.returncode == -signal.SIGKILL and not self._stopped:
            # timeout(1) killed the child, and its own process group with it
            return subprocess.TimeoutExpired(job.argv, job.timeout, stdout, stderr)
        return subprocess.CompletedProcess(job.argv, popen.returncode, stdout, stderr)

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """No job starts or finishes its bookkeeping inside the block (a running
        child goes on; its output goes to files)."""
        with self._lock:
            yield

    def stop(self) -> None:
        """Kill, by pid, any job's child still running; drop what was not started."""
        with self._lock:
            self._stopped = True
            self._queue.clear()
            running = [job.popen for job in self._jobs.values() if job.popen is not None]
        for popen in running:
            if popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(popen.pid, signal.SIGKILL)  # timeout(1) and its child
        if self._runner is not None:
            self._runner.join(60)
        with self._lock:  # read what the children wrote before their files go
            for job in self._jobs.values():
                if job.outcome is None and job.output is not None and job.popen is not None:
                    job.outcome = self._outcome(job, job.popen, *job.output)
        for path in self._temp:
            shutil.rmtree(path, ignore_errors=True)
        self._temp.clear()

    def _claim(self, job: Job) -> bool:
        with self._lock:
            if job.claimed:
                return False
            job.claimed = True
            return True

    def _run_queue(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    return
                job = self._queue.pop(0)
            if self._claim(job):
                self._run(job)

    def _run(self, job: Job) -> None:
        try:
            folder = Path(tempfile.mkdtemp(dir=self.scratch()))
            out, err = folder / "stdout", folder / "stderr"
            with self._lock:  # so that ``stop`` sees every child started
                if self._stopped:
                    raise RuntimeError("the session has ended")
                with out.open("w") as stdout, err.open("w") as stderr:
                    job.popen = subprocess.Popen(
                        ["timeout", "-s", "KILL", f"{job.timeout:g}", *job.argv],
                        cwd=ROOT,
                        env=job.env,
                        stdout=stdout,
                        stderr=stderr,
                        text=True,
                        start_new_session=True,  # its own group: timeout(1) and stop kill it whole
                    )
            job.popen.wait()
            with self._lock:
                job.output = (out, err)
        except BaseException as error:  # handed to the test, which raises it
            job.outcome = error
        finally:
            job.done.set()


SESSION = Jobs()
define = SESSION.define
scratch = SESSION.scratch
start_for = SESSION.start_for
result = SESSION.result
stop = SESSION.stop
