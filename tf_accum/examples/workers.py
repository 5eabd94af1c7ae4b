"""What every way of running the main job's workers shares: the weights they
read (``ParameterServer``), the count of what they sent (``Ledger``), the
handle the chief holds on them (``Workers``), and worker threads.

Worker processes (:mod:`tf_accum.examples.processes`), worker actors
(:mod:`tf_accum.examples.worker_actors`) and the graph-mode job
(:mod:`tf_accum.examples.graph_job`) build on these; the chief's loop is in
:mod:`tf_accum.examples.sync_replicas`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tf_accum import errors
from tf_accum.examples.config import JobConfig
from tf_accum.examples.models import Array, Model, simulate_compute


class ParameterServer:
    """The weights and the global step; workers wait here for each new version.

    The chief is the only writer. ``lock`` guards ``params``, ``step``,
    ``version`` and ``stopped``; ``new_version`` is notified whenever the
    weights are published (a new step, or the same step again after a lost
    host took its gradients) or the job stops.
    """

    def __init__(self, params: Array) -> None:
        self.params = params
        self.step = 0
        self.version = 0  # publications so far: a step published again gets a new version
        self.stopped = False
        self.lock = threading.Lock()
        self.new_version = threading.Condition(self.lock)

    def read_after(self, seen: int) -> tuple[Array, int, int] | None:
        """Block until the version is past ``seen``; a copy of the weights, the step, the version.

        Returns None once the job has stopped.
        """
        with self.lock:
            while self.version <= seen and not self.stopped:
                self.new_version.wait()
            if self.stopped:
                return None
            return self.params.copy(), self.step, self.version

    def update(self, change: Callable[[Array], None]) -> int:
        """Apply ``change`` to the weights in place, advance the step, wake the workers."""
        with self.lock:
            change(self.params)
            self.step += 1
            self.version += 1
            self.new_version.notify_all()
            return self.step

    def republish(self) -> None:
        """Send the current step's weights again: the gradients computed from them were lost."""
        with self.lock:
            self.version += 1
            self.new_version.notify_all()

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            self.new_version.notify_all()


class Ledger:
    """Per local step, how many gradients workers have applied (or are applying).

    A worker counts its gradient *before* applying it. Once the chief's take of
    step ``s`` has returned, every gradient counted for a step up to ``s`` was
    either consumed by a take or is (or will be, when applied) dropped as
    stale, so the chief can count stale gradients exactly without asking the
    accumulator. (One whose apply finds the accumulator closed, at the end,
    stays counted as dropped: the chief may have counted it stale already.)
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: dict[int, int] = {}

    def add(self, step: int, delta: int) -> None:
        with self.lock:
            self.sent[step] = self.sent.get(step, 0) + delta

    def up_to(self, step: int) -> int:
        with self.lock:
            return sum(n for s, n in self.sent.items() if s <= step)

    def total(self) -> int:
        with self.lock:
            return sum(self.sent.values())


@dataclass
class Workers:
    """Running workers: ``stop`` ends them; the first error any raised is kept."""

    stop: Callable[[], None]
    errors: list[BaseException] = field(default_factory=list)
    # gradients dropped as stale so far, given the chief's step and the gradients it took
    stale_so_far: Callable[[int, int], int] = lambda step, accepted: 0
    # gradients the workers applied (read after stop)
    applied: Callable[[], int] = lambda: 0
    # the chief re-created the accumulator after its host was lost: use this one
    use_accumulator: Callable[[Any], None] = lambda accumulator: None
    nodes: int = 0  # the nodes worker actors run on (0: not actors)


def start_worker_threads(
    count: int,
    work: Callable[[int], None],
    failures: list[BaseException],
    on_failure: Callable[[], Any],
) -> list[threading.Thread]:
    """Start ``count`` daemon threads running ``work(index)``.

    A thread whose ``work`` raises appends the error to ``failures`` (for the
    chief to report) and calls ``on_failure`` (to wake the chief).
    """

    def guarded(index: int) -> None:
        try:
            work(index)
        except BaseException as exc:  # reported by the chief
            failures.append(exc)
            on_failure()

    threads = [
        threading.Thread(target=guarded, args=(i,), name=f"worker-{i}", daemon=True)
        for i in range(count)
    ]
    for thread in threads:
        thread.start()
    return threads


def start_thread_workers(
    config: JobConfig, model: Model, accumulator: Any, server: ParameterServer, ledger: Ledger
) -> Workers:
    """Start ``config.workers`` daemon threads that compute and apply gradients."""
    failures: list[BaseException] = []

    def work(index: int) -> None:
        seen = -1
        while True:
            snapshot = server.read_after(seen)
            if snapshot is None:
                return
            params, step, seen = snapshot
            gradient = model.gradient(params, index, step)
            simulate_compute(config.seed, index, step, config.compute_ms)
            ledger.add(step, 1)
            try:
                model.apply(accumulator, gradient, step)
            except errors.NotFoundError:
                # the chief closed the accumulator: training is over. The gradient
                # stays counted, as one dropped: the chief may have counted it
                # stale already (its step was taken before the close)
                return

    # a failing worker closes the accumulator: that wakes the chief's take with CancelledError
    threads = start_worker_threads(config.workers, work, failures, accumulator.close)

    def stop() -> None:
        server.stop()
        accumulator.close()
        for thread in threads:
            thread.join(timeout=config.take_timeout)

    def stale_so_far(step: int, accepted: int) -> int:
        # the rounds up to this step are closed: whatever was sent for them
        # and not taken was dropped
        return ledger.up_to(step - 1) - accepted

    return Workers(stop=stop, errors=failures, stale_so_far=stale_so_far, applied=ledger.total)
