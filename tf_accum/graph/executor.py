"""Running a set of ops once: the plan, the order, and blocking takes.

Ops of one run that do not depend on each other may run concurrently, as in
TensorFlow: a run that fetches a take together with the applies it waits for
completes. Non-blocking ops run on the calling thread in dependency order; a
blocking op (a take) runs there too when nothing else is left to do, and on
another thread otherwise. Every take of a run joins the run's Cancellation,
so a deadline, a failed sibling op or a closing session withdraws it and it
consumes nothing.

An accumulator's take that must wait holds no thread: its attempt is queued
in the accumulator (Rounds.try_take), and the attempt's callback tells the
run's thread, which collects the round and goes on with the take's consumers.
The run's thread also withdraws a take whose own ``timeout`` has passed, and,
when the run stops (its deadline, a failed op, a closing session, Ctrl-C),
every attempt it has not collected, in ``finally``: a round served to it
goes back. One it collected goes back too when the run fails before
Session.run returns, if the run only fetches what its takes take
(``Plan.takes_go_back``; see Session.run).

Other blocking ops (queue ops, a take on an accumulator in another process)
hold a thread while they wait, so those threads are bounded: they share at
most ``TAKE_THREADS`` threads, except one that ops able to serve a waiting
op depend on (an apply, a destroy, downstream of it). Such an op gets a
thread of its own at once: an op waiting on the bounded threads may be
waiting for exactly that apply. Any other op waiting for a thread cannot be
what a running op waits for (what it gives only flows to ops that serve
none), so running it later changes no outcome and cannot deadlock.
"""

from __future__ import annotations

import collections
import contextvars
import heapq
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tf_accum import errors
from tf_accum.accumulators.attempts import Cancellation, cancelled_by
from tf_accum.accumulators.interrupts import interruptible, joined
from tf_accum.accumulators.threads import start_thread
from tf_accum.raw_ops.take_attempts import TAKE_OPS, StartedTake
from tf_accum.resources import using_table

if TYPE_CHECKING:
    from tf_accum.graph.graph import Operation, Tensor
    from tf_accum.graph.session import Session

JOIN_WAIT = 30.0  # seconds for a cancelled take's thread to return; only reached if broken
TAKE_THREADS = 8  # threads a run's takes share (TensorFlow's inter-op pool is about as large)
# ops that can let a waiting take return: they add gradients or destroy an accumulator;
# and the queue ops, each of which can let a waiting enqueue or dequeue go on
_SERVING_SUFFIX = "ApplyGradient"
_SERVING_TYPES = frozenset(
    {
        "DestroyResourceOp",
        "QueueEnqueueV2",
        "QueueEnqueueManyV2",
        "QueueDequeueV2",
        "QueueDequeueManyV2",
        "QueueDequeueUpToV2",
        "QueueCloseV2",
    }
)


def deadline_error() -> errors.DeadlineExceededError:
    return errors.DeadlineExceededError(None, None, "Timed out waiting for notification")


def sibling_failed_error() -> errors.CancelledError:
    return errors.CancelledError(None, None, "TakeGrad operation was cancelled")


@dataclass(frozen=True)
class Plan:
    """The ops a run must execute, in dependency order, and who waits for whom.

    ``sequential``: at most one op blocks, and ``ops`` lists first everything
    that does not depend on it, then it, then what depends on it. Run in that
    order on one thread, this is exactly what the dataflow scheduler would do
    (it runs a lone blocking op inline once nothing else can run).
    """

    ops: tuple[Operation, ...]
    producers: dict[Operation, tuple[Operation, ...]]
    consumers: dict[Operation, tuple[Operation, ...]]
    blocking: bool
    sequential: bool
    # blocking ops that an op able to serve a waiting take depends on: each
    # gets a thread at once (see the module's docstring)
    urgent: frozenset[Operation] = frozenset()
    # the ops the run fetches (or whose outputs it fetches)
    fetched: frozenset[Operation] = frozenset()
    # outputs of source ops that give the same value every run (constants, variable
    # handles): a sequential run starts with them instead of calling those ops
    preset: FixedValues | None = None
    # what a sequential run calls, with each op's inputs and outputs: ``ops``
    # without the preset ones (None: all of ``ops``)
    calls: tuple[tuple[Operation, tuple[Tensor, ...], tuple[Tensor, ...]], ...] | None = None
    # whether an op to call also has a fed output (which the run must not overwrite)
    feeds_outputs: bool = True
    # it takes from accumulators and only fetches what they take: if the run fails,
    # their rounds can go back (see Session.run)
    takes_go_back: bool = False


