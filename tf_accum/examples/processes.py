"""Worker processes for the synchronous-replicas job (``--processes N``), on Ray.

The design, kept small on purpose:

- The chief (the job's own process) attaches to a Ray cluster with
  :func:`tf_accum.distributed.connect` (``"local"`` starts a loopback-only one
  in this process) and makes the gradient accumulator with a shared_name, so
  the accumulator lives in a Ray actor every process of the cluster reaches.
- Each worker is a separate OS process (``python -m
  tf_accum.examples.processes``) started by the chief with
  ``TF_ACCUM_RAY_ADDRESS`` set: it joins the cluster and makes the same
  accumulator by name. On a running cluster (``--address`` other than
  ``local``) each worker is a Ray actor instead, spread over the cluster's
  nodes (:mod:`tf_accum.examples.worker_actors`), driven the same way. Its model (data shards included) is rebuilt from the
  seed, so only weights travel.
- Weights go from the chief to each worker through the worker's stdin pipe:
  a forwarding thread per worker waits for each new step (the same
  :class:`~tf_accum.examples.workers.ParameterServer` the worker threads
  use) and writes ``step`` and the weights' bytes. A worker that finds more
  than one message waiting uses the newest, as a worker thread would.
- Stale gradients are counted by the accumulator itself (its ``stats()``),
  since the chief cannot see what another process is about to apply.

Every worker process is ended by pid on every path (stdin closed, then a
bounded wait, then SIGKILL), and so is every process Ray started here.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tf_accum import errors
from tf_accum.examples import recovery
from tf_accum.examples.workers import ParameterServer, Workers

if TYPE_CHECKING:
    from tf_accum.examples.config import JobConfig
    from tf_accum.examples.models import Model

SHARED_NAME = "tf_accum_sync_replicas_gradients"  # with the chief's pid: one per run
_HEADER = np.dtype("<i8")  # the step, before the weights' bytes
_EXIT_WAIT = 10.0  # seconds a worker gets to finish its gradient after its stdin closes


def descendants(pid: int) -> set[int]:
    """Every living process below ``pid`` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return set()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _kill(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def cluster(address: str, quiet: bool = False) -> Iterator[str]:
    """Attach this process to the cluster at ``address``; yields the address workers join.

    ``quiet`` keeps Ray's own INFO and WARNING log lines out of this process's
    output (errors still show).

    On exit Ray is shut down, the previous table restored, and every process
    Ray started below this one is killed by pid (Ray's agents may outlive a
    shutdown). Meant for a process of its own (the job): it shuts Ray down
    even if Ray was attached before.

    Raises:
        UnavailableError, UnauthenticatedError, FailedPreconditionError: see
            :func:`tf_accum.distributed.connect`.
    """
    from tf_accum.distributed import connect
    from tf_accum.resources import current_table, set_table

    before = descendants(os.getpid())
    previous = current_table()
    temp_dir: str | None = None
    options: dict[str, Any] = {"log_to_driver": False}
    if quiet:
        options["logging_level"] = logging.ERROR
    if address == "local":
        # Short: Ray puts unix sockets under it (paths are limited to about 107 bytes).
        temp_dir = tempfile.mkdtemp(prefix="tfa", dir="/tmp" if os.path.isdir("/tmp") else None)
        options.update(_temp_dir=temp_dir, num_cpus=1, object_store_memory=128 * 2**20)
    in_main = threading.current_thread() is threading.main_thread()
    previous_handler = signal.getsignal(signal.SIGTERM) if in_main else None
    try:
        connect(address, **options)
        if in_main:
            # SIGTERM ends the job through the cleanup below, as Ctrl-C does
            signal.signal(signal.SIGTERM, _exit_on_signal)
        import ray

        yield ray.get_runtime_context().gcs_address if address == "local" else address
    finally:
        try:
            with contextlib.suppress(Exception):
                import ray

                ray.shutdown()
            set_table(previous)
        finally:
            _kill(descendants(os.getpid()) - before)
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
            if previous_handler is not None:  # None: not set from Python, nothing to restore
                signal.signal(signal.SIGTERM, previous_handler)


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def shared_name() -> str:
    """The gradient accumulator's shared_name for this run (the chief's pid tells runs apart)."""
    return f"{SHARED_NAME}_{os.getpid()}"


class WorkerGone(Exception):
    """A worker can no longer be sent weights (it ended)."""


class _ProcessChannel:
    """A worker process: weights through its stdin, its end by its exit status."""

    node = ""  # not an actor

    def __init__(self, index: int, process: subprocess.Popen[bytes]) -> None:
        self.index = index
        self.process = process

    def send(self, step: int, params: np.ndarray) -> None:
        pipe = self.process.stdin
        assert pipe is not None
        try:
            pipe.write(np.array(step, _HEADER).tobytes() + params.tobytes())
            pipe.flush()
        except (BrokenPipeError, ValueError):
            raise WorkerGone from None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()

    def wait_end(self) -> str | None:
        code = self.process.wait()
        return None if code == 0 else f"worker process {self.index} exited with status {code}"


def start_process_workers(
    config: JobConfig, model: Model, accumulator: Any, server: ParameterServer, address: str
) -> Workers:
    """Start ``config.workers`` workers on the cluster at ``address``.

    On a cluster this process started (``--address local``) each worker is an
    OS process of this machine; on a running cluster each is a Ray actor, the
    actors spread over the cluster's nodes (see
    :mod:`tf_accum.examples.worker_actors`).
    """

    failures: list[BaseException] = []
    stopping = threading.Event()
    setup = {
        "model": model.name,
        "seed": config.seed,
        "workers": config.workers,
        "compute_ms": config.compute_ms,
        "shared_name": shared_name(),
        "quiet": config.quiet,
        "address": address,
    }
    channels: list[Any]
    if config.address == "local":
        channels = _start_processes(config, setup, address)
        end: Callable[[], None] = functools.partial(_end, [c.process for c in channels])
    else:
        from tf_accum.examples import worker_actors

        channels = worker_actors.start(config.workers, setup, config.take_timeout)
        end = functools.partial(worker_actors.end, channels, _EXIT_WAIT)
    threads: list[threading.Thread] = []
    # the accumulator in use (the chief re-creates it if its host is lost), and
    # the counts its lost predecessors had reached when last read
    current = [accumulator]
    lost = {"stale": 0, "applied": 0}

    def forward(channel: Any) -> None:
        seen = -1
        try:
            while True:
                snapshot = server.read_after(seen)
                if snapshot is None:
                    return
                params, step, seen = snapshot
                channel.send(step, params)
        except WorkerGone:
            pass  # the worker ended; watch() reports it
        finally:
            channel.close()

    def watch(channel: Any) -> None:
        failure = channel.wait_end()
        if failure is not None and not stopping.is_set():
            failures.append(RuntimeError(failure))
            with contextlib.suppress(errors.OpError):
                current[0].close()  # wakes the chief's take with CancelledError

    try:
        for channel in channels:
            for target in (forward, watch):
                thread = threading.Thread(target=target, args=(channel,), daemon=True)
                thread.start()
                threads.append(thread)
    except BaseException:
        end()
        raise

    final: dict[str, int] = {}

    def stop() -> None:
        stopping.set()
        server.stop()  # the forwarding threads close the workers' input: they finish and exit
        end()
        for thread in threads:
            thread.join(timeout=config.take_timeout)
        with contextlib.suppress(errors.OpError):
            stats = current[0].stats()  # every worker has ended: these are final
            applied = int(stats["accepted"] or 0) + int(stats["stale"] or 0)
            final["applied"] = lost["applied"] + applied
        with contextlib.suppress(errors.OpError):
            current[0].close()

    def stale_so_far(step: int, accepted: int) -> int:
        # counted by the accumulator when it drops them (another process's
        # gradients in flight cannot be counted before they arrive)
        try:
            stale = lost["stale"] + int(current[0].stats()["stale"] or 0)
        except (errors.NotFoundError, errors.UnavailableError) as error:
            if failures:  # a failing worker closed the accumulator: report its error
                raise failures[0] from None
            if recovery.host_lost(error):
                return seen["stale"]  # the chief's next take finds the host lost
            raise
        seen.update(stale=stale, accepted=accepted)
        return stale

    seen = {"stale": 0, "accepted": 0}  # the counts when the accumulator was last read

    def use_accumulator(fresh: Any) -> None:
        # what the lost host had counted when last read; later gradients went with it
        lost.update(stale=seen["stale"], applied=seen["stale"] + seen["accepted"])
        current[0] = fresh

    return Workers(
        stop=stop,
        errors=failures,
        stale_so_far=stale_so_far,
        applied=lambda: final.get("applied", 0),
        use_accumulator=use_accumulator,
        nodes=len({channel.node for channel in channels if channel.node}),
    )


def _start_processes(
    config: JobConfig, setup: dict[str, Any], address: str
) -> list[_ProcessChannel]:
    """One OS process per worker, each joined to the cluster at ``address``."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, TF_ACCUM_RAY_ADDRESS=address, PYTHONPATH=path)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for index in range(config.workers):
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tf_accum.examples.processes",
                    str(index),
                    json.dumps(setup),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            processes.append(process)
        # the chief's clock starts once every worker has joined (seconds on a cold cluster)
        for index, process in enumerate(processes):
            _wait_ready(index, process, config.take_timeout)
    except BaseException:
        _end(processes)
        raise
    return [_ProcessChannel(index, process) for index, process in enumerate(processes)]


def _wait_ready(index: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait for the worker's one-byte "joined" signal on its stdout.

    Raises:
        RuntimeError: the worker ended, or said nothing within ``timeout`` seconds.
    """
    pipe = process.stdout
    assert pipe is not None
    ready, _, _ = select.select([pipe], [], [], timeout)
    if not ready or not os.read(pipe.fileno(), 1):
        code = process.poll()
        state = "did not join the cluster" if code is None else f"exited with status {code}"
        raise RuntimeError(f"worker process {index} {state}")


def _end(processes: list[subprocess.Popen[bytes]]) -> None:
    """Let each process exit within a bounded time, then kill it by pid."""
    deadline = time.monotonic() + _EXIT_WAIT
    for process in processes:
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            process.wait()


def _read_exact(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``; None at end of input."""
    chunks = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def worker_main(index: int, setup: dict[str, Any]) -> None:
    """One worker process: read weights from stdin, apply gradients, until stdin ends."""
    from tf_accum.examples.models import MODELS

    model = MODELS[setup["model"]](setup["seed"], setup["workers"])
    template = model.initial_params()
    if setup.get("quiet"):
        # attach here rather than at the first accumulator (TF_ACCUM_RAY_ADDRESS),
        # to keep Ray's own INFO and WARNING lines out of the job's output
        from tf_accum.distributed import connect

        connect(os.environ["TF_ACCUM_RAY_ADDRESS"], logging_level=logging.ERROR)
    make = functools.partial(model.make_accumulator, shared_name=setup["shared_name"])
    accumulator: Any = recovery.remake(make)  # its host may be restarting, even now
    os.write(sys.stdout.fileno(), b"r")  # joined: the chief may start its clock
    # nothing else goes to the chief on that pipe (which nobody reads from now on)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    fd = sys.stdin.fileno()
    size = _HEADER.itemsize + template.nbytes
    while True:
        message = _read_exact(fd, size)
        # a slow worker skips to the newest weights, as a worker thread would
        while message is not None and select.select([fd], [], [], 0)[0]:
            message = _read_exact(fd, size)
        if message is None:
            return
        step = int(np.frombuffer(message[: _HEADER.itemsize], _HEADER)[0])
        params = np.frombuffer(message[_HEADER.itemsize :], template.dtype).reshape(template.shape)
        accumulator = work_on(model, setup, index, accumulator, make, step, params)
        if accumulator is None:
            return


def work_on(
    model: Model,
    setup: dict[str, Any],
    index: int,
    accumulator: Any,
    make: Callable[[], Any],
    step: int,
    params: np.ndarray,
) -> Any:
    """Worker ``index``'s gradient at ``step`` from ``params``, applied.

    Returns the accumulator to use next (made again if its host was lost),
    or None once the chief has closed it (training is over).
    """
    from tf_accum.examples.models import simulate_compute

    gradient = model.gradient(params, index, step)
    simulate_compute(setup["seed"], index, step, setup["compute_ms"])
    try:
        model.apply(accumulator, gradient, step)
    except (errors.NotFoundError, errors.CancelledError, errors.UnavailableError) as error:
        if not recovery.host_lost(error):
            return None  # the chief closed the accumulator: training is over
        # its host was lost (and restarts empty): this gradient went with it; reach
        # the accumulator the chief re-creates (or create it first); the chief sends
        # this step's weights again
        return recovery.remake(make)
    return accumulator


if __name__ == "__main__":
    worker_main(int(sys.argv[1]), json.loads(sys.argv[2]))
