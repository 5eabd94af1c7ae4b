"""The main job's workers as Ray actors spread over a running cluster's nodes.

``python -m tf_accum --processes N --address ADDR`` (a cluster this process
did not start) runs each worker as a Ray actor, so the workers use the
cluster's machines rather than only the chief's. Worker ``i`` goes to the
``i``-th of the live nodes that offer a CPU, in node-id order, round robin,
as a soft preference (Ray places it elsewhere if that node is full or
gone). Each actor holds one CPU slot, as a worker process of the job would.

An actor is driven as a worker process is: the chief offers it the weights
of every new step (an actor call the chief waits for, so a dead actor is
noticed at once); a thread in the actor computes and applies the gradient
of the newest weights it has, skipping older ones, as a slow worker does.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from typing import Any

import numpy as np

from tf_accum.examples.processes import WorkerGone, work_on


class GradientWorker:
    """One worker of the job (made a Ray actor by :func:`start`).

    Args:
        index: the worker's number (its data shard and speed).
        setup: the job's settings, as a worker process gets them.
    """

    def __init__(self, index: int, setup: dict[str, Any]) -> None:
        self._index = index
        self._setup = setup
        self._changed = threading.Condition()
        self._newest: tuple[int, np.ndarray] | None = None  # guarded by _changed
        self._closed = False  # guarded by _changed
        self._failure: str | None = None  # set before _finished
        self._finished = threading.Event()

    def start(self) -> str:
        """Join the job's accumulator and start working; returns this actor's node id."""
        import ray

        from tf_accum.distributed import connect
        from tf_accum.examples import recovery
        from tf_accum.examples.models import MODELS

        connect(self._setup["address"])  # Ray is attached here: this picks the Ray table
        model = MODELS[self._setup["model"]](self._setup["seed"], self._setup["workers"])
        make = functools.partial(model.make_accumulator, shared_name=self._setup["shared_name"])
        accumulator = recovery.remake(make)  # its host may be restarting, even now
        threading.Thread(target=self._work, args=(model, make, accumulator), daemon=True).start()
        return str(ray.get_runtime_context().get_node_id())

    def offer(self, step: int, params: np.ndarray) -> bool:
        """Weights for ``step``; False once the worker has stopped (failed or closed)."""
        with self._changed:
            self._newest = (step, params)
            self._changed.notify()
        return not self._finished.is_set()

    def close(self) -> None:
        """No more weights: the worker finishes its gradient in hand and stops."""
        with self._changed:
            self._closed = True
            self._changed.notify()

    def finished(self) -> str | None:
        """Wait until the worker stops; what failed, or None."""
        self._finished.wait()
        return self._failure

    def _work(self, model: Any, make: Any, accumulator: Any) -> None:
        try:
            while True:
                with self._changed:
                    while self._newest is None and not self._closed:
                        self._changed.wait()
                    if self._newest is None:
                        return
                    step, params = self._newest
                    self._newest = None
                accumulator = work_on(
                    model, self._setup, self._index, accumulator, make, step, params
                )
                if accumulator is None:
                    return
        except BaseException as error:
            self._failure = f"worker actor {self._index} failed: {type(error).__name__}: {error}"
        finally:
            self._finished.set()


class _ActorChannel:
    """The chief's side of one worker actor."""

    def __init__(self, index: int, actor: Any) -> None:
        self.index = index
        self.actor = actor
        self.node = ""  # the node id it runs on, once started

    def send(self, step: int, params: np.ndarray) -> None:
        import ray

        try:
            working = ray.get(self.actor.offer.remote(step, params))
        except ray.exceptions.RayError:
            raise WorkerGone from None
        if not working:
            raise WorkerGone

    def close(self) -> None:
        import ray

        with contextlib.suppress(ray.exceptions.RayError):
            self.actor.close.remote()

    def wait_end(self) -> str | None:
        import ray

        try:
            return ray.get(self.actor.finished.remote())  # type: ignore[no-any-return]
        except ray.exceptions.RayError as error:
            return f"worker actor {self.index} died: {type(error).__name__}"


def worker_nodes() -> list[str]:
    """The ids of the live nodes offering a CPU, sorted (the same order from any process)."""
    import ray

    nodes: Any = ray.nodes  # untyped in Ray
    return sorted(
        node["NodeID"]
        for node in nodes()
        if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) >= 1
    )


def start(count: int, setup: dict[str, Any], timeout: float) -> list[_ActorChannel]:
    """Start ``count`` worker actors, round robin over :func:`worker_nodes`.

    Returns once every one has joined the accumulator (its ``start`` answered).

    Raises:
        RuntimeError: a worker did not start within ``timeout`` seconds, or failed.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = worker_nodes()
    remote = ray.remote(GradientWorker)
    channels: list[_ActorChannel] = []
    try:
        for index in range(count):
            options: dict[str, Any] = {"num_cpus": 1, "max_concurrency": 8, "max_restarts": 0}
            if nodes:
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                    nodes[index % len(nodes)], soft=True
                )
            actor = remote.options(**options).remote(index, setup)
            channels.append(_ActorChannel(index, actor))
        starts = [channel.actor.start.remote() for channel in channels]
        # the chief's clock starts once every worker has joined (seconds on a cold cluster)
        ready, _ = ray.wait(starts, num_returns=len(starts), timeout=timeout)
        if len(ready) < len(starts):
            raise RuntimeError(f"{len(starts) - len(ready)} worker actors did not start")
        try:
            for channel, node in zip(channels, ray.get(starts), strict=True):
                channel.node = node
        except ray.exceptions.RayError as error:
            raise RuntimeError(f"a worker actor failed to start: {error}") from None
    except BaseException:
        end(channels, 0.0)
        raise
    return channels


def end(channels: list[_ActorChannel], wait: float) -> None:
    """Let each actor finish within ``wait`` seconds in all, then kill it."""
    import ray

    for channel in channels:
        channel.close()
    deadline = time.monotonic() + wait
    for channel in channels:
        with contextlib.suppress(ray.exceptions.RayError):
            ray.wait(
                [channel.actor.finished.remote()], timeout=max(0.0, deadline - time.monotonic())
            )
        with contextlib.suppress(ray.exceptions.RayError, ValueError):
            ray.kill(channel.actor, no_restart=True)