def make_plan(targets: Sequence[Tensor | Operation], fed: frozenset[Tensor]) -> Plan:
    """The ops needed for ``targets`` when the ``fed`` tensors are given."""
    from tf_accum.graph.graph import Tensor

    order: list[Operation] = []
    producers: dict[Operation, tuple[Operation, ...]] = {}
    visiting: set[Operation] = set()
    roots = [t.op if isinstance(t, Tensor) else t for t in targets if t not in fed]
    stack: list[tuple[Operation, bool]] = [(op, False) for op in reversed(roots)]
    while stack:
        op, expanded = stack.pop()
        if op in producers:
            continue
        if expanded:
            visiting.discard(op)
            needed = [t.op for t in op.inputs if t not in fed] + list(op.control_inputs)
            producers[op] = tuple(dict.fromkeys(needed))
            order.append(op)
            continue
        if op in visiting:
            continue
        visiting.add(op)
        stack.append((op, True))
        for dependency in reversed(
            [t.op for t in op.inputs if t not in fed] + list(op.control_inputs)
        ):
            if dependency not in producers:
                stack.append((dependency, False))
    consumers: dict[Operation, list[Operation]] = {op: [] for op in order}
    for op in order:
        for producer in producers[op]:
            consumers[producer].append(op)
    blocking = [op for op in order if op.blocking]
    if len(blocking) == 1:
        order = _blocking_op_last(order, blocking[0], consumers)
    fixed = [op for op in order if _gives_one_value(op)]
    calls = tuple((op, op.inputs, op.outputs) for op in order if not _gives_one_value(op))
    return Plan(
        tuple(order),
        producers,
        {op: tuple(c) for op, c in consumers.items()},
        bool(blocking),
        len(blocking) <= 1,
        _urgent(order, blocking, consumers) if len(blocking) > 1 else frozenset(),
        frozenset(roots),
        FixedValues(fixed),
        calls,
        any(t in fed for _, _, outputs in calls for t in outputs),
        takes_go_back(order, consumers),
    )


def takes_go_back(ops: Sequence[Operation], consumers: Mapping[Operation, Sequence[Any]]) -> bool:
    """Whether ``ops`` take from accumulators and nothing uses what they take (the
    run only fetches it): then their rounds can go back if the run fails."""
    takes = [op for op in ops if op.type in TAKE_OPS]
    return bool(takes) and not any(consumers[op] for op in takes)


# source ops whose kernels return one fixed value, whatever the run
_FIXED_VALUE_TYPES = frozenset({"Const", "VarHandleOp"})


class FixedValues:
    """The outputs of a plan's fixed-value ops, computed at its first sequential run
    (not when the plan is made: a TF1 cluster session's plans never need them)."""

    __slots__ = ("_ops", "_values", "_lock")

    def __init__(self, ops: Sequence[Operation]) -> None:
        self._ops = tuple(ops)
        self._values: tuple[tuple[Tensor, Any], ...] | None = None
        self._lock = threading.Lock()

    def values(self) -> tuple[tuple[Tensor, Any], ...]:
        found = self._values
        if found is None:
            with self._lock:
                if self._values is None:
                    self._values = tuple((op.outputs[0], _fixed_value(op)) for op in self._ops)
                found = self._values
        return found


def _fixed_value(op: Operation) -> Any:
    # these kernels read nothing of the run
    return op.kernel(None, [])[0]  # type: ignore[arg-type]


def _gives_one_value(op: Operation) -> bool:
    return (
        op.type in _FIXED_VALUE_TYPES
        and not op.inputs
        and not op.control_inputs
        and not op.blocking
        and len(op.outputs) == 1
    )


def _serves_takes(op: Operation) -> bool:
    return op.type.endswith(_SERVING_SUFFIX) or op.type in _SERVING_TYPES


def _urgent(
    order: list[Operation], blocking: list[Operation], consumers: dict[Operation, list[Operation]]
) -> frozenset[Operation]:
    """The blocking ops that some op able to serve a waiting take depends on."""
    serving_below: dict[Operation, bool] = {}
    for op in reversed(order):  # consumers come later in ``order``
        serving_below[op] = any(_serves_takes(c) or serving_below[c] for c in consumers[op])
    return frozenset(op for op in blocking if serving_below[op])


def _blocking_op_last(
    order: list[Operation], blocking: Operation, consumers: dict[Operation, list[Operation]]
) -> list[Operation]:
    """``order`` with ``blocking`` after every op that does not depend on it."""
    downstream = {blocking}
    for op in order[order.index(blocking) :]:
        if op in downstream:
            downstream.update(consumers[op])
    return [op for op in order if op not in downstream] + [op for op in order if op in downstream]


