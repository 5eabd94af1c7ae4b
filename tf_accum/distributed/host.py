"""A host: accumulators, queues and variables in one Ray actor, shared by every process.

It holds them in an in-process resource table, so every op means exactly what
it means in one process, and every process sees the same accumulators and
queues (by shared_name). Two kinds of host share this class: a container's
host (``tfa.distributed``), which a process asks one operation at a time
(``OPERATIONS``: create, apply, take, ...), and a TF1 cluster task's host (a
ps task), to which a worker session sends, per ``Session.run``, the ops of
the run placed on that task as one request (a list of steps in dependency
order: see tf_accum.distributed.steps). A task's host gets from the graph
layer what it runs beyond raw ops (``TaskExtension``: variables by name,
training ops, graph kernels).

Ray runs each call on a thread of the actor's own; every call holds the
host's lock, but while it waits. A request stopped at a take that cannot
complete yet waits as a take attempt in that accumulator's own queue
(``Rounds.try_take``: first in, first served, as in-process), whose callback
wakes the request's thread; it goes on once the attempt is served, and gives it up
(consuming nothing) at its timeout or the run's deadline, when the request is
cancelled or its caller dies. A container's take waits the same way, and is
withdrawn at its timeout, at its caller's request or death. A request stopped
at a queue's dequeue or enqueue waits in a line of the host's for that queue. A
request stops at its first failing step and says which step failed and how.
Nothing raises to the caller: errors are returned as ``wire.Failure`` values.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import pickle
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NamedTuple, Protocol

import numpy as np

from tf_accum import errors, raw_ops
from tf_accum.accumulators import half_kernel, sparse_kernel
from tf_accum.accumulators.attempts import CANCELLED as CANCELLED_STAGE
from tf_accum.accumulators.attempts import (
    SERVED,
    Cancellation,
    TakeAttempt,
    cancelled_by,
    copy_error,
)
from tf_accum.accumulators.base import AccumulatorBase
from tf_accum.accumulators.rounds import CANCELLED_REASON, INTERRUPTED
from tf_accum.accumulators.rounds import TIMED_OUT as TIMED_OUT_REASON
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.distributed.bulk import Bulk, HostMappings, aligned, worth_sharing
from tf_accum.distributed.caller_liveness import CallerLiveness
from tf_accum.distributed.placement import MAX_CONCURRENCY, Placement
from tf_accum.distributed.small_messages import is_small, pack, split, unpack
from tf_accum.distributed.steps import MAKE, RawStep, decode, inputs_of
from tf_accum.distributed.wire import (
    CANCELLED,
    MISSING,
    RESTARTED,
    TIMED_OUT,
    WITHDRAWN,
    Done,
    Failure,
    JoinAnswer,
    Joined,
    Outcome,
    ReadsChanged,
    Request,
    SpecRefused,
    StepFailed,
    StepRefused,
    TaskTaken,
    answer_values,
)
from tf_accum.queues.fifo import FIFOQueue
from tf_accum.raw_ops.common import take_attempt
from tf_accum.raw_ops.queues import refused_before_waiting
from tf_accum.resources import using_table
from tf_accum.resources.local import LocalResourceTable

# Cancellations, give-backs and withdrawals that arrived before their request or
# take, which they may overtake (calls are not ordered): how many are remembered.
REMEMBERED_CANCELS = 10_000

# Decoded requests kept (by their pickled steps): a session sends the same few each run.
DECODED_REQUESTS = 1024

# A request's (or a take's) served takes are kept for a give-back (see _Host.give_back)
# when their outputs are smaller than this (a kept round holds its buffers until it is replaced;
# a dense round of this size or more recycles its buffer: see accumulators/dense.py).
GIVE_BACK_MAX_BYTES = 1 << 20
# Reads ahead held per session (one per plan and task whose runs read ahead; the
# oldest go first).
READS_AHEAD_HELD = 16

# Calls that may wait on a host at once (takes, queue ops, and one hold per
# process using the host): each holds one of the actor's MAX_CONCURRENCY
# threads, and the rest are left for the calls that end the waits.
MOST_WAITING = MAX_CONCURRENCY - 256

CLOSED_MESSAGE = "TakeGrad operation was cancelled"

# What a process may ask of a host, one operation at a time (see ``ResourceHost.run``):
# each is a method of ``_Host``. A container's accumulators are made, used and destroyed
# by these; a TF1 task's host runs requests, and is asked the last few.
OPERATIONS = frozenset(
    {
        "create",
        "attach_buffer",
        "release_buffer",
        "apply_dense",
        "apply_sparse",
        "take",
        "withdraw",
        "give_back",
        "num_accumulated",
        "set_global_step",
        "destroy",
        "cancel",
        "reset",
        "close_session",
        "accumulator_report",
        "job_over",
    }
)
# Operations that only read an accumulator (instance, handle): its method of that name.
READS = frozenset({"num_accumulated", "global_step", "stats", "num_waiting"})
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

    __slots__ = ("event", "failure", "added")

    def __init__(self) -> None:
        self.event = threading.Event()  # set to make it look again
        # set when something else ends the wait with an error (a queue closed with
        # cancel_pending_enqueues fails the enqueues waiting for room)
        self.failure: Failure | None = None
        # an enqueue_many larger than its queue's room: the elements added so far
        self.added = 0

    def wake(self, _error: errors.OpError | None = None) -> None:
        """Make it look again (any thread; a cancellation's callback too)."""
        self.event.set()


class _Take:
    """A take waiting as an attempt in its accumulator's queue: the event the
    attempt's callback sets, the request's list of served takes, and the
    failure it ends with when the host withdraws it (a container's take)."""

    __slots__ = ("accumulator", "attempt", "event", "served", "withdrawn")

    def __init__(self, served: list[_Served] | None) -> None:
        self.event = threading.Event()
        self.accumulator: AccumulatorBase[Any] | None = None
        self.attempt: TakeAttempt[Any] | None = None
        self.served = served
        self.withdrawn: Failure | None = None


# A take a request was served: its accumulator, its attempt, the bytes of its outputs.
_Served = tuple[AccumulatorBase[Any], TakeAttempt[Any], int]


class _ReadsAhead(NamedTuple):
    """Reads run ahead for a session's next request: the steps and what they read."""

    steps: list[Any]
    outputs: list[tuple[Any, ...]]


class _Pending(NamedTuple):
    """A request stopped at a step that would wait: the outputs of the steps before
    it, and the take waiting as an attempt (None: a queue op, which waits in a line)."""

    outputs: list[tuple[Any, ...]]
    take: _Take | None


class _Host:
    """The state and work of a ``ResourceHost`` (kept off the actor class, whose every
    method Ray wraps for tracing).

    Every call holds ``lock`` (``ResourceHost`` takes it), but while it waits
    (``_wait``): each is atomic with respect to the others between its waits.

    Calls name what they act on with the host's ``instance``, which changes when
    the actor restarts: a caller that linked to an earlier incarnation is told
    its state is lost (RESTARTED) rather than finding nothing, or a namesake.
    """

    def __init__(
        self,
        name: str,
        job: dict[str, Any] | None = None,
        extension: type[TaskExtension] | None = None,
        placement: Placement | None = None,
    ) -> None:
        self._task = name  # the container, or the task's label
        self._placement = placement
        self._mappings = HostMappings()
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
        self.lock = threading.Lock()
        self._waits = 0  # calls waiting now (see MOST_WAITING)
        # (session, constructor op name) -> handle, as a kernel caches its resource
        self._made: dict[tuple[str, str], int] = {}
        # per session (a container's caller: its own), the handles it made privately
        self._private: dict[str, set[int]] = collections.defaultdict(set)
        self._sessions_of: dict[str, set[str]] = collections.defaultdict(set)
        self._running: dict[str, Cancellation] = {}
        # a container's takes waiting, by attempt id
        self._waiting_takes: dict[str, _Take] = {}
        self._callers: dict[str, str] = {}  # request or take waiting -> caller
        # requests and takes stopped before they came (calls are not ordered): how
        # (the reason their takes count, and whether rounds served go back)
        self._early_cancels: collections.OrderedDict[str, tuple[str, bool]] = (
            collections.OrderedDict()
        )
        self._lives = CallerLiveness(self._caller_died, self.lock)
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
        # requests running whose callers gave them up: their takes go back once they
        # have run
        self._abandoned: set[str] = set()
        # per session, its reads ahead the host holds by the request that read them:
        # (the read steps, the values they read), newest last. Values are replaced,
        # never changed in place, and are held here: a variable still holding the very
        # object read holds what was read.
        self._reads_ahead: dict[str, collections.OrderedDict[str, _ReadsAhead]] = {}
        self.requests = 0
        self.reads_changed = 0

    def ping(self) -> tuple[str, int, str]:
        """(instance, process id, node id)."""
        import ray

        return self._instance, os.getpid(), ray.get_runtime_context().get_node_id()

    def placement(self) -> Placement | None:
        """The placement a container's host was made with (see ``tfa.distributed.place``)."""
        return self._placement

    def counts(self) -> dict[str, int]:
        """Counts for tests and diagnostics: requests run, accumulators (and queues),
        variables, waiting takes and queue ops, callers' buffers mapped, reads ahead
        held, and requests refused because reads ahead had changed."""
        handles = self._table.live_handles()
        waiting = self._takes_waiting + sum(len(queue) for queue in self._queues.values())
        return {
            "requests": self.requests,
            "accumulators": len(handles),
            **(self._extension.counts() if self._extension is not None else {}),
            "waiting": waiting,
            "running": len(self._running) + len(self._waiting_takes),
            "early_cancels": len(self._early_cancels),
            "buffers": self._mappings.count(),
            "reads_ahead": sum(len(held) for held in self._reads_ahead.values()),
            "reads_changed": self.reads_changed,
        }

    def owner(self) -> tuple[int, str]:
        """(pid, node id) of the process that made this host (it ends with that process)."""
        return self._owner

    def accumulator_report(self, handles: list[int]) -> dict[int, dict[str, Any]]:
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

    def join(self, task: str, spec: str, caller: str, where: str, life: list[Any]) -> JoinAnswer:
        """Let ``caller``, the process of task ``task`` (a label) with ClusterSpec
        ``spec`` (``cluster_job.spec_text``), use this host.

        Returns Joined; SpecRefused when the ClusterSpecs cannot be one job's;
        TaskTaken when another live process serves ``task``
        (a process that died is noticed within the extension's ``handover``
        seconds: its successor waits for that).
        """
        extension = self._extension
        assert extension is not None  # only cluster processes join, to task hosts
        if self._spec is not None:
            reason = extension.disagreement(self._spec, spec, self._task)
            if reason is not None:
                return SpecRefused(reason, self._spec)
        self._lives.watch(caller, life)
        give_up = time.monotonic() + extension.handover
        while True:
            holder = self._holders.get(task)
            if holder is None or holder[0] == caller:
                break
            if time.monotonic() >= give_up:
                return TaskTaken(holder[1])
            self._wait(None, 0.1)  # a dead holder is dropped by _caller_died
        self._holders[task] = (caller, where)
        self._joined.add(task)
        return Joined(*self.ping(), *self._owner)

    def job_over(self) -> str | None:
        """Why the job is over for this task (``cluster_job.job_over``); None while it is not."""
        if self._extension is None:
            return None
        return self._extension.job_over(self._spec, self._joined, set(self._holders))

    # --- callers' lives -----------------------------------------------------------

    def hold(self, caller: str) -> None:
        """Never returns while ``caller`` lives (its result is the caller's life token)."""
        held = self._lives.hold(caller)
        while not held.is_set():
            self._wait(held, None)

    def _wait(self, event: threading.Event | None, timeout: float | None) -> bool:
        """Let go of the lock until ``event`` is set (None: none) or ``timeout``
        seconds pass (None: no limit); whether it was set."""
        self._waits += 1
        self.lock.release()
        try:
            if event is None:
                time.sleep(timeout or 0.0)
                return False
            return event.wait(timeout)
        finally:
            self.lock.acquire()
            self._waits -= 1

    def _unlocked(self, work: Callable[[], Any]) -> None:
        """Run ``work`` without the lock (slow work that needs no state of the host)."""
        self.lock.release()
        try:
            work()
        finally:
            self.lock.acquire()

    def _room_to_wait(self) -> Failure | None:
        """None while another call may wait here; else the failure that refuses it.

        Each waiting call holds one of the actor's threads (MAX_CONCURRENCY), as
        each caller's hold does: past MOST_WAITING of them, a call that would wait
        is refused, so that the calls that would end the waits still find threads.
        """
        if self._waits < MOST_WAITING:
            return None
        return Failure(
            "ResourceExhaustedError",
            f"{self._waits} calls already wait on host {self._task!r} (one per "
            f"process using it, besides its takes and queue ops), the most it lets "
            f"wait at once ({MOST_WAITING}); wait on fewer takes and queue ops at a time",
        )

    def _caller_died(self, caller: str) -> None:
        """Cancel the dead process's requests and takes (they consume nothing); end its
        sessions (a container's private accumulators are its own session's)."""
        for request, owner in list(self._callers.items()):
            if owner == caller:
                self._stop(request, INTERRUPTED, gives_back=False)
        for session in self._sessions_of.pop(caller, set()):
            self._end_session(session)
        for task, holder in list(self._holders.items()):
            if holder[0] == caller:
                del self._holders[task]
        self._delivered.pop(caller, None)
        self._mappings.release_caller(caller)
        self._lives.forget(caller)

    # --- requests -------------------------------------------------------------------

    def run(self, message: Request) -> Outcome:
        """Run a request's steps in order: Done, or the first failing step's StepFailed
        or StepRefused (``ResourceHost.run`` packs the answer).

        A step the request's steps leave unanswered answers nothing but, for a
        take, its accumulator's stale count and global step.
        """
        instance, session, caller, life, request, blob, values, remaining = message[:8]
        if instance != self._instance:
            return StepFailed(0, Failure(RESTARTED))
        if message.reads_from is not None and not self._reads_still_hold(
            session, message.reads_from
        ):
            self.reads_changed += 1
            return ReadsChanged(message.reads_from)
        steps, unanswered, gives_back = self._steps(blob)
        room = message.room
        if room is not None:
            values = [self._mappings.array(v) if type(v) is Bulk else v for v in values]
        self.requests += 1
        self._lives.watch(caller, life)
        self._sessions_of[caller].add(session)
        cancellation = Cancellation()
        early = self._early_cancels.pop(request, None)
        if early is not None:
            if early[1]:
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
                    outcome = self._wait_and_go_on(
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
        outcome = _answered(outcome, steps, unanswered)
        if message.read_ahead is not None and type(outcome) is Done:
            outcome = self._read_ahead(session, request, message.read_ahead, outcome)
        if room is not None and type(outcome) is Done:
            outcome = self._into_room(outcome, room)
        return outcome

    def _into_room(self, outcome: Done, room: Bulk) -> Done:
        """``outcome`` with its large arrays written into the caller's buffer from the
        room's offset on (as many as fit), their descriptors in their places."""
        offset = room.offset

        def moved(outputs: tuple[Any, ...]) -> tuple[Any, ...]:
            nonlocal offset
            found = []
            for value in outputs:
                given = worth_sharing(value) and self._mappings.give(
                    value, replace(room, offset=offset)
                )
                if given:
                    offset = aligned(offset + value.nbytes)
                    value = given
                found.append(value)
            return tuple(found)

        outputs = [moved(outputs) for outputs in outcome.outputs]
        ahead = outcome.read_ahead
        return Done(outputs, None if ahead is None else [moved(outputs) for outputs in ahead])

    def _read_ahead(self, session: str, request: str, blob: bytes, outcome: Done) -> Done:
        """``outcome`` with the outputs of the read steps ``blob`` (held for the session's
        next request, see wire.Request); as it is if they fail (the next run reads)."""
        steps, _, _ = self._steps(blob)
        read = self._execute(session, steps, [], None, Cancellation())
        if type(read) is not Done:
            return outcome
        held = self._reads_ahead.setdefault(session, collections.OrderedDict())
        held[request] = _ReadsAhead(steps, read.outputs)
        while len(held) > READS_AHEAD_HELD:
            held.popitem(last=False)
        return Done(outcome.outputs, read.outputs)

    def _reads_still_hold(self, session: str, request: str) -> bool:
        """Whether the reads ahead of ``request`` read what the variables hold now (they
        are let go either way)."""
        held = self._reads_ahead.get(session)
        found = None if held is None else held.pop(request, None)
        if found is None:
            return False
        now = self._execute(session, found.steps, [], None, Cancellation())
        return type(now) is Done and all(
            a is b
            for before, after in zip(found.outputs, now.outputs, strict=True)
            for a, b in zip(before, after, strict=True)
        )

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

    def _wait_and_go_on(
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
        outputs, take = pending
        while True:
            index = len(outputs)
            step = steps[index]
            if take is not None:
                failed = self._wait_for_take(take, step, outputs, deadline, index)
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
            waiter = _Waiter()
            queue = self._queues.setdefault(handle, collections.deque())
            queue.append(waiter)
            key = cancellation.register(waiter.wake)
            try:
                while True:
                    waiter.event.clear()  # a wake from here on makes it look again
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
                    refused = self._room_to_wait()
                    if refused is not None:
                        return StepFailed(index, refused)
                    if not self._wait(waiter.event, left):
                        return StepFailed(index, TIMED_OUT)
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
            # the lock held since the check: the op completes now
            ran = self._execute(
                session, steps, slots, deadline, cancellation, outputs, checked=not enqueued
            )
            self._wake()  # the next in line may go now
            if not isinstance(ran, _Pending):
                return ran
            take = ran.take

    def _await_take(self, take: _Take, timeout: float | None) -> Failure | None:
        """Wait until the attempt of ``take`` is served or cancelled; out of time,
        withdraw it. The failure it ended with here (TIMED_OUT, or what the host
        withdrew it with), else None: collecting the attempt says the rest."""
        accumulator, attempt = take.accumulator, take.attempt
        assert accumulator is not None and attempt is not None
        refused = self._room_to_wait()
        if refused is not None:
            accumulator.cancel(attempt, CANCELLED_REASON)  # consumes nothing
            return refused
        self._takes_waiting += 1
        try:
            if not self._wait(take.event, timeout) and not attempt.done:
                accumulator.cancel(attempt, TIMED_OUT_REASON)  # consumes nothing
                return TIMED_OUT
        except BaseException:
            accumulator.cancel(attempt, INTERRUPTED)  # a round served goes back
            raise
        finally:
            self._takes_waiting -= 1
        return take.withdrawn

    def _wait_for_take(
        self,
        take: _Take,
        step: RawStep,
        outputs: list[tuple[Any, ...]],
        deadline: float | None,
        index: int,
    ) -> StepFailed | None:
        """Wait for the attempt of ``take`` (step ``index``) and add the take's outputs
        (its timeout is the step's, within the run's deadline). None once the outputs
        are in, else the request's failed outcome."""
        accumulator, attempt = take.accumulator, take.attempt
        assert accumulator is not None and attempt is not None
        failure = self._await_take(take, _remaining(step.attrs["timeout"], deadline))
        if failure is not None:
            return StepFailed(index, failure)
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

    def cancel(self, request: str) -> None:
        """Cancel a request's waiting takes (CancelledError; they consume nothing)."""
        if not self._stop(request, CANCELLED_REASON, gives_back=False):
            self._remember(request, CANCELLED_REASON, gives_back=False)

    def withdraw(self, instance: str, attempt: str, reason: str) -> None:
        """Withdraw a container's take ``attempt`` (its caller gave up): it consumes
        nothing, and ends with WITHDRAWN; a completed one keeps its round (see
        give_back). ``reason``: "cancelled" (a run's deadline, a closing session) or
        "interrupted" (the caller was), what the accumulator counts it as."""
        if instance == self._instance and not self._stop(attempt, reason, gives_back=True):
            self._remember(attempt, reason, gives_back=True)

    def give_back(self, request: str) -> None:
        """The caller failed (Ctrl-C, say) and will not read the answer of ``request``
        (a request whose takes only its run fetched, or a container's take): the
        rounds go back (see ``Rounds.cancel``), counted as interrupted. One still
        waiting is cancelled, and what it was served goes back once it stops; one
        answered goes back if it is its caller's latest kept (see _keep_for_give_back);
        one not come yet is cancelled when it comes, and gives back what it is served."""
        if self._stop(request, INTERRUPTED, gives_back=True):
            return
        for caller, (answered, served) in list(self._delivered.items()):
            if answered == request:
                del self._delivered[caller]
                for accumulator, attempt, _ in served:
                    accumulator.cancel(attempt, INTERRUPTED)
                return
        self._remember(request, INTERRUPTED, gives_back=True)

    def _stop(self, request: str, reason: str, gives_back: bool) -> bool:
        """Stop ``request`` (a request or a container's take) if it waits here: a
        take is withdrawn (counted as ``reason``), a request cancelled (its waiting
        take counted as cancelled), and with ``gives_back`` what it was served goes
        back once it stops. Whether it was waiting."""
        take = self._waiting_takes.get(request)
        if take is not None:
            _withdraw(take, reason)
            return True
        found = self._running.get(request)
        if found is None:
            return False
        if gives_back:
            self._abandoned.add(request)
        found.cancel(errors.CancelledError(None, None, CLOSED_MESSAGE))
        return True

    def _remember(self, request: str, reason: str, gives_back: bool) -> None:
        """Stop ``request`` when it comes (a cancellation may overtake it)."""
        before = self._early_cancels.pop(request, None)
        self._early_cancels[request] = (reason, gives_back or (before is not None and before[1]))
        if len(self._early_cancels) > REMEMBERED_CANCELS:
            self._early_cancels.popitem(last=False)

    # --- a container's operations (tfa.distributed) ----------------------------------

    def operation(self, request: tuple[Any, ...]) -> Any:
        """Run one operation: ``request`` is (operation name, *its arguments).

        Names outside ``OPERATIONS`` are refused as a Failure.
        """
        operation = request[0]
        if operation in READS:
            found = self._accumulator(*request[1:])
            if type(found) is Failure:
                return found
            try:
                return getattr(found, operation)()
            except errors.OpError as error:
                return Failure.of(error)
        if operation not in OPERATIONS:
            return Failure("InternalError", f"no accumulator host operation {operation!r}")
        answer: Any = getattr(self, operation)(*request[1:])
        return answer

    def _accumulator(self, instance: str, handle: int) -> Any:
        """The accumulator ``handle`` names, or the Failure that says why there is none."""
        if instance != self._instance:
            return Failure(RESTARTED)
        try:
            return self._table.lookup(handle)
        except errors.OpError:
            return Failure(MISSING)

    def create(
        self,
        shared_name: str,
        private_name: str,
        spec: AccumulatorSpec,
        caller: str,
        life: list[Any] | None,
    ) -> tuple[str, int] | Failure:
        """Make an accumulator, or find the live one shared under ``shared_name``; a
        private one (named ``private_name``) is its caller's, destroyed when it dies.

        Returns (instance, handle).
        """
        self._lives.watch(caller, life)
        try:
            handle = self._table.create(
                self._task, shared_name, private_name, spec, name_given=True
            )
        except errors.OpError as error:
            return Failure.of(error)
        if not shared_name:
            self._sessions_of[caller].add(caller)
            self._private[caller].add(handle)
        return self._instance, handle

    def attach_buffer(self, bulk: Bulk) -> Failure | None:
        """Map a caller's shared-memory buffer (see tf_accum.distributed.bulk)."""
        try:
            self._mappings.attach(bulk)
        except (OSError, ValueError) as error:
            return Failure("UnavailableError", f"cannot map the caller's buffer: {error}")
        return None

    def release_buffer(self, name: str) -> None:
        self._mappings.release(name)

    def apply_dense(
        self, instance: str, handle: int, local_step: int, gradient: Any
    ) -> Failure | None:
        if half_kernel.load_pending(np.dtype(gradient.dtype), math.prod(gradient.shape)):
            # Compiling the float16/bfloat16 loops is slow: without the lock that
            # every call of the host needs.
            self._unlocked(half_kernel.load)
        accumulator = self._accumulator(instance, handle)
        if type(accumulator) is Failure:
            return accumulator
        array = self._mappings.array(gradient) if type(gradient) is Bulk else gradient
        try:
            accumulator.apply_dense(local_step, array)
        except errors.OpError as error:
            return Failure.of(error)
        return None

    def apply_sparse(
        self,
        instance: str,
        handle: int,
        local_step: int,
        indices: Any,
        values: Any,
        gradient_shape: Any,
    ) -> Failure | None:
        dtype = getattr(values, "dtype", None)
        if dtype is not None and sparse_kernel.load_pending(np.dtype(dtype), values.size):
            # the compiled row adds: without the lock, as for apply_dense
            self._unlocked(sparse_kernel.load)
        accumulator = self._accumulator(instance, handle)
        if type(accumulator) is Failure:
            return accumulator
        try:
            accumulator.apply_sparse(local_step, indices, values, gradient_shape)
        except errors.OpError as error:
            return Failure.of(error)
        return None

    def take(
        self,
        instance: str,
        handle: int,
        num_required: int,
        timeout: float | None,
        attempt_id: str,
        caller: str,
        life: list[Any] | None,
        bulk: Bulk | None = None,
        cancelled: bool = False,
    ) -> Any:
        """The round's result once ``num_required`` gradients are in and the take is first.

        It waits as an attempt in the accumulator's queue, as a request's take does.
        A timed-out take is withdrawn (it consumes nothing), as is one whose caller
        asked (``withdraw``) or died: WITHDRAWN. With ``bulk``, a large result is
        written into the caller's buffer and its descriptor returned.
        ``cancelled``: the caller's run is cancelled already, so the take only
        completes if it can at once, and is otherwise refused without queueing.
        """
        accumulator = self._accumulator(instance, handle)
        if type(accumulator) is Failure:
            return accumulator
        self._lives.watch(caller, life)
        take = _Take(None)
        try:
            attempt = accumulator.try_take(num_required, take.event.set)
        except errors.OpError as error:
            return Failure.of(error)
        early = self._early_cancels.pop(attempt_id, None)
        if early is not None:
            # withdrawn before it came: a round served at once goes back
            accumulator.cancel(attempt, early[0])
            return Failure(WITHDRAWN)
        if not attempt.done:
            if cancelled or timeout == 0:
                accumulator.cancel(attempt, CANCELLED_REASON if cancelled else TIMED_OUT_REASON)
                return Failure(WITHDRAWN) if cancelled else TIMED_OUT
            take.accumulator, take.attempt = accumulator, attempt
            self._waiting_takes[attempt_id] = take
            self._callers[attempt_id] = caller
            try:
                failure = self._await_take(
                    take, None if timeout is None or math.isinf(timeout) else timeout
                )
            finally:
                del self._waiting_takes[attempt_id]
                del self._callers[attempt_id]
            if failure is not None:
                return failure
        if attempt.stage is not SERVED:
            return CANCELLED if attempt.stage is CANCELLED_STAGE else Failure(WITHDRAWN)
        try:
            outcome = accumulator.collect(attempt)
        except errors.OpError as error:
            return Failure.of(error)
        self._keep_for_give_back(caller, attempt_id, [(accumulator, attempt, _nbytes(outcome))])
        if bulk is not None and isinstance(outcome, np.ndarray):
            return self._mappings.give(outcome, bulk) or outcome
        return outcome

    def set_global_step(self, instance: str, handle: int, step: int) -> int | Failure:
        """Set the step; returns the previous one (the caller logs a lowered step)."""
        accumulator = self._accumulator(instance, handle)
        if type(accumulator) is Failure:
            return accumulator
        previous: int = accumulator.global_step()
        accumulator.set_global_step(step)
        return previous

    def destroy(self, instance: str, handle: int) -> Failure | None:
        """Destroy: waiting takes, from every process, fail with CancelledError."""
        found = self._accumulator(instance, handle)
        if type(found) is Failure:
            return found
        self._table.destroy(handle, ignore_lookup_error=True)
        for handles in self._private.values():
            handles.discard(handle)
        return None

    # --- everything -------------------------------------------------------------------
    def reset(self) -> None:
        """Drop everything: waiting takes are cancelled, accumulators destroyed, variables gone."""
        for request in list(self._running):
            self._stop(request, CANCELLED_REASON, gives_back=False)
        self._made.clear()
        self._private.clear()
        self._contributions.clear()
        self._delivered.clear()
        for handle in self._table.live_handles():
            self._table.destroy(handle, ignore_lookup_error=True)
        if self._extension is not None:
            self._extension.clear()
        self._wake_all()

    def close_session(self, session: str) -> None:
        """Free what ``session`` made privately here (shared state stays)."""
        for sessions in self._sessions_of.values():
            sessions.discard(session)
        self._end_session(session)

    def _end_session(self, session: str) -> None:
        self._reads_ahead.pop(session, None)
        for key in [k for k in self._made if k[0] == session]:
            del self._made[key]
        private = self._private.pop(session, set())
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
        take = _Take(served)
        cancelled = cancellation.cancelled
        accumulator, attempt = take_attempt(
            step.op_type,
            take.event.set,
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
            arguments["timeout"] = 0.0  # under the host's lock, a queue op must not wait
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
        found = self._made.get((session, op_name))
        if found is not None:
            return found
        handle = int(getattr(raw_ops, op_type)(**attrs, name=op_name))
        self._made[(session, op_name)] = handle
        if not attrs.get("shared_name"):
            self._private[session].add(handle)
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


def _nbytes(outputs: Any) -> int:
    """The bytes of a take's outputs (an array, or a tuple of them and numbers)."""
    if isinstance(outputs, np.ndarray):
        return outputs.nbytes
    return sum(int(getattr(value, "nbytes", 0)) for value in outputs)


def _withdraw(take: _Take, reason: str) -> None:
    """Give up a container's take still waiting (a served one keeps its round): it
    ends WITHDRAWN, and whoever was behind it may go."""
    attempt, accumulator = take.attempt, take.accumulator
    assert attempt is not None and accumulator is not None
    if attempt.done or take.withdrawn is not None:
        return
    accumulator.cancel(attempt, reason)
    take.withdrawn = Failure(WITHDRAWN)
    take.event.set()


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
        name: the container whose accumulators it holds (with ``placement``, how
            the container was placed: see ``tfa.distributed.place``), or the
            label of the TF1 task it serves (``"/job:ps/task:0"``).
        job: a task host's: what the process that made it knows of it (see
            ``ClusterRuntime._job_args``).
        extension: a task host's: what it runs beyond raw ops (a class, made here).
        placement: a container host's placement (None: not placed).
    """

    def __init__(
        self,
        name: str,
        job: dict[str, Any] | None = None,
        extension: type[TaskExtension] | None = None,
        placement: Placement | None = None,
    ) -> None:
        # The in-process accumulators log a lowered global step; the caller's
        # process logs it where the user sees it.
        logging.getLogger("tf_accum").setLevel(logging.ERROR)
        self._host = _Host(name, job, extension, placement)

    def placement(self) -> Placement | None:
        """The placement a container's host was made with (see ``tfa.distributed.place``)."""
        with self._host.lock:
            return self._host.placement()

    def ping(self) -> tuple[str, int, str]:
        """(instance, process id, node id)."""
        with self._host.lock:
            return self._host.ping()

    def counts(self) -> dict[str, int]:
        """Counts for tests and diagnostics: requests run, accumulators, variables, waiting takes."""
        with self._host.lock:
            return self._host.counts()

    def hold(self, caller: str) -> None:
        """Never returns while ``caller`` lives (its result is the caller's life token)."""
        with self._host.lock:
            self._host.hold(caller)

    def owner(self) -> tuple[int, str]:
        """(pid, node id) of the process that made this host."""
        with self._host.lock:
            return self._host.owner()

    def join(self, task: str, spec: str, caller: str, where: str, life: list[Any]) -> JoinAnswer:
        """Let a process of task ``task`` use this host (see ``_Host.join``)."""
        with self._host.lock:
            return self._host.join(task, spec, caller, where, life)

    def run(self, packed: Any, *pieces: bytes) -> Any:
        """Run one operation of a container's (a tuple: its name, then its arguments,
        see ``_Host.operation``), or a request (a ``wire.Request``, see ``_Host.run``).

        Either comes as one argument (Ray serialises each argument of a call on
        its own), or packed by ``small_messages.pack`` (split into ``pieces``
        after the first, when large): see tf_accum.distributed.small_messages.
        The answer is packed the same way, without the lock.
        """
        message = unpack(packed, *pieces)
        host = self._host
        if type(message) is tuple:
            with host.lock:
                answer = host.operation(message)
            if type(answer) is np.ndarray and is_small((answer,)):
                return pack(answer)
            return answer
        with host.lock:
            outcome = host.run(message)
        if message.answer_pieces > 1:
            return split(outcome, message.answer_pieces)
        if type(outcome) is Done and is_small(answer_values(outcome)):
            return pack(outcome)
        return outcome


def remote_class() -> Any:
    """``ResourceHost`` as a Ray actor class (made once, on first use: Ray is imported lazily)."""
    global _remote_class
    with _remote_class_lock:
        if _remote_class is None:
            import ray

            _remote_class = ray.remote(ResourceHost)
        return _remote_class


_remote_class: Any = None
_remote_class_lock = threading.Lock()
