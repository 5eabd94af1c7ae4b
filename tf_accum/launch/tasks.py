"""The tasks of a launched job: what each is told, and its running process.

Each task is one process of the program, told who it is the two ways TF1
programs read it: the command-line flags of TensorFlow's distributed
examples (``--job_name``, ``--task_index``, ``--ps_hosts``,
``--worker_hosts``) and the ``TF_CONFIG`` variable (JSON: the cluster's
addresses by job, and this task's type and index). The addresses are free
ports of this machine's loopback at launch: tf_accum only uses them as names,
and a program running on TensorFlow itself can serve on them.

A task's process runs in a session of its own, so that a Ctrl-C at the
terminal reaches the launcher alone, which then ends each task's whole
process group. It gets SIGTERM when the process that started it ends, also
when that is killed (:mod:`tf_accum.launch.ends_with_parent`). Its output lines are copied to the launcher's, each prefixed
with the task's name (``[worker1] ...``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

JOBS = ("ps", "worker")


@dataclass(frozen=True)
class Task:
    """One task of the job: ``job`` is ``"ps"`` or ``"worker"``."""

    job: str
    index: int

    @property
    def name(self) -> str:
        return f"{self.job}{self.index}"


def all_tasks(ps: int, workers: int) -> list[Task]:
    """The ps tasks, then the workers (worker 0 is the chief)."""
    return [Task("ps", i) for i in range(ps)] + [Task("worker", i) for i in range(workers)]


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on the loopback interface just now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def cluster_hosts(ps: int, workers: int) -> dict[str, list[str]]:
    """The job's addresses by job name, as a ``ClusterSpec`` takes them (no empty job)."""
    ports = iter(free_ports(ps + workers))
    hosts = {
        "ps": [f"localhost:{next(ports)}" for _ in range(ps)],
        "worker": [f"localhost:{next(ports)}" for _ in range(workers)],
    }
    return {job: addresses for job, addresses in hosts.items() if addresses}


def task_flags(task: Task, hosts: Mapping[str, Sequence[str]]) -> list[str]:
    """The command-line flags TF1 programs take for their task."""
    return [
        f"--job_name={task.job}",
        f"--task_index={task.index}",
        f"--ps_hosts={','.join(hosts.get('ps', []))}",
        f"--worker_hosts={','.join(hosts.get('worker', []))}",
    ]


def tf_config(task: Task, hosts: Mapping[str, Sequence[str]]) -> str:
    """``TF_CONFIG`` for ``task``, in TensorFlow's JSON layout."""
    cluster = {job: list(addresses) for job, addresses in hosts.items()}
    return json.dumps({"cluster": cluster, "task": {"type": task.job, "index": task.index}})


def task_environment(
    base: Mapping[str, str],
    task: Task,
    hosts: Mapping[str, Sequence[str]],
    address: str,
    job_id: str,
) -> dict[str, str]:
    """``base`` with what the task's process needs: its ``TF_CONFIG``, the Ray cluster
    to join (``TF_ACCUM_RAY_ADDRESS``), the job it belongs to (``TF_ACCUM_JOB``, the
    same for every task of one run, fresh for each run) and unbuffered Python output
    (so that lines come out as they are printed)."""
    env = dict(base)
    env.update(
        TF_CONFIG=tf_config(task, hosts),
        TF_ACCUM_RAY_ADDRESS=address,
        TF_ACCUM_JOB=job_id,
    )
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class TaskProcess(Protocol):
    """What the launcher needs of a task's process, wherever it runs."""

    task: Task
    pid: int
    ended_by_launcher: bool

    @property
    def returncode(self) -> int | None: ...

    def running(self) -> bool: ...

    def signal_group(self, signum: int) -> None: ...

    def wait(self, timeout: float | None = None) -> None: ...

    def finish_output(self, timeout: float) -> None: ...


class RunningTask:
    """A task's process, its output copied with a prefix, its end reported once.

    ``on_exit`` is called (from a thread of this object) with the task once its
    process has exited; ``returncode`` is set by then.
    """

    def __init__(
        self,
        task: Task,
        command: Sequence[str],
        env: Mapping[str, str],
        out: IO[bytes],
        err: IO[bytes],
        output_lock: threading.Lock,
        on_exit: Callable[[RunningTask], None],
    ) -> None:
        self.task = task
        self.ended_by_launcher = False
        self.process = subprocess.Popen(
            ending_with_this_process(command),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: ended as a whole
        )
        self.pid = self.process.pid
        prefix = f"[{task.name}] ".encode()
        assert self.process.stdout is not None and self.process.stderr is not None
        self._copiers = [
            threading.Thread(
                target=_copy_lines,
                args=(source, target, prefix, output_lock),
                name=f"tf_accum-launch-{task.name}-output",
                daemon=True,
            )
            for source, target in ((self.process.stdout, out), (self.process.stderr, err))
        ]
        for thread in self._copiers:
            thread.start()
        self._waiter = threading.Thread(
            target=self._wait, args=(on_exit,), name=f"tf_accum-launch-{task.name}", daemon=True
        )
        self._waiter.start()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def _wait(self, on_exit: Callable[[RunningTask], None]) -> None:
        self.process.wait()
        on_exit(self)

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` seconds) for the process to exit."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout)

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to every process of the task's group (its children too)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def finish_output(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for the task's last output lines."""
        for thread in self._copiers:
            thread.join(timeout)


def ending_with_this_process(command: Sequence[str]) -> list[str]:
    """``command`` run so that its process gets SIGTERM when this process ends, however
    it ends (on Linux; see :mod:`tf_accum.launch.ends_with_parent`): the same process
    once started, with no handler installed in it.

    Start it from a thread that lasts as long as this process (Linux sends the
    signal when the thread that started the process ends)."""
    helper = Path(__file__).with_name("ends_with_parent.py")
    # -I -S: the helper needs the standard library only, whatever PYTHONPATH says
    return [sys.executable, "-I", "-S", str(helper), str(os.getpid()), *command]


def exit_status(returncode: int) -> int:
    """A process's status as a shell reports it: a death by signal N is 128 + N."""
    return returncode if returncode >= 0 else 128 - returncode


def _copy_lines(source: IO[bytes], target: IO[bytes], prefix: bytes, lock: threading.Lock) -> None:
    with source:
        for line in iter(source.readline, b""):
            if not line.endswith(b"\n"):
                line += b"\n"
            with lock:
                target.write(prefix + line)
                target.flush()


def program_command(
    program: str,
    arguments: Sequence[str],
    task: Task,
    hosts: Mapping[str, Sequence[str]],
    flags: bool,
) -> list[str]:
    """The command that runs ``program`` (a Python file) as ``task``: this interpreter,
    the task's flags (unless ``flags`` is False), then the program's own arguments
    (which come last, so they may override a flag)."""
    return [
        sys.executable,
        program,
        *(task_flags(task, hosts) if flags else []),
        *arguments,
    ]
