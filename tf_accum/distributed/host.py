"""A host: accumulators, queues and variables in one Ray actor, shared by every process.

Processes send it requests (a list of steps in dependency order: see
tf_accum.distributed.steps); it runs them against an in-process resource
table, so every op means exactly what it means in one process, and every
process sees the same accumulators and queues (by shared_name). A TF1 cluster
task's host (a ps task) gets from the graph layer what it runs beyond raw ops
(``TaskExtension``: variables by name, training ops, graph kernels), and a
worker session sends it, per ``Session.run``, the ops of the run placed on
that task as one request.

Everything runs on the actor's event loop. A request stopped at a take that
cannot complete yet waits as a take attempt in that accumulator's own queue
(``Rounds.try_take``: first in, first served, as in-process), whose callback
wakes the request; it goes on once the attempt is served, and gives it up
(consuming nothing) at its timeout or the run's deadline, when the request is
cancelled or its caller dies. A request stopped at a queue's dequeue or
enqueue waits in a line of the host's for that queue. A request stops at its
first failing step and says which step failed and how. Nothing raises to the caller.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import os
import pickle
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import numpy as np

from tf_accum import errors, raw_ops
from tf_accum.accumulators.attempts import TakeAttempt, copy_error
from tf_accum.accumulators.base import AccumulatorBase
from tf_accum.accumulators.cancellation import Cancellation, cancelled_by
from tf_accum.accumulators.rounds import CANCELLED_REASON, INTERRUPTED
from tf_accum.accumulators.rounds import TIMED_OUT as TIMED_OUT_REASON
from tf_accum.distributed.caller_liveness import CallerLiveness
from tf_accum.distributed.small_messages import is_small, pack, split, unpack
from tf_accum.distributed.steps import MAKE, RawStep, decode, inputs_of
from tf_accum.distributed.wire import (
    RESTARTED,
    TIMED_OUT,
    Done,
    Failure,
    Outcome,
    Request,
    StepFailed,
    StepRefused,
)
from tf_accum.queues.fifo import FIFOQueue
from tf_accum.raw_ops.common import take_attempt
from tf_accum.raw_ops.queues import refused_before_waiting
from tf_accum.resources import using_table
from tf_accum.resources.local import LocalResourceTable

# Cancellations that arrived before their request (calls are not ordered).
REMEMBERED_CANCELS = 10_000

# Decoded requests kept (by their pickled steps): a session sends the same few each run.
DECODED_REQUESTS = 1024

# A request's served takes are kept for a give-back (see _Host.give_back) when their
# outputs are smaller than this (a kept round holds its buffers until it is replaced;
# a dense round of this size or more recycles its buffer: see accumulators/dense.py).
GIVE_BACK_MAX_BYTES = 1 << 20

CLOSED_MESSAGE = "TakeGrad operation was cancelled"
ENQUEUE_CANCELLED = Failure("CancelledError", "Enqueue operation was cancelled")


class TaskExtension(Protocol):
    """What a TF1 cluster task's host does beyond raw ops and constructors, given
    by the graph layer (``tf_accum.graph.task_host.TaskSteps``): the steps of other
    kinds (variables by name, training ops, graph kernels) and the job's rules
    for the processes that join it."""

    # how long a process joining for a task waits for a dead predecessor to be noticed
    handover: float

    def run(self, step: tuple[Any, ...], values: list[Any]) -> tuple[Any, ...]:
        """Run a step of a kind of its own on its input ``values``; its outputs."""

    def counts(self) -> dict[str, int]:
        """What it holds, for ``counts`` (``{"variables": n}``)."""

    def clear(self) -> None:
        """Drop everything it holds (a reset)."""

    def disagreement(self, host_spec: str, spec: str, task: str) -> str | None:
        """Why a process with ClusterSpec ``spec`` cannot join task ``task``'s
        host, made with ``host_spec``; None when they are one job's."""

    def job_over(self, spec: str | None, joined: set[str], holders: set[str]) -> str | None:
        """Why the job is over for the host's task; None while it is not."""


class _Waiter:
    """A request waiting at a queue's dequeue or enqueue, in the host's line for it."""

    __slots__ = ("future", "failure", "added")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        # set when something else ends the wait with an error (a queue closed with
        # cancel_pending_enqueues fails the enqueues waiting for room)
        self.failure: Failure | None = None
        # an enqueue_many larger than its queue's room: the elements added so far
        self.added = 0

    def wake(self) -> None:
        if not self.future.done():
            self.future.set_result(None)

    def waker(self, loop: asyncio.AbstractEventLoop) -> Callable[[errors.OpError], None]:
        """A cancellation callback (any thread) that wakes this waiter on ``loop``."""

        def wake(_error: errors.OpError) -> None:
            loop.call_soon_threadsafe(self.wake)

        return wake