class RunContext:
    """What a kernel may ask of the run executing it."""

    __slots__ = ("session", "op", "deadline", "cancellation")

    def __init__(
        self, session: Session, deadline: float | None, cancellation: Cancellation
    ) -> None:
        self.session = session
        self.op: Operation | None = None
        self.deadline = deadline
        self.cancellation = cancellation

    def for_op(self, op: Operation) -> RunContext:
        context = RunContext(self.session, self.deadline, self.cancellation)
        context.op = op
        return context

    def remaining(self, timeout: float | None) -> float | None:
        """Seconds a take may wait: its own timeout and the run's deadline, whichever is first."""
        if self.deadline is None:
            return timeout
        left = max(0.0, self.deadline - time.monotonic())
        return left if timeout is None else min(timeout, left)


def execute(
    session: Session,
    plan: Plan,
    fed: dict[Tensor, Any],
    deadline: float | None,
    cancellation: Cancellation,
) -> dict[Tensor, Any]:
    """Run ``plan``; returns every computed (and fed) tensor's value.

    Raises:
        the first error of any op; DeadlineExceededError at ``deadline``.
    """
    run = RunContext(session, deadline, cancellation)
    with using_table(session.table), cancelled_by(cancellation):
        if plan.sequential:
            values: dict[Tensor, Any] = dict(plan.preset.values() if plan.preset else ())
            values.update(fed)
            _run_in_order(run, plan, values, fed)
            return values
        values = dict(fed)
        _Scheduler(run, plan, values, fed).run()
    return values


def _run_in_order(
    run: RunContext, plan: Plan, values: dict[Tensor, Any], fed: dict[Tensor, Any]
) -> None:
    """The plan's ops one after the other on this thread, with one context: the
    kernels use it only while called."""
    if plan.feeds_outputs or plan.calls is None:
        for op in plan.ops if plan.calls is None else (op for op, _, _ in plan.calls):
            run.op = op
            _store(values, op, _call(run, op, values), fed)
        return
    try:
        for op, inputs, outputs in plan.calls:
            run.op = op
            values.update(zip(outputs, op.kernel(run, [values[t] for t in inputs]), strict=True))
    except errors.OpError as error:
        if error.op is None:
            error._op = run.op
        raise


def _call(run: RunContext, op: Operation, values: dict[Tensor, Any]) -> Sequence[Any]:
    """``op``'s kernel on its input values; ``run.op`` must be ``op``."""
    try:
        return op.kernel(run, [values[t] for t in op.inputs])
    except errors.OpError as error:
        if error.op is None:
            error._op = op
        raise


def _store(
    values: dict[Tensor, Any], op: Operation, outputs: Sequence[Any], fed: dict[Tensor, Any]
) -> None:
    for tensor, value in zip(op.outputs, outputs, strict=True):
        if tensor not in fed:
            values[tensor] = value


