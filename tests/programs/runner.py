"""Runs a program of this folder as a job: one process per task, on tf_accum or TensorFlow.

``run_job(name, backend, ...)`` starts the ps tasks, then the workers one by
one, the chief first: each once the one before says its session is ready (so
that they find the model initialised at their first check, and start in an
order the program's results may rely on). It returns every worker's outcome
(the JSON line it printed last) and ends every process it started, by pid.
For TensorFlow, the program's import line is swapped for TensorFlow's and
its servers listen on free ports of this machine; for tf_accum the addresses
are only names and the processes join the Ray cluster the environment names.

``python -m tests.programs.runner`` runs every program on TensorFlow 2.21 and
prints what each worker printed, as JSON (tests/programs/tensorflow.json is
its recording).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tf_accum.launch.tasks import cluster_hosts

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TF_ACCUM_IMPORT = "import tf_accum.compat.v1 as tf  # the import line the runner swaps"
TENSORFLOW_IMPORT = "import tensorflow.compat.v1 as tf"
READY = "Session initialization complete."


@dataclass(frozen=True)
class Program:
    """A program of this folder and the job it runs as."""

    ps: int
    workers: int
    arguments: tuple[str, ...] = ()
    order: tuple[int, ...] = ()  # the workers after the chief, in the order they start


PROGRAMS = {
    "supervisor_mlp": Program(ps=1, workers=2),
    "monitored_mlp": Program(ps=2, workers=2, arguments=("--train_dir=train",)),
    "embedding_sparse": Program(ps=1, workers=2),
    # the slow worker (the last) starts before the fast one the chief needs
    "backup_workers": Program(ps=1, workers=3, order=(2, 1)),
}


class JobFailed(RuntimeError):
    """A task failed or did not finish in time (the message holds its output)."""


@dataclass
class _Task:
    name: str
    popen: subprocess.Popen[str]
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    kept: list[str] = field(default_factory=list)

    def start_reading(self) -> None:
        def read() -> None:
            assert self.popen.stdout is not None
            for line in self.popen.stdout:
                self.lines.put(line.rstrip("\n"))
            self.lines.put(None)

        threading.Thread(target=read, daemon=True, name=f"read {self.name}").start()

    def wait_for_line(self, text: str, deadline: float) -> None:
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise JobFailed(f"{self.name} did not print {text!r} in time") from None
            if line is None:
                raise JobFailed(f"{self.name} exited before printing {text!r}")
            self.kept.append(line)
            if text in line:
                return

    def outcome(self, deadline: float) -> dict[str, Any]:
        """The JSON line the task printed last, once it exited with status 0."""
        while (line := self.lines.get(timeout=max(0.0, deadline - time.monotonic()))) is not None:
            self.kept.append(line)
        self.popen.wait(max(0.0, deadline - time.monotonic()))
        if self.popen.returncode != 0:
            raise JobFailed(f"{self.name} exited with {self.popen.returncode}")
        outcome: dict[str, Any] = json.loads(self.kept[-1])
        return outcome


def program_source(name: str, backend: str) -> str:
    """The program's text, with TensorFlow's import line for ``backend="tensorflow"``."""
    source = (HERE / f"{name}.py").read_text()
    assert source.count(TF_ACCUM_IMPORT) == 1, f"{name}.py has no import line to swap"
    if backend == "tensorflow":
        return source.replace(TF_ACCUM_IMPORT, TENSORFLOW_IMPORT)
    assert backend == "tf_accum", backend
    return source


def run_job(
    name: str,
    backend: str,
    env: Mapping[str, str] | None = None,
    arguments: Sequence[str] = (),
    timeout: float = 180.0,
) -> list[dict[str, Any]]:
    """Run program ``name`` as a job on ``backend``; returns each worker's outcome, by task.

    ``env`` is the tasks' environment (for tf_accum it names the Ray cluster
    and the job); ``arguments`` follow the flags. Raises JobFailed (with every
    task's output) when a task fails or the job takes more than ``timeout``
    seconds; every process started is killed by pid before returning.
    """
    program = PROGRAMS[name]
    hosts = cluster_hosts(program.ps, program.workers)
    environment = dict(os.environ if env is None else env)
    environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), environment.get("PYTHONPATH", "")) if p
    )
    deadline = time.monotonic() + timeout
    tasks: list[_Task] = []
    with tempfile.TemporaryDirectory(prefix="tf1-program-") as scratch:
        path = Path(scratch) / f"{name}.py"
        path.write_text(program_source(name, backend))

        def start(job: str, index: int) -> _Task:
            argv = [
                sys.executable,
                str(path),
                f"--job_name={job}",
                f"--task_index={index}",
                f"--ps_hosts={','.join(hosts['ps'])}",
                f"--worker_hosts={','.join(hosts['worker'])}",
                *program.arguments,
                *arguments,
            ]
            with open(Path(scratch) / f"{job}{index}.err", "w") as stderr:
                popen = subprocess.Popen(
                    argv,
                    cwd=scratch,
                    env=environment,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    text=True,
                )
            tasks.append(_Task(f"{job}{index}", popen))
            tasks[-1].start_reading()
            return tasks[-1]

        try:
            for index in range(program.ps):
                start("ps", index)
            workers = {}
            for index in (0, *(program.order or range(1, program.workers))):
                workers[index] = start("worker", index)
                workers[index].wait_for_line(READY, deadline)
            return [workers[index].outcome(deadline) for index in sorted(workers)]
        except (JobFailed, queue.Empty, subprocess.TimeoutExpired, ValueError) as error:
            report = [f"{type(error).__name__}: {error}"]
            for task in tasks:
                task.popen.poll()
                err = (Path(scratch) / f"{task.name}.err").read_text(errors="replace")
                report.append(
                    f"--- {task.name} (exit {task.popen.returncode}) stdout:\n"
                    + "\n".join(task.kept[-20:])
                    + f"\n--- {task.name} stderr:\n{err[-3000:]}"
                )
            report.append(report[0])  # at the end too: a reader of the tail sees why
            raise JobFailed("\n".join(report)) from error
        finally:
            for task in tasks:
                if task.popen.poll() is None:
                    os.kill(task.popen.pid, signal.SIGKILL)
                task.popen.wait()
                if task.popen.stdout is not None:
                    task.popen.stdout.close()


def run_on_tensorflow(name: str) -> list[dict[str, Any]]:
    """``name``'s outcomes on TensorFlow's gRPC runtime; a job that fails is run once
    more, on new ports (a port picked free can be taken by another process before
    TensorFlow's server binds it), after saying on stderr why the first failed."""
    try:
        return run_job(name, "tensorflow")
    except JobFailed as error:
        print(f"{name}: the first run failed, running it once more:\n{error}", file=sys.stderr)
        return run_job(name, "tensorflow")


def main() -> None:
    names = sys.argv[1:] or list(PROGRAMS)
    print(json.dumps({name: run_on_tensorflow(name) for name in names}))


if __name__ == "__main__":
    main()
