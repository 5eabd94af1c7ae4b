"""Tasks started on the nodes of a Ray cluster (``--spread``), not only on this machine.

Task k of the job (ps tasks first, then the workers) goes to the k-th of the
live nodes that offer a CPU, in node-id order, round robin, as a soft
preference: the placement of the main job's worker actors
(:func:`tf_accum.examples.worker_actors.worker_nodes`). On its node a small
Ray actor (:class:`TaskRunner`, holding a sliver of a CPU) starts the
program's process, in a session of its own, and hands its output lines to
the launcher, which prefixes them as it does a local task's. Ending a task
signals its process group through the actor.

The program, the Python interpreter and tf_accum must be at the same paths on
every node (as with ``mpirun``); the task gets the launcher's environment and
working directory.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from tf_accum.launch.tasks import Task, ending_with_this_process
from tf_accum.launch.threads import ThreadShare, thread_limits

# Seconds for a task's actor to start its process (Ray may start a worker process first).
START_TIMEOUT = 120.0
# Seconds a read of a task's output waits for a line before it asks again.
READ_WAIT = 1.0
# Seconds to wait for an actor to pass a signal on (its node may be gone).
SIGNAL_TIMEOUT = 10.0
# The CPU slot a task's actor holds (the task's process is not Ray's to schedule).
RUNNER_CPUS = 0.001
# The status of a task whose node or actor was lost: as if killed.
LOST = -int(signal.SIGKILL)
_OUT, _ERR = 1, 2


class TaskRunner:
    """One task's process on the node this actor runs on (made a Ray actor by
    :func:`start_tasks`)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._lines: collections.deque[tuple[int, bytes]] = collections.deque()  # guarded
        self._open = 0  # output streams not yet at their end; guarded by _changed
        self._process: subprocess.Popen[bytes] | None = None

    def start(
        self, command: Sequence[str], env: Mapping[str, str], cwd: str, sharing: int | None
    ) -> dict[str, Any]:
        """Start the process, its BLAS/OpenMP threads limited to an equal share of this
        node's cores among ``sharing`` tasks (None: not limited); its pid, this node's
        id and the share (None or ``threads, cores, tasks``)."""
        import ray

        env = dict(env)
        share = None
        if sharing is not None:
            share = ThreadShare.of_this_node(sharing)
            env.update(thread_limits(share.threads))
        process = subprocess.Popen(
            ending_with_this_process(command),
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._process = process
        self._open = 2
        for stream, pipe in ((_OUT, process.stdout), (_ERR, process.stderr)):
            threading.Thread(target=self._collect, args=(stream, pipe), daemon=True).start()
        return {
            "pid": process.pid,
            "node": ray.get_runtime_context().get_node_id(),
            "share": None if share is None else (share.threads, share.cores, share.tasks),
        }

    def _collect(self, stream: int, pipe: IO[bytes]) -> None:
        with pipe:
            for line in iter(pipe.readline, b""):
                with self._changed:
                    self._lines.append((stream, line))
                    self._changed.notify_all()
        with self._changed:
            self._open -= 1
            self._changed.notify_all()

    def read(self, timeout: float) -> list[tuple[int, bytes]] | None:
        """The lines written since the last read (waiting up to ``timeout`` seconds for
        one); None once both streams have ended and every line was read."""
        with self._changed:
            self._changed.wait_for(lambda: self._lines or not self._open, timeout)
            if self._lines:
                lines = list(self._lines)
                self._lines.clear()
                return lines
            return None if not self._open else []

    def wait(self) -> int:
        """Wait for the process to exit; its return code."""
        assert self._process is not None
        return self._process.wait()

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process's group."""
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signum)