class _Take:
    """A request's take waiting as an attempt in its accumulator's queue: the
    future the attempt's callback completes, and the request's list of served takes."""

    __slots__ = ("accumulator", "attempt", "future", "served")

    def __init__(self, loop: asyncio.AbstractEventLoop, served: list[_Served] | None) -> None:
        self.future: asyncio.Future[None] = loop.create_future()
        self.accumulator: AccumulatorBase[Any] | None = None
        self.attempt: TakeAttempt[Any] | None = None
        self.served = served


# A take a request was served: its accumulator, its attempt, the bytes of its outputs.
_Served = tuple[AccumulatorBase[Any], TakeAttempt[Any], int]


class _Pending(NamedTuple):
    """A request stopped at a step that would wait: the outputs of the steps before
    it, and the take waiting as an attempt (None: a queue op, which waits in a line)."""

    outputs: list[tuple[Any, ...]]
    take: _Take | None


class _Host:
    """Accumulators and variables of one task, shared by every session of the cluster
    (the state and work of a ``ResourceHost``, kept off the actor class, whose every method
    Ray wraps for tracing)."""

    def __init__(
        self,
        task: str,
        job: dict[str, Any] | None = None,
        extension: type[TaskExtension] | None = None,
    ) -> None:
        self._task = task
        self._instance = uuid.uuid4().hex
        # the process that made the host: its ClusterSpec (``cluster_job.spec_text``),
        # its task's label, caller id, where it is ("pid N on node X"), pid and node id
        job = job or {}
        self._spec: str | None = job.get("spec")
        self._owner = (int(job.get("pid", os.getpid())), str(job.get("node", "")))
        # task label -> (caller, where) of the live process serving that task
        self._holders: dict[str, tuple[str, str]] = {}
        if "task" in job:
            self._holders[job["task"]] = (job["caller"], job["where"])
        self._joined: set[str] = set()  # labels of the tasks whose processes have joined
        self._table = LocalResourceTable()
        self._extension = None if extension is None else extension()
        self._lock = threading.Lock()
        # (session, constructor op name) -> handle, as a kernel caches its resource
        self._made: dict[tuple[str, str], int] = {}
        self._private: dict[str, list[int]] = collections.defaultdict(list)
        self._sessions_of: dict[str, set[str]] = collections.defaultdict(set)
        self._running: dict[str, Cancellation] = {}
        self._callers: dict[str, str] = {}  # request -> caller
        self._early_cancels: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._lives = CallerLiveness(self._caller_died)
        # requests waiting, in arrival order, per line (see _line_of): a queue's
        # dequeues, a queue's enqueues and closes (takes wait in their accumulators)
        self._queues: dict[int, collections.deque[_Waiter]] = {}
        self._takes_waiting = 0
        # queues the steps run since the last wake used (None: something else
        # changed, every line looks again): only their lines' heads can be served
        self._touched: set[int] | None = set()
        # pickled steps -> the steps decoded and those whose outputs the answer leaves
        # out (a session sends the same ones every run)
        self._decoded: dict[bytes, tuple[list[Any], tuple[int, ...], bool]] = {}
        # per accumulator handle, the local step each replica (the task label of the
        # session that applied) last applied a gradient with: what a wait report says
        self._contributions: dict[int, dict[str, int]] = collections.defaultdict(dict)
        # per request running, the takes it was served so far
        self._served: dict[Cancellation, list[_Served]] = {}
        # per caller, its latest answered request whose takes could still go back:
        # (request, its served takes)
        self._delivered: dict[str, tuple[str, list[_Served]]] = {}
        # requests running whose callers gave them up, and those given up before they
        # came (calls are not ordered): their takes go back once they have run
        self._abandoned: set[str] = set()
        self._early_give_backs: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.requests = 0

    async def ping(self) -> tuple[str, int, str]:
        """(instance, process id, node id)."""
        import ray

        return self._instance, os.getpid(), ray.get_runtime_context().get_node_id()

    async def counts(self) -> dict[str, int]:
        """Counts for tests and diagnostics: requests run, accumulators, variables, waiting takes."""
        handles = self._table.live_handles()
        waiting = self._takes_waiting + sum(len(queue) for queue in self._queues.values())
        return {
            "requests": self.requests,
            "accumulators": len(handles),
            **(self._extension.counts() if self._extension is not None else {}),
            "waiting": waiting,
            "running": len(self._running),
            "early_cancels": len(self._early_cancels),
        }

    async def owner(self) -> tuple[int, str]:
        """(pid, node id) of the process that made this host (it ends with that process)."""
        return self._owner

    async def accumulator_report(self, handles: list[int]) -> dict[int, dict[str, Any]]:
        """What a wait report says of accumulators: per handle, its counters
        (``raw_ops.common.accumulator_stats``) and under ``"replicas"`` the local
        step each replica (task label) last applied a gradient with. Handles that
        are gone are left out."""
        from tf_accum.raw_ops.common import accumulator_stats

        found: dict[int, dict[str, Any]] = {}
        with using_table(self._table):
            for handle in handles:
                try:
                    stats: dict[str, Any] = dict(accumulator_stats(handle))
                except (errors.OpError, TypeError, LookupError):
                    continue
                stats["replicas"] = dict(self._contributions.get(handle, {}))
                found[handle] = stats
        return found

    async def join(
        self, task: str, spec: str, caller: str, where: str, life: list[Any]
    ) -> tuple[Any, ...]:
        """Let ``caller``, the process of task ``task`` (a label) with ClusterSpec
        ``spec`` (``cluster_job.spec_text``), use this host.

        Returns ("ok", instance, pid, node, the owner's pid, the owner's node);
        ("disagree", reason, this host's spec) when the ClusterSpecs cannot be
        one job's; ("taken", where) when another live process serves ``task``
        (a process that died is noticed within the extension's ``handover``
        seconds: its successor waits for that).
        """
        extension = self._extension
        assert extension is not None  # only cluster processes join, to task hosts
        if self._spec is not None:
            reason = extension.disagreement(self._spec, spec, self._task)
            if reason is not None:
                return ("disagree", reason, self._spec)
        self._lives.watch(caller, life)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + extension.handover
        while True:
            holder = self._holders.get(task)
            if holder is None or holder[0] == caller:
                break
            if loop.time() >= give_up:
                return ("taken", holder[1])
            await asyncio.sleep(0.1)  # a dead holder is dropped by _caller_died
        self._holders[task] = (caller, where)
        self._joined.add(task)
        return ("ok", *(await self.ping()), *self._owner)

    async def job_over(self) -> str | None:
        """Why the job is over for this task (``cluster_job.job_over``); None while it is not."""
        if self._extension is None:
            return None
        return self._extension.job_over(self._spec, self._joined, set(self._holders))

    # --- callers' lives -----------------------------------------------------------

    async def hold(self, caller: str) -> None:
        """Never returns while ``caller`` lives (its result is the caller's life token)."""
        await self._lives.hold(caller)

    def _caller_died(self, caller: str) -> None:
        """Cancel the dead process's requests (its takes consume nothing); end its sessions."""
        for request, owner in list(self._callers.items()):
            if owner == caller:
                self._cancel_now(request)
        for session in self._sessions_of.pop(caller, set()):
            self._end_session(session)
        for task, holder in list(self._holders.items()):
            if holder[0] == caller:
                del self._holders[task]
        self._delivered.pop(caller, None)
        self._lives.forget(caller)

    # --- requests -------------------------------------------------------------------

    async def run(self, packed: Any, *pieces: bytes) -> Any:
        """Run a request's steps in order: Done, or the first failing step's StepFailed
        or StepRefused.

        ``packed`` is a ``wire.Request``, one argument (Ray serialises each
        argument on its own), or one packed by ``small_messages.pack`` (split
        into ``pieces`` after the first, when large). A step the request's
        steps leave unanswered answers nothing but, for a take, its
        accumulator's stale count and global step. An answer whose outputs
        are small comes packed; with ``answer_pieces`` above 1, packed and
        split into that many pieces.
        """
        message: Request = unpack(packed, *pieces)
        outcome = await self._run(message)
        if message.answer_pieces > 1:
            return split(outcome, message.answer_pieces)
        if type(outcome) is Done and is_small(v for out in outcome.outputs for v in out):
            return pack(outcome)
        return outcome

    async def _run(self, message: Request) -> Outcome:
        instance, session, caller, life, request, blob, values, remaining, _ = message
        if instance != self._instance:
            return StepFailed(0, Failure(RESTARTED))
        steps, unanswered, gives_back = self._steps(blob)
        self.requests += 1
        self._lives.watch(caller, life)
        self._sessions_of[caller].add(session)
        cancellation = Cancellation()
        if request in self._early_cancels:
            del self._early_cancels[request]
            cancellation.cancel(errors.CancelledError(None, None, CLOSED_MESSAGE))
        if request in self._early_give_backs:
            del self._early_give_backs[request]
            self._abandoned.add(request)
            cancellation.cancel(errors.CancelledError(None, None, CLOSED_MESSAGE))
        deadline = None if remaining is None else time.monotonic() + remaining
        # its served takes, kept only when they may go back (the run only fetches them)
        served: list[_Served] | None = [] if gives_back else None
        if served is not None:
            self._served[cancellation] = served
        try:
            ran = self._execute(session, steps, values, deadline, cancellation)
            self._wake()  # what it enqueued or dequeued may let waiting queue ops go on
            if isinstance(ran, _Pending):
                self._running[request] = cancellation
                self._callers[request] = caller
                try:
                    outcome = await self._wait_and_go_on(
                        session, steps, values, deadline, cancellation, ran
                    )
                finally:
                    self._running.pop(request, None)
                    self._callers.pop(request, None)
            else:
                outcome = ran
        finally:
            self._served.pop(cancellation, None)
            if request in self._abandoned:
                self._abandoned.discard(request)
                for accumulator, attempt, _ in served or ():
                    accumulator.cancel(attempt, INTERRUPTED)
                served = None
        if served:
            self._keep_for_give_back(caller, request, served)
        return _answered(outcome, steps, unanswered)

    def _keep_for_give_back(self, caller: str, request: str, served: list[_Served]) -> None:
        """Keep ``request``'s served takes as ``caller``'s latest (replacing the one
        before), if they are small and every round could still go back: a failed
        request's too (the caller's run fails, and gives them back)."""
        if sum(size for _, _, size in served) >= GIVE_BACK_MAX_BYTES or not all(
            accumulator.can_give_back(attempt) for accumulator, attempt, _ in served
        ):
            self._delivered.pop(caller, None)
            return
        self._delivered[caller] = (request, served)

    def _steps(self, blob: bytes) -> tuple[list[Any], tuple[int, ...], bool]:
        """A request's steps, decoded (their SLOT sources read the request's values), the
        steps whose outputs the answer leaves out, and whether its takes' rounds may go
        back (the run only fetches them: see give_back)."""
        found = self._decoded.get(blob)
        if found is None:
            steps, unanswered, gives_back = pickle.loads(blob)
            found = ([decode(step) for step in steps], tuple(unanswered), bool(gives_back))
            if len(self._decoded) >= DECODED_REQUESTS:
                self._decoded.clear()
            self._decoded[blob] = found
        return found

    async def _wait_and_go_on(
        self,
        session: str,
        steps: list[Any],
        slots: list[Any],
        deadline: float | None,
        cancellation: Cancellation,
        pending: _Pending,
    ) -> Outcome:
        """Wait at the step that would wait (a take's attempt queued in its accumulator,
        or a queue op in the host's line for its queue, in arrival order); go on with the
        request each time it is served, and wait again at the next such step."""
        loop = asyncio.get_running_loop()
        outputs, take = pending
        while True:
            index = len(outputs)
            step = steps[index]
            if take is not None:
                failed = await self._wait_for_take(take, step, outputs, deadline, index)
                if failed is not None:
                    return failed
                ran = self._execute(session, steps, slots, deadline, cancellation, outputs)
                self._wake()  # the queue ops run since may let others go on
                if not isinstance(ran, _Pending):
                    return ran
                take = ran.take
                continue
            enqueued = False
            handle = _line_of(step, int(inputs_of(step.sources, outputs, slots)[step.handle]))
            waiter = _Waiter(loop.create_future())
            queue = self._queues.setdefault(handle, collections.deque())
            queue.append(waiter)
            key = cancellation.register(waiter.waker(loop))
            try:
                while True:
                    if cancellation.cancelled:
                        assert cancellation.error is not None
                        return StepFailed(index, Failure.of(cancellation.error))
                    if waiter.failure is not None:
                        return StepFailed(index, waiter.failure)
                    if _handle_of_line(handle) not in self._table.live_handles():
                        # destroyed while the op waited, as in-process
                        return StepFailed(index, Failure("CancelledError", CLOSED_MESSAGE))
                    if self._ready(step, outputs, slots, waiter):
                        break
                    if step.queue_op == "QueueEnqueueManyV2":
                        # the elements go in as room appears, as in a process
                        added = self._add_what_fits(step, outputs, slots, waiter)
                        if added is not None:
                            if type(added) is not Done:
                                return added
                            enqueued = True
                            break
                    left = _remaining(step.attrs["timeout"], deadline)
                    if left == 0:
                        return StepFailed(index, TIMED_OUT)
                    try:
                        await asyncio.wait_for(asyncio.shield(waiter.future), left)
                    except asyncio.TimeoutError:
                        return StepFailed(index, TIMED_OUT)
                    waiter.future = loop.create_future()
            finally:
                cancellation.unregister(key)
                queue.remove(waiter)
                if queue:
                    # the next in line looks again (after this request's take, if it goes on)
                    queue[0].wake()
                else:
                    del self._queues[handle]
            if enqueued:
                outputs.append(())  # every element added: the requests goes on after it
            # no await since the check: the take completes now
            ran = self._execute(
                session, steps, slots, deadline, cancellation, outputs, checked=not enqueued
            )
            self._wake()  # the next in line may go now
            if not isinstance(ran, _Pending):
                return ran
            take = ran.take

    async def _wait_for_take(
        self,
        take: _Take,
        step: RawStep,
        outputs: list[tuple[Any, ...]],
        deadline: float | None,
        index: int,
    ) -> StepFailed | None:
        """Wait until the attempt of ``take`` (step ``index``) is served or cancelled
        and add the take's outputs; out of time (its timeout or the run's deadline),
        withdraw it. None once the outputs are in, else the request's failed outcome."""
        accumulator, attempt = take.accumulator, take.attempt
        assert accumulator is not None and attempt is not None
        self._takes_waiting += 1
        try:
            await asyncio.wait_for(
                asyncio.shield(take.future), _remaining(step.attrs["timeout"], deadline)
            )
        except asyncio.TimeoutError:
            if not attempt.done:
                accumulator.cancel(attempt, TIMED_OUT_REASON)  # consumes nothing
                return StepFailed(index, TIMED_OUT)
        except BaseException:
            accumulator.cancel(attempt, INTERRUPTED)  # a round served goes back
            raise
        finally:
            self._takes_waiting -= 1
        try:
            # served, or cancelled (the request was, its caller died, or the accumulator
            # was destroyed): collecting raises the error it was cancelled with
            found = _take_outputs(step, accumulator, accumulator.collect(attempt))
        except errors.OpError as error:
            return StepFailed(index, Failure.of(error))
        outputs.append(found)
        if take.served is not None:
            take.served.append((accumulator, attempt, _nbytes(found)))
        return None

    def _wake(self) -> None:
        """Let the head of each line of every queue a step used since the last wake look
        again (an enqueue or a dequeue may let it go on; an accumulator's takes are
        served by the accumulator itself)."""
        touched, self._touched = self._touched, set()
        if touched is None:
            self._wake_all()
            return
        for handle in touched:
            for line in (handle, ~handle):  # a queue's dequeues, and its enqueues and closes
                queue = self._queues.get(line)
                if queue:
                    queue[0].wake()

    def _cancel_waiting_enqueues(self, handle: int) -> None:
        """Fail every enqueue waiting for room in queue ``handle`` (a close that cancels
        pending enqueues, as TensorFlow's does)."""
        for waiter in self._queues.get(~handle, ()):
            waiter.failure = ENQUEUE_CANCELLED
            waiter.wake()

    def _wake_all(self) -> None:
        """Let the head of every line look again."""
        self._touched = set()
        for queue in self._queues.values():
            queue[0].wake()

    async def cancel(self, request: str) -> None:
        """Cancel a request's waiting takes (CancelledError; they consume nothing)."""
        if request in self._running:
            self._cancel_now(request)
            return
        self._early_cancels[request] = None
        if len(self._early_cancels) > REMEMBERED_CANCELS:
            self._early_cancels.popitem(last=False)

    async def give_back(self, request: str) -> None:
        """The caller's run failed (Ctrl-C, say) and will not read ``request``'s
        answer, whose takes only it fetched: their rounds go back (see
        ``Rounds.cancel``), counted as interrupted. A request still waiting is
        cancelled, and what it was served goes back once it stops; one answered
        goes back if it is its caller's latest kept (see _keep_for_give_back); one
        not come yet is cancelled when it comes, and gives back what it is served."""
        if request in self._running:
            self._abandoned.add(request)
            self._cancel_now(request)
            return
        for caller, (answered, served) in list(self._delivered.items()):
            if answered == request:
                del self._delivered[caller]
                for accumulator, attempt, _ in served:
                    accumulator.cancel(attempt, INTERRUPTED)
                return
        self._early_give_backs[request] = None
        if len(self._early_give_backs) > REMEMBERED_CANCELS:
            self._early_give_backs.popitem(last=False)

    def _cancel_now(self, request: str) -> None:
        found = self._running.get(request)
        if found is not None:
            found.cancel(errors.CancelledError(None, None, CLOSED_MESSAGE))

    async def reset(self) -> None:
        """Drop everything: waiting takes are cancelled, accumulators destroyed, variables gone."""
        for request in list(self._running):
            self._cancel_now(request)
        with self._lock:
            self._made.clear()
            self._private.clear()
        self._contributions.clear()
        self._delivered.clear()
        for handle in self._table.live_handles():
            self._table.destroy(handle, ignore_lookup_error=True)
        if self._extension is not None:
            self._extension.clear()
        self._wake_all()

    async def close_session(self, session: str) -> None:
        """Free what ``session`` made privately here (shared state stays)."""
        for sessions in self._sessions_of.values():
            sessions.discard(session)
        self._end_session(session)

    def _end_session(self, session: str) -> None:
        with self._lock:
            for key in [k for k in self._made if k[0] == session]:
                del self._made[key]
            private = self._private.pop(session, [])
        for handle in private:
            self._table.destroy(handle, ignore_lookup_error=True)
            self._contributions.pop(handle, None)
        self._wake_all()  # queue ops waiting on what was destroyed fail (takes fail at once)

    # --- steps ----------------------------------------------------------------------

    def _execute(
        self,
        session: str,
        steps: list[Any],
        slots: list[Any],
        deadline: float | None,
        cancellation: Cancellation,
        outputs: list[tuple[Any, ...]] | None = None,
        checked: bool = False,
    ) -> Outcome | _Pending:
        """Run ``steps`` from ``len(outputs)`` on (SLOT sources read ``slots``), stopping
        at a step that would wait (_Pending); ``checked``: the first step is a queue op
        found ready just now."""
        outputs = [] if outputs is None else outputs
        first = len(outputs)
        with using_table(self._table), cancelled_by(cancellation):
            for index in range(first, len(steps)):
                step = steps[index]
                try_now = type(step) is RawStep and step.take
                try:
                    if try_now and step.required is not None:
                        found = self._try_take(step, outputs, slots, cancellation)
                        if type(found) is _Take:
                            return _Pending(outputs, found)
                        outputs.append(found)  # type: ignore[arg-type]
                        continue
                    ready = checked and index == first
                    if try_now and not ready and not self._ready(step, outputs, slots):
                        return _Pending(outputs, None)
                    if type(step) is RawStep:
                        outputs.append(self._raw(session, step, outputs, slots))
                    else:
                        outputs.append(self._step(session, step, outputs, slots))
                except errors.DeadlineExceededError as error:
                    if try_now and _remaining(step.attrs["timeout"], deadline) != 0:
                        return _Pending(outputs, None)  # not served after all: wait
                    return StepFailed(index, Failure.of(error))
                except errors.OpError as error:
                    return StepFailed(index, Failure.of(error))
                except (TypeError, ValueError) as error:
                    return StepRefused(index, type(error).__name__, str(error))
        return Done(outputs)

    def _try_take(
        self,
        step: RawStep,
        outputs: list[tuple[Any, ...]],
        slots: list[Any],
        cancellation: Cancellation,
    ) -> tuple[Any, ...] | _Take:
        """Queue take ``step`` as an attempt in its accumulator: its outputs when it is
        served at once, else the _Take to wait for. A take that can complete at once
        does, even in a cancelled request (as in a process); one that would wait there
        is withdrawn.

        Raises:
            what the take op raises before it would wait; a cancelled request's error.
        """
        inputs = inputs_of(step.sources, outputs, slots)
        arguments = step.arguments(inputs)
        arguments.update(step.attrs)
        served = self._served.get(cancellation)
        take = _Take(asyncio.get_running_loop(), served)
        cancelled = cancellation.cancelled
        accumulator, attempt = take_attempt(
            step.op_type,
            functools.partial(_wake_future, take.future),
            None if cancelled else cancellation,
            **arguments,
        )
        if attempt.done:
            found = _take_outputs(step, accumulator, accumulator.collect(attempt))
            if served is not None:
                served.append((accumulator, attempt, _nbytes(found)))
            return found
        if cancelled:
            accumulator.cancel(attempt, CANCELLED_REASON)
            assert cancellation.error is not None
            raise copy_error(cancellation.error)
        take.accumulator, take.attempt = accumulator, attempt
        return take

    def _ready(
        self,
        step: RawStep,
        outputs: list[tuple[Any, ...]],
        slots: list[Any],
        me: _Waiter | None = None,
    ) -> bool:
        """Whether queue op ``step`` completes now: a dequeue finds its elements (or a
        closed queue), an enqueue room for all of its elements (or a closed queue).

        Nothing waits inside a queue of the host (its ops run with no time to
        wait), so its own lines are empty; those waiting here are first in, first served.
        Arguments the op would refuse (an unknown handle, say) count as ready: it
        fails at once.
        """
        inputs = inputs_of(step.sources, outputs, slots)
        if step.queue_op is None:
            return True
        try:
            handle = int(inputs[0])
            found: Any = self._table.lookup(handle)
            queue: FIFOQueue = found
            size, closed, capacity = queue.size(), queue.is_closed(), queue.spec.capacity
        except Exception:
            return True  # refused at once
        op_type = step.queue_op
        if op_type == "QueueCloseV2" and step.attrs.get("cancel_pending_enqueues"):
            return True  # it fails the enqueues waiting for room rather than wait behind them
        # checked on arrival (``me`` None): a waiter passed it, and its arguments stay
        if me is None and refused_before_waiting(
            op_type, queue, {**step.arguments(inputs), **step.attrs}
        ):
            return True  # fails at once, as in one process
        line = self._queues.get(_line_of(step, handle))
        if line and line[0] is not me:
            return False
        if op_type in ("QueueDequeueV2", "QueueDequeueManyV2", "QueueDequeueUpToV2"):
            wanted = 1 if op_type == "QueueDequeueV2" else int(inputs[1])
            return bool(closed or size >= wanted)
        if op_type in ("QueueEnqueueV2", "QueueEnqueueManyV2"):
            if closed or capacity < 0:
                return True
            count = 1
            if op_type == "QueueEnqueueManyV2" and len(inputs) > 1:
                first = np.asarray(inputs[1])
                count = int(first.shape[0]) if first.ndim else 1
            # more elements than the capacity go in as room appears (_add_what_fits)
            return bool(size + count <= capacity)
        return True

    def _raw(
        self,
        session: str,
        step: RawStep,
        outputs: list[tuple[Any, ...]],
        slots: list[Any],
    ) -> tuple[Any, ...]:
        inputs = inputs_of(step.sources, outputs, slots)
        arguments = step.arguments(inputs)
        arguments.update(step.attrs)
        if self._touched is not None:
            handle = None if step.handle is None else inputs[step.handle]
            try:
                self._touched.add(int(handle))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                self._touched = None  # a destroy, say: any queue may change
        if step.queue_op == "QueueCloseV2" and arguments.get("cancel_pending_enqueues"):
            self._cancel_waiting_enqueues(int(inputs[0]))
        if step.take:
            arguments["timeout"] = 0.0  # on the event loop, a queue op must not wait
        result = step.kernel(**arguments)
        if step.local_step is not None:
            replica = replica_of(session)
            self._contributions[int(inputs[0])][replica] = int(inputs[step.local_step])
        if step.listed_outputs:
            return tuple(result)
        if step.n_outputs == 0:
            return ()
        return (result,) if step.n_outputs == 1 else tuple(result)

    def _add_what_fits(
        self, step: RawStep, outputs: list[tuple[Any, ...]], slots: list[Any], me: _Waiter
    ) -> Outcome | None:
        """Add to a bounded queue the next elements of enqueue_many ``step`` that fit,
        when ``me`` heads its line: Done (with no outputs) once all are in; the failed
        outcome when the op refuses them; None while some remain (or the queue has no
        room, or is closed: the op itself then says so).
        """
        index = len(outputs)
        inputs = inputs_of(step.sources, outputs, slots)
        arguments = step.arguments(inputs)
        handle = int(arguments["handle"])
        try:
            found: Any = self._table.lookup(handle)
            queue: FIFOQueue = found
            room = queue.spec.capacity - queue.size()
            if queue.is_closed() or room <= 0:
                return None
        except Exception:
            return None
        line = self._queues.get(~handle)
        if not line or line[0] is not me:
            return None
        components = [np.asarray(component) for component in arguments["components"]]
        count = int(components[0].shape[0]) if components and components[0].ndim else 0
        end = min(count, me.added + room)
        arguments["components"] = [component[me.added : end] for component in components]
        arguments.update(step.attrs)
        arguments["timeout"] = 0.0  # there is room for them
        try:
            with using_table(self._table):
                step.kernel(**arguments)
        except errors.OpError as error:
            return StepFailed(index, Failure.of(error))
        except (TypeError, ValueError) as error:
            return StepRefused(index, type(error).__name__, str(error))
        me.added = end
        if self._touched is not None:
            self._touched.add(handle)  # the dequeues waiting may go on
        self._wake()
        return Done([]) if end >= count else None

    def _step(
        self,
        session: str,
        step: tuple[Any, ...],
        outputs: list[tuple[Any, ...]],
        slots: list[Any],
    ) -> tuple[Any, ...]:
        if step[0] == MAKE:
            _, op_type, op_name, attrs = step
            return (self._make(session, op_type, op_name, attrs),)
        if self._extension is None:
            raise errors.UnimplementedError(
                None, None, f"A {step[0]} step runs only on a TF1 cluster task's host"
            )
        return self._extension.run(step, inputs_of(step[4], outputs, slots))

    def _make(self, session: str, op_type: str, op_name: str, attrs: dict[str, Any]) -> int:
        with self._lock:
            found = self._made.get((session, op_name))
            if found is not None:
                return found
            handle = int(getattr(raw_ops, op_type)(**attrs, name=op_name))
            self._made[(session, op_name)] = handle
            if not attrs.get("shared_name"):
                self._private[session].append(handle)
            return handle


