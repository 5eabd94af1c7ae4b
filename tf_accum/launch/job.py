"""Running a launched job: start its tasks, watch them, end them.

The job is over when every worker has exited (a ps task still running then
is ended: on TensorFlow its ``server.join()`` never returns, and on tf_accum
it returns a moment later), when a task fails
(a worker or ps task exiting with a nonzero status: the others could wait
for it for ever), or when the launcher is asked to stop (Ctrl-C, SIGTERM,
SIGHUP). Ending a task sends SIGTERM to its process group, then SIGKILL
after a grace period (at once on a second Ctrl-C).

The launcher's status is the workers' worst (the highest; a death by signal
N counts as 128 + N), counting only tasks that exited on their own; a ps
task that failed while the workers ran gives its status; a stop asked by
signal N gives 128 + N.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO

from tf_accum.launch.head import RayHead, start_head
from tf_accum.launch.nodes import placement, start_task
from tf_accum.launch.tasks import (
    RunningTask,
    TaskProcess,
    all_tasks,
    cluster_hosts,
    exit_status,
    program_command,
    task_environment,
)
from tf_accum.launch.threads import ThreadShare, set_by_user, thread_limits

# Seconds a task gets to exit after SIGTERM before it is killed.
GRACE = 10.0
# Seconds to wait for a killed task to be gone (a remote one's node may not answer).
GONE_WAIT = 30.0
# Seconds to wait for an ended task's last output lines.
OUTPUT_WAIT = 5.0
_POLL = 0.1  # seconds between looks at tasks that were asked to exit


class Interrupted(Exception):
    """The launcher was asked to stop by signal ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


@dataclass
class StopRequests:
    """The signals that stop the launcher: the first raises :class:`Interrupted` in the
    main thread (at once, or when the section ``held`` guards is over); once the job
    is ending, a further one cuts the grace period short."""

    ending: bool = False
    hurry: threading.Event = field(default_factory=threading.Event)
    _holding: bool = False
    _pending: int | None = None

    def handle(self, signum: int, frame: object) -> None:
        if self.ending:
            self.hurry.set()
        elif self._holding:
            self._pending = signum
        else:
            raise Interrupted(signum)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A section a stop may not cut short (starting a task and keeping track of it).

        Signals are not blocked instead: a child process would inherit the mask."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if self._pending is not None and not self.ending:
            raise Interrupted(self._pending)


@dataclass
class JobSpec:
    """What to launch: ``program`` (a Python file) with ``arguments``, as ``ps`` ps
    tasks and ``workers`` workers, on the Ray cluster at ``address`` (None: start one)."""

    program: str
    arguments: Sequence[str]
    ps: int
    workers: int
    address: str | None
    flags: bool = True
    spread: bool = False  # start the tasks on the cluster's nodes (tf_accum.launch.nodes)
    # give each task an equal share of its node's cores for BLAS/OpenMP threads
    # (tf_accum.launch.threads), unless the environment sets a thread variable
    thread_limit: bool = True


class Output:
    """The launcher's output: task lines and its own, one whole line at a time."""

    def __init__(self, out: IO[bytes], err: IO[bytes]) -> None:
        self.out = out
        self.err = err
        self.lock = threading.Lock()

    def say(self, message: str) -> None:
        with self.lock:
            self.err.write(f"[launch] {message}\n".encode())
            self.err.flush()


def run(spec: JobSpec, stop: StopRequests, output: Output) -> int:
    """Run the job to its end; returns the launcher's exit status (see the module).

    Raises:
        Interrupted: a signal asked the launcher to stop (everything it started
            has been ended by then).
        FailedPreconditionError, UnavailableError: no Ray head could be started.
    """
    head: RayHead | None = None
    attached = False
    try:
        address = spec.address
        if not address:
            output.say(
                "starting a Ray head for the job (this machine, loopback only; it stops "
                "when the job ends)"
            )
            with stop.held():
                head = start_head()
            head.wait_started()
            address = head.address  # the line listing the tasks says it
        if spec.spread:
            import logging

            from tf_accum.distributed.connect import attach

            attached = True
            attach(address, log_to_driver=False, logging_level=logging.ERROR)
        return _run_tasks(spec, address, stop, output, head)
    finally:
        stop.ending = True
        if attached:
            import ray

            ray.shutdown()
        if head is not None:
            if head.process.poll() is not None:
                output.say(
                    f"the job's Ray head had exited with status {head.process.returncode}; "
                    f"its last output:\n{head.output_tail()}"
                )
            head.stop()