class RemoteTask:
    """The launcher's side of a task started by a :class:`TaskRunner` actor; it has
    what :class:`tf_accum.launch.tasks.RunningTask` has."""

    def __init__(
        self,
        task: Task,
        actor: Any,
        started: dict[str, Any],
        out: IO[bytes],
        err: IO[bytes],
        output_lock: threading.Lock,
        on_exit: Callable[[RemoteTask], None],
    ) -> None:
        self.task = task
        self.ended_by_launcher = False
        self.pid: int = started["pid"]
        self.node: str = started["node"]
        # the BLAS/OpenMP threads its node's runner gave it (None: not limited)
        self.share = None if started["share"] is None else ThreadShare(*started["share"])
        self._actor = actor
        self._returncode: int | None = None
        self._exited = threading.Event()
        prefix = f"[{task.name}] ".encode()
        self._copier = threading.Thread(
            target=self._copy, args=(prefix, out, err, output_lock), daemon=True
        )
        self._copier.start()
        threading.Thread(target=self._wait, args=(on_exit,), daemon=True).start()

    @property
    def returncode(self) -> int | None:
        return self._returncode

    def _copy(self, prefix: bytes, out: IO[bytes], err: IO[bytes], lock: threading.Lock) -> None:
        import ray

        while True:
            try:
                lines = ray.get(self._actor.read.remote(READ_WAIT))
            except ray.exceptions.RayError:
                return  # the actor is gone: the task's end says so
            if lines is None:
                return
            with lock:
                for stream, line in lines:
                    target = out if stream == _OUT else err
                    target.write(prefix + (line if line.endswith(b"\n") else line + b"\n"))
                out.flush()
                err.flush()

    def _wait(self, on_exit: Callable[[RemoteTask], None]) -> None:
        import ray

        try:
            code = int(ray.get(self._actor.wait.remote()))
        except ray.exceptions.RayError:
            code = LOST
        self._returncode = code
        self._exited.set()
        on_exit(self)

    def running(self) -> bool:
        return not self._exited.is_set()

    def signal_group(self, signum: int) -> None:
        import ray

        with contextlib.suppress(ray.exceptions.RayError):
            ray.get(self._actor.signal.remote(signum), timeout=SIGNAL_TIMEOUT)

    def wait(self, timeout: float | None = None) -> None:
        self._exited.wait(timeout)

    def finish_output(self, timeout: float) -> None:
        import ray

        self._copier.join(timeout)
        with contextlib.suppress(ray.exceptions.RayError, ValueError):
            ray.kill(self._actor, no_restart=True)


def placement(count: int) -> list[str | None]:
    """The node id each of ``count`` tasks goes to (None: wherever Ray places it)."""
    from tf_accum.examples.worker_actors import worker_nodes

    nodes = worker_nodes()
    return [nodes[index % len(nodes)] if nodes else None for index in range(count)]


def start_task(
    task: Task,
    command: Sequence[str],
    env: Mapping[str, str],
    node: str | None,
    out: IO[bytes],
    err: IO[bytes],
    output_lock: threading.Lock,
    on_exit: Callable[[RemoteTask], None],
    sharing: int | None = None,
) -> RemoteTask:
    """Start ``task`` on ``node`` (a soft preference), in this process's working directory,
    its BLAS/OpenMP threads limited to an equal share of its node's cores among
    ``sharing`` tasks (None: left alone).

    Raises:
        RuntimeError: its actor did not start the process within
            ``START_TIMEOUT`` seconds, or failed to.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    # A sliver of a CPU: Ray ignored a soft node preference for actors asking for no
    # resource at all (3 of 6 went to the other node of two); with one, it kept every one.
    options: dict[str, Any] = {"num_cpus": RUNNER_CPUS, "max_concurrency": 4, "max_restarts": 0}
    if node is not None:
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
    runner: Any = ray.remote(TaskRunner)
    actor = runner.options(**options).remote()
    try:
        started = ray.get(
            actor.start.remote(list(command), dict(env), os.getcwd(), sharing),
            timeout=START_TIMEOUT,
        )
    except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as error:
        with contextlib.suppress(ray.exceptions.RayError, ValueError):
            ray.kill(actor, no_restart=True)
        raise RuntimeError(f"{task.name} did not start on the cluster: {error}") from None
    return RemoteTask(task, actor, started, out, err, output_lock, on_exit)