def replica_of(session: str) -> str:
    """The task label of the process whose session has key ``session`` (see
    ``remote_run.ClusterSession``): ``"/job:worker/task:1"``."""
    return session.rsplit("#", 1)[0]


def _answered(outcome: Outcome, steps: list[Any], unanswered: tuple[int, ...]) -> Outcome:
    """``outcome`` without the outputs of the ``unanswered`` steps (no op of the caller
    uses them): a take's step keeps its accumulator's counts (see ``_take_outputs``)."""
    if type(outcome) is not Done or not unanswered:
        return outcome
    outputs = outcome.outputs
    for index in unanswered:
        step = steps[index]
        counted = type(step) is RawStep and step.take and step.required is not None
        outputs[index] = outputs[index][-2:] if counted else ()
    return outcome


def _take_outputs(step: RawStep, accumulator: AccumulatorBase[Any], result: Any) -> tuple[Any, ...]:
    """A take's outputs, then its accumulator's stale count and global step after it,
    for the session (past the op's outputs, which is all the session stores)."""
    found = (result,) if step.n_outputs == 1 else tuple(result)
    stats = accumulator.stats()
    return (*found, int(stats["stale"] or 0), int(stats["global_step"] or 0))


def _nbytes(outputs: tuple[Any, ...]) -> int:
    return sum(int(getattr(value, "nbytes", 0)) for value in outputs)