def _run_tasks(
    spec: JobSpec, address: str, stop: StopRequests, output: Output, head: RayHead | None
) -> int:
    hosts = cluster_hosts(spec.ps, spec.workers)
    job_id = uuid.uuid4().hex
    # a task that exited, or None: the job's own Ray head exited
    events: queue.Queue[TaskProcess | None] = queue.Queue()
    if head is not None:
        threading.Thread(
            target=_report_end, args=(head, events), name="tf_accum-launch-head", daemon=True
        ).start()
    running: list[TaskProcess] = []
    tasks = all_tasks(spec.ps, spec.workers)
    nodes: list[str | None] = placement(len(tasks)) if spec.spread else [None] * len(tasks)
    limit = spec.thread_limit and not set_by_user(os.environ)
    # this machine's tasks get their share here; a spread task's is worked out on its
    # node, among the tasks planned for that node (all of them when Ray picks the nodes)
    local_share = ThreadShare.of_this_node(len(tasks)) if limit and not spec.spread else None
    try:
        for task, node in zip(tasks, nodes, strict=True):
            command = program_command(spec.program, spec.arguments, task, hosts, spec.flags)
            env = task_environment(os.environ, task, hosts, address, job_id)
            if local_share is not None:
                env.update(thread_limits(local_share.threads))
            # a stop asked while a task starts is taken once it is on the list to end
            with stop.held():
                if spec.spread:
                    running.append(
                        start_task(
                            task,
                            command,
                            env,
                            node,
                            output.out,
                            output.err,
                            output.lock,
                            events.put,
                            nodes.count(node) if limit else None,
                        )
                    )
                else:
                    running.append(
                        RunningTask(
                            task, command, env, output.out, output.err, output.lock, events.put
                        )
                    )
        names = ", ".join(f"{t.task.name} (pid {t.pid}{_node_of(t)})" for t in running)
        threads = _threads_note(spec, running, local_share)
        output.say(f"job {job_id} on Ray at {address}: {names}; BLAS/OpenMP threads {threads}")
        return _watch(running, events, output)
    finally:
        stop.ending = True
        _end(running, stop, output)


def _node_of(task: TaskProcess) -> str:
    node = getattr(task, "node", None)
    return f" on node {node[:8]}" if node else ""


def _threads_note(
    spec: JobSpec, running: list[TaskProcess], local_share: ThreadShare | None
) -> str:
    """What the tasks were told about BLAS/OpenMP threads, for the line listing them."""
    if user_set := set_by_user(os.environ):
        return "as set: " + ", ".join(f"{name}={os.environ[name]}" for name in user_set)
    if not spec.thread_limit:
        return "not limited (--no-thread-limit)"
    if local_share is not None:
        return f"per task: {local_share.describe()}"
    shares: dict[str, str] = {}
    for task in running:
        share: ThreadShare | None = getattr(task, "share", None)
        if share is not None:
            shares.setdefault(getattr(task, "node", ""), share.describe())
    return "per task: " + ", ".join(
        f"{described} on node {node[:8]}" for node, described in shares.items()
    )


def _report_end(head: RayHead, events: queue.Queue[TaskProcess | None]) -> None:
    head.process.wait()
    events.put(None)


def _watch(
    running: list[TaskProcess],
    events: queue.Queue[TaskProcess | None],
    output: Output,
) -> int:
    workers = {t for t in running if t.task.job == "worker"}
    worst = 0
    while workers:
        finished = events.get()
        if finished is None:
            output.say("the job's Ray head exited: ending the tasks")
            return 1
        assert finished.returncode is not None
        status = exit_status(finished.returncode)
        name = finished.task.name
        if finished in workers:
            workers.discard(finished)
            worst = max(worst, status)
            if status != 0:
                output.say(f"{name} exited with status {status}: ending the other tasks")
                return worst
            if workers:  # a worker that ends early may leave the others waiting for it
                others = ", ".join(sorted(t.task.name for t in workers))
                output.say(f"{name} exited (status 0); still running: {others}")
        elif status != 0:
            output.say(
                f"{name} exited with status {status} while the workers ran: ending the other tasks"
            )
            return status
        else:
            output.say(f"{name} exited (status 0) while the workers ran")
    left = [t.task.name for t in running if t.running()]
    output.say("the workers are done" + (f": ending {', '.join(left)}" if left else ""))
    return worst


def _end(running: list[TaskProcess], stop: StopRequests, output: Output) -> None:
    """End every task still running (SIGTERM, a grace period, SIGKILL), and the
    processes each task's group still holds."""
    live = [t for t in running if t.running()]
    for task in live:
        task.ended_by_launcher = True
        task.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + GRACE
    while any(t.running() for t in live) and time.monotonic() < deadline:
        if stop.hurry.wait(_POLL):
            break
    for task in running:
        task.signal_group(signal.SIGKILL)
    for task in running:
        task.wait(GONE_WAIT)
        task.finish_output(OUTPUT_WAIT)
    killed = [t.task.name for t in live if t.returncode == -signal.SIGKILL]
    if killed:
        output.say(f"killed {', '.join(killed)}: still running after SIGTERM")


def install_signal_handlers(stop: StopRequests) -> None:
    """Make SIGINT, SIGTERM and SIGHUP stop the launcher (its own process: ``main``)."""
    handler: Callable[[int, object], None] = stop.handle
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, handler)