class _Scheduler:
    """Dataflow order for a plan with blocking ops; state local to one run.

    Blocking ops wait in ``queued`` for one of at most ``TAKE_THREADS``
    workers, which take them in order and end when none is left; urgent ones
    get a thread of their own. Every outcome comes back through ``finished``.
    """

    def __init__(
        self, run: RunContext, plan: Plan, values: dict[Tensor, Any], fed: dict[Tensor, Any]
    ) -> None:
        self.run_context = run
        self.plan = plan
        self.values = values
        self.fed = fed
        self.pending = {op: len(plan.producers[op]) for op in plan.ops}
        self.ready = collections.deque(op for op in plan.ops if not self.pending[op])
        self.left = len(plan.ops)
        self.finished: queue.SimpleQueue[
            tuple[Operation, Sequence[Any] | None, BaseException | None]
        ] = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        self.in_flight = 0
        self.lock = threading.Lock()
        self.queued: collections.deque[tuple[Operation, list[Any]]] = collections.deque()
        self.workers = 0
        self.abandoned = False
        # takes whose attempts are queued in their accumulators, not yet collected
        self.attempts: dict[Operation, StartedTake] = {}
        # (when, order, op): the own timeouts of those takes, earliest first
        self.timeouts: list[tuple[float, int, Operation]] = []
        self.started = 0

    def run(self) -> None:
        try:
            while self.left:
                blocked = self._run_ready_inline()
                if blocked:
                    if len(blocked) == 1 and not self.in_flight and not self.ready:
                        op = blocked[0]
                        self._complete(op, _call(self.run_context.for_op(op), op, self.values))
                        continue
                    for op in blocked:
                        self._submit(op)
                if self.left and not self.ready:
                    self._wait_for_one()
        except BaseException as error:
            self._abandon("interrupted" if isinstance(error, KeyboardInterrupt) else "cancelled")
            raise

    def _run_ready_inline(self) -> list[Operation]:
        blocked = []
        while self.ready:
            op = self.ready.popleft()
            if op.blocking:
                blocked.append(op)
            else:
                self._complete(op, _call(self.run_context.for_op(op), op, self.values))
        return blocked

    def _complete(self, op: Operation, outputs: Sequence[Any]) -> None:
        _store(self.values, op, outputs, self.fed)
        self.left -= 1
        for consumer in self.plan.consumers[op]:
            self.pending[consumer] -= 1
            if not self.pending[consumer]:
                self.ready.append(consumer)

    def _submit(self, op: Operation) -> None:
        """Queue the attempt of an accumulator's take; run any other blocking
        ``op`` on another thread: its own if urgent, else a worker's."""
        inputs = [self.values[t] for t in op.inputs]
        start = getattr(op.kernel, "start", None)
        if start is not None and self._start_take(op, start, inputs):
            return
        self.in_flight += 1
        if op in self.plan.urgent:
            self._start(lambda: self._execute(op, inputs), f"tf_accum run {op.name}")
            return
        with self.lock:
            self.queued.append((op, inputs))
            if self.workers >= TAKE_THREADS:
                return
            self.workers += 1
        self._start(self._work, "tf_accum run worker")

    def _start_take(self, op: Operation, start: Any, inputs: list[Any]) -> bool:
        """Queue ``op``'s take attempt; False if it must run as a blocking call."""
        try:
            started = start(self.run_context.for_op(op), inputs, _Report(self.finished, op))
        except errors.OpError as error:
            if error.op is None:
                error._op = op
            raise
        if started is None:
            return False
        self.attempts[op] = started
        self.in_flight += 1
        timeout = getattr(op.kernel, "timeout", None)
        if timeout is not None and not math.isinf(timeout):
            self.started += 1  # orders equal times: ops do not compare
            heapq.heappush(self.timeouts, (time.monotonic() + timeout, self.started, op))
        return True

    def _start(self, target: Callable[[], None], name: str) -> None:
        self.threads.append(start_thread(contextvars.copy_context().run, name, target))

    def _work(self) -> None:
        """A worker: run queued blocking ops until none is left (or the run is abandoned)."""
        while True:
            with self.lock:
                if not self.queued or self.abandoned:
                    self.workers -= 1
                    return
                op, inputs = self.queued.popleft()
            self._execute(op, inputs)

    def _execute(self, op: Operation, inputs: list[Any]) -> None:
        context = self.run_context.for_op(op)
        try:
            self.finished.put((op, op.kernel(context, inputs), None))
        except BaseException as error:  # handed to the run's thread
            if isinstance(error, errors.OpError) and error.op is None:
                error._op = op
            self.finished.put((op, None, error))

    @interruptible  # Ctrl-C stops a run waiting on its takes at once
    def _wait_for_one(self) -> None:
        deadline = self.run_context.deadline
        timeouts = self.timeouts
        until = deadline if not timeouts else min(deadline or math.inf, timeouts[0][0])
        try:
            if until is None:
                op, outputs, error = self.finished.get()
            else:
                op, outputs, error = self.finished.get(timeout=max(0.0, until - time.monotonic()))
        except queue.Empty:
            if deadline is not None and time.monotonic() >= deadline:
                raise deadline_error() from None
            self._withdraw_timed_out()
            return
        self.in_flight -= 1
        if error is not None:
            raise error
        if outputs is None:  # a take attempt's callback: served or cancelled
            started = self.attempts[op]
            try:
                outputs = started.collect()
            except errors.OpError as failure:
                if failure.op is None:
                    failure._op = op
                raise
            self._complete(op, outputs)
            # the run's delivery gives it back from here, if it has one (see Session.run)
            joined(started.accumulator, started.attempt)
            del self.attempts[op]  # last: until here a failed run gives the round back
            return
        self._complete(op, outputs)

    def _withdraw_timed_out(self) -> None:
        """Withdraw the takes whose own timeout has passed; the first that
        consumed nothing fails the run (one served meanwhile is collected)."""
        now = time.monotonic()
        while self.timeouts and self.timeouts[0][0] <= now:
            op = heapq.heappop(self.timeouts)[2]
            started = self.attempts.get(op)
            if started is not None and started.give_up("timed_out"):
                del self.attempts[op]
                error = deadline_error()
                error._op = op
                raise error

    def _abandon(self, reason: str) -> None:
        """Withdraw the run's waiting takes (a round served to one not
        collected goes back), drop the queued ones, and let the threads end."""
        try:
            while self.attempts:
                self.attempts.popitem()[1].give_up(reason)
        finally:
            with self.lock:
                self.abandoned = True
                self.queued.clear()
            self.run_context.cancellation.cancel(sibling_failed_error())
            for thread in self.threads:
                thread.join(JOIN_WAIT)


class _Report:
    """A take attempt's callback: tells the run's thread that ``op``'s attempt
    is served or cancelled (called with the accumulator's lock held)."""

    __slots__ = ("finished", "item")

    def __init__(self, finished: queue.SimpleQueue[Any], op: Operation) -> None:
        self.finished = finished
        self.item = (op, None, None)

    def __call__(self) -> None:
        self.finished.put(self.item)