def _wake_future(future: asyncio.Future[None]) -> None:
    """A take attempt's callback (under its accumulator's lock, maybe on another
    thread): complete ``future`` on its event loop. On the loop's own thread (an
    apply of a request served the take) at once: completing a future only
    schedules its waiter, and the loop need not be woken through its pipe."""
    loop = future.get_loop()
    try:
        here = asyncio.get_running_loop() is loop
    except RuntimeError:  # another thread
        here = False
    if here:
        _complete(future)
        return
    with contextlib.suppress(RuntimeError):  # the loop is closed: the host is going away
        loop.call_soon_threadsafe(_complete, future)


def _complete(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _line_of(step: RawStep, handle: int) -> int:
    """The key of the line a waiting step joins: the handle (an accumulator's takes, a
    queue's dequeues), or its complement (a queue's enqueues and closes, which wait
    for room, not for elements: in the dequeues' line they would hold them up)."""
    if step.queue_op is not None and not step.queue_op.startswith("QueueDequeue"):
        return ~handle
    return handle


def _handle_of_line(line: int) -> int:
    return line if line >= 0 else ~line


def _remaining(timeout: float | None, deadline: float | None) -> float | None:
    if deadline is None:
        return timeout
    left = max(0.0, deadline - time.monotonic())
    return left if timeout is None else min(timeout, left)


class ResourceHost:
    """A host as a Ray actor: its methods are what callers send.

    Args:
        task: the label of the TF1 task it serves (``"/job:ps/task:0"``).
        job: what the process that made it knows of it (see
            ``ClusterRuntime._job_args``).
        extension: what it runs beyond raw ops (a class, made here).
    """

    def __init__(
        self,
        task: str,
        job: dict[str, Any] | None = None,
        extension: type[TaskExtension] | None = None,
    ) -> None:
        logging.getLogger("tf_accum").setLevel(logging.ERROR)
        self._host = _Host(task, job, extension)

    async def ping(self) -> tuple[str, int, str]:
        """(instance, process id, node id)."""
        return await self._host.ping()

    async def counts(self) -> dict[str, int]:
        """Counts for tests and diagnostics: requests run, accumulators, variables, waiting takes."""
        return await self._host.counts()

    async def hold(self, caller: str) -> None:
        """Never returns while ``caller`` lives (its result is the caller's life token)."""
        await self._host.hold(caller)

    async def owner(self) -> tuple[int, str]:
        """(pid, node id) of the process that made this host."""
        return await self._host.owner()

    async def accumulator_report(self, handles: list[int]) -> dict[int, dict[str, Any]]:
        """Counters and contributions of accumulators (see ``_Host.accumulator_report``)."""
        return await self._host.accumulator_report(handles)

    async def join(
        self, task: str, spec: str, caller: str, where: str, life: list[Any]
    ) -> tuple[Any, ...]:
        """Let a process of task ``task`` use this host (see ``_Host.join``)."""
        return await self._host.join(task, spec, caller, where, life)

    async def job_over(self) -> str | None:
        """Why the job is over for this task; None while it is not (see ``_Host.job_over``)."""
        return await self._host.job_over()

    async def run(self, packed: Any, *pieces: bytes) -> Any:
        """Run a request (see ``_Host.run``)."""
        return await self._host.run(packed, *pieces)

    async def cancel(self, request: str) -> None:
        """Cancel a request's waiting takes (CancelledError; they consume nothing)."""
        await self._host.cancel(request)

    async def give_back(self, request: str) -> None:
        """See ``_Host.give_back``."""
        await self._host.give_back(request)

    async def reset(self) -> None:
        """Drop everything: waiting takes are cancelled, accumulators destroyed, variables gone."""
        await self._host.reset()

    async def close_session(self, session: str) -> None:
        """Free what ``session`` made privately here (shared state stays)."""
        await self._host.close_session(session)
