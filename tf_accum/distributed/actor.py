"""The host: every accumulator of one container, inside one async Ray actor.

Each accumulator is an in-process one (tf_accum.accumulators), so merging,
staleness, steps, results and the queue of takes are exactly the in-process
code. A take that cannot complete at once is a take attempt queued in the
accumulator (``try_take``), whose callback completes an asyncio future: the
event loop never blocks, and withdrawing it (a timeout, a caller's request or
death) is the accumulator's ``cancel``.

Every method runs on the actor's single event-loop thread, so each one is
atomic with respect to the others: that is the lock.

Nothing here raises to the caller: errors are returned as ``Failure`` values.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import math
import os
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators import half_kernel, sparse_kernel
from tf_accum.accumulators.attempts import CANCELLED as CANCELLED_STAGE
from tf_accum.accumulators.attempts import SERVED, TakeAttempt
from tf_accum.accumulators.base import AccumulatorBase
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.distributed.bulk import Bulk, HostMappings
from tf_accum.distributed.caller_liveness import CallerLiveness
from tf_accum.distributed.placement import Placement
from tf_accum.distributed.wire import CANCELLED, MISSING, RESTARTED, TIMED_OUT, WITHDRAWN, Failure
from tf_accum.resources.errors import shared_spec_conflict
from tf_accum.resources.local import new_accumulator

# How many withdrawals of takes not (or no longer) queued are remembered: a
# withdrawal may overtake its take (calls from one caller are not ordered).
REMEMBERED_WITHDRAWALS = 10_000

# A delivered round smaller than this is remembered until its caller's next
# take, so that a caller interrupted as the result came can give it back.
GIVE_BACK_MAX_BYTES = 1 << 20

# Why a waiting take left the queue without its round, as stats() counts it.
TIMED_OUT_REASON, CANCELLED_REASON, INTERRUPTED_REASON = "timed_out", "cancelled", "interrupted"
WITHDRAWAL_REASONS = (TIMED_OUT_REASON, CANCELLED_REASON, INTERRUPTED_REASON)

# What a caller may ask of a host through ``AccumulatorHost.run``.
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
        "global_step",
        "stats",
        "num_waiting",
        "destroy",
    }
)


class _Waiter:
    """A take waiting on the event loop: its attempt in the accumulator's queue,
    the future its callback completes, and what it ends with if withdrawn."""

    __slots__ = ("attempt", "future", "caller", "attempt_id", "timer", "outcome")

    def __init__(
        self, attempt: TakeAttempt[Any], future: asyncio.Future[None], caller: str, attempt_id: str
    ) -> None:
        self.attempt = attempt
        self.future = future
        self.caller = caller
        self.attempt_id = attempt_id
        self.timer: asyncio.TimerHandle | None = None
        self.outcome: Any = None  # set when withdrawn here


class _Entry:
    """One accumulator (its takes wait in its own queue of attempts)."""

    __slots__ = ("accumulator", "shared_name", "owner", "withdrawn")

    def __init__(
        self, accumulator: AccumulatorBase[Any], shared_name: str, owner: str | None
    ) -> None:
        self.accumulator = accumulator
        self.shared_name = shared_name
        self.owner = owner  # the creating process of a private accumulator
        # takes withdrawn before they reached the host, by reason
        self.withdrawn = dict.fromkeys(WITHDRAWAL_REASONS, 0)


class AccumulatorHost:
    """The accumulators of one container (made a Ray actor by ``tf_accum.distributed``).

    Calls name an accumulator by (instance, entry id): ``instance`` changes
    when the actor restarts, so a handle made before a restart is told its
    accumulator is lost rather than finding nothing, or a namesake.

    Every host of a container records the placement the container was made
    with (None: not placed, one host where Ray puts it); the first host's
    record is the one processes compare with theirs. A restarted host is
    made with the same arguments, so the record outlives it.
    """

    def __init__(self, container: str, placement: Placement | None = None) -> None:
        self._placement = placement
        # The in-process accumulators log a lowered global step; the caller's
        # process logs it where the user sees it.
        logging.getLogger("tf_accum").setLevel(logging.ERROR)
        self._container = container
        self._instance = uuid.uuid4().hex
        self._ids = itertools.count(1)
        self._entries: dict[int, _Entry] = {}
        self._shared: dict[str, int] = {}
        self._attempts: dict[str, tuple[_Entry, _Waiter]] = {}
        self._early_withdrawals: collections.OrderedDict[str, str] = collections.OrderedDict()
        # per caller, its latest delivered round that could still go back:
        # (attempt id, entry, attempt)
        self._delivered: dict[str, tuple[str, _Entry, TakeAttempt[Any]]] = {}
        self._caller_liveness = CallerLiveness(self._caller_died)
        self._mappings = HostMappings()

    async def placement(self) -> Placement | None:
        """The placement this host's container was made with (see ``tfa.distributed.place``)."""
        return self._placement

    # --- the one entry point for operations ---------------------------------------

    async def run(self, request: tuple[Any, ...]) -> Any:
        """Run one operation: ``request`` is (operation name, *its arguments).

        Ray serialises each argument of a call on its own, so one packed
        argument makes a tiny apply cheaper than four separate ones. Names
        outside ``OPERATIONS`` are refused as a Failure.
        """
        operation = request[0]
        if operation not in OPERATIONS:
            return Failure("InternalError", f"no accumulator host operation {operation!r}")
        return await getattr(self, operation)(*request[1:])

    # --- liveness of callers ---------------------------------------------------

    async def ping(self) -> tuple[str, int, str]:
        """(instance, process id, node id): the caller learns the incarnation it talks to."""
        import ray

        return self._instance, os.getpid(), ray.get_runtime_context().get_node_id()

    async def counts(self) -> tuple[int, int]:
        """(accumulators held, callers' buffers mapped): for tests and diagnostics."""
        return len(self._entries), self._mappings.count()

    async def hold(self, caller: str) -> None:
        """Never returns while ``caller`` lives: its result is the caller's life token.

        The caller owns this call's result; once the caller dies, awaiting the
        result raises OwnerDiedError, which is how the host learns of it.
        """
        await self._caller_liveness.hold(caller)

    def _caller_died(self, caller: str) -> None:
        """Withdraw the dead process's waiting takes; destroy its private accumulators."""
        for entry, waiter in list(self._attempts.values()):
            if waiter.caller == caller:
                self._withdraw(entry, waiter, Failure(WITHDRAWN), INTERRUPTED_REASON)
        for entry_id, entry in list(self._entries.items()):
            if entry.owner == caller:
                self._destroy(entry_id)
        self._delivered.pop(caller, None)
        self._mappings.release_caller(caller)
        self._caller_liveness.forget(caller)

    # --- operations -------------------------------------------------------------

    def _entry(self, instance: str, entry_id: int) -> _Entry | Failure:
        if instance != self._instance:
            return Failure(RESTARTED)
        entry = self._entries.get(entry_id)
        return Failure(MISSING) if entry is None else entry

    async def create(
        self,
        shared_name: str,
        private_name: str,
        spec: AccumulatorSpec,
        caller: str,
        life: list[Any] | None,
    ) -> tuple[str, int] | Failure:
        """Make an accumulator, or find the live one shared under ``shared_name``.

        Returns (instance, entry id).
        """
        self._caller_liveness.watch(caller, life)
        if shared_name:
            found = self._shared.get(shared_name)
            if found is not None:
                have = self._entries[found].accumulator.spec
                if have != spec:
                    label = f"{self._container}/{shared_name}"
                    return Failure.of(shared_spec_conflict(label, have, spec))
                return self._instance, found
        entry_id = next(self._ids)
        name = shared_name or private_name
        accumulator = new_accumulator(spec, f"{self._container}/{name}")
        self._entries[entry_id] = _Entry(accumulator, shared_name, None if shared_name else caller)
        if shared_name:
            self._shared[shared_name] = entry_id
        return self._instance, entry_id

    async def attach_buffer(self, bulk: Bulk) -> Failure | None:
        """Map a caller's shared-memory buffer (see tf_accum.distributed.bulk)."""
        try:
            self._mappings.attach(bulk)
        except (OSError, ValueError) as error:
            return Failure("UnavailableError", f"cannot map the caller's buffer: {error}")
        return None

    async def release_buffer(self, name: str) -> None:
        self._mappings.release(name)

    async def apply_dense(
        self, instance: str, entry_id: int, local_step: int, gradient: Any
    ) -> Failure | None:
        size = math.prod(gradient.shape)
        if half_kernel.load_pending(np.dtype(gradient.dtype), size):
            # Compiling the float16/bfloat16 loops is slow: on a thread of
            # its own, not on the event loop that serves every accumulator of
            # the container.
            await asyncio.get_running_loop().run_in_executor(None, half_kernel.load)

        def merge(accumulator: AccumulatorBase[Any]) -> None:
            array = self._mappings.array(gradient) if type(gradient) is Bulk else gradient
            accumulator.apply_dense(local_step, array)

        return self._apply(instance, entry_id, merge)

    async def apply_sparse(
        self,
        instance: str,
        entry_id: int,
        local_step: int,
        indices: Any,
        values: Any,
        gradient_shape: Any,
    ) -> Failure | None:
        dtype = getattr(values, "dtype", None)
        if dtype is not None and sparse_kernel.load_pending(np.dtype(dtype), values.size):
            # the compiled row adds: off the event loop, as for apply_dense
            await asyncio.get_running_loop().run_in_executor(None, sparse_kernel.load)
        return self._apply(
            instance,
            entry_id,
            lambda accumulator: accumulator.apply_sparse(
                local_step, indices, values, gradient_shape
            ),
        )

    def _apply(
        self, instance: str, entry_id: int, merge: Callable[[AccumulatorBase[Any]], None]
    ) -> Failure | None:
        """Merge a gradient in (nothing changes on error), then serve waiting takes."""
        entry = self._entry(instance, entry_id)
        if isinstance(entry, Failure):
            return entry
        try:
            merge(entry.accumulator)
        except errors.OpError as error:
            return Failure.of(error)
        return None

    async def take(
        self,
        instance: str,
        entry_id: int,
        num_required: int,
        timeout: float | None,
        attempt: str,
        caller: str,
        life: list[Any] | None,
        bulk: Bulk | None = None,
        cancelled: bool = False,
    ) -> Any:
        """The round's result once ``num_required`` gradients are in and the take is first.

        A timed-out take is withdrawn here (it consumes nothing), as is one
        whose caller asked (``withdraw``) or died. With ``bulk``, a large
        result is written into the caller's buffer and its descriptor returned.
        ``cancelled``: the caller's run is cancelled already, so the take only
        completes if it can at once, and is otherwise refused without queueing.
        """
        entry = self._entry(instance, entry_id)
        if isinstance(entry, Failure):
            return entry
        self._caller_liveness.watch(caller, life)
        outcome = await self._round(entry, num_required, timeout, attempt, caller, cancelled)
        if bulk is not None and isinstance(outcome, np.ndarray):
            return self._mappings.give(outcome, bulk) or outcome
        return outcome

    async def _round(
        self,
        entry: _Entry,
        num_required: int,
        timeout: float | None,
        attempt_id: str,
        caller: str,
        cancelled: bool,
    ) -> Any:
        reason = self._early_withdrawals.pop(attempt_id, None)
        if reason is not None:
            entry.withdrawn[reason] += 1
            return Failure(WITHDRAWN)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        accumulator = entry.accumulator
        try:
            attempt = accumulator.try_take(num_required, partial(_wake, loop, future))
        except errors.OpError as error:
            return Failure.of(error)
        if not attempt.done:
            if cancelled or timeout == 0:
                accumulator.cancel(attempt, CANCELLED_REASON if cancelled else TIMED_OUT_REASON)
                return Failure(WITHDRAWN) if cancelled else TIMED_OUT
            waiter = _Waiter(attempt, future, caller, attempt_id)
            if timeout is not None and not math.isinf(timeout):
                waiter.timer = loop.call_later(
                    timeout, self._withdraw, entry, waiter, TIMED_OUT, TIMED_OUT_REASON
                )
            self._attempts[attempt_id] = (entry, waiter)
            try:
                await asyncio.shield(future)
            except asyncio.CancelledError:
                self._withdraw(entry, waiter, Failure(WITHDRAWN), INTERRUPTED_REASON)
                raise
            finally:
                self._attempts.pop(attempt_id, None)
                if waiter.timer is not None:
                    waiter.timer.cancel()
            if waiter.outcome is not None:
                return waiter.outcome
        if attempt.stage is not SERVED:
            return CANCELLED if attempt.stage is CANCELLED_STAGE else Failure(WITHDRAWN)
        try:
            outcome = accumulator.collect(attempt)
        except errors.OpError as error:
            return Failure.of(error)
        self._delivered.pop(caller, None)  # its earlier round reached it: it is taking again
        if _nbytes(outcome) < GIVE_BACK_MAX_BYTES and accumulator.can_give_back(attempt):
            self._delivered[caller] = (attempt_id, entry, attempt)
        return outcome

    async def give_back(self, instance: str, attempt_id: str, caller: str) -> None:
        """Put back the round of take ``attempt_id``, delivered to ``caller``
        as the caller was interrupted (it never reached the program), if the
        host still has it (the caller's latest, under GIVE_BACK_MAX_BYTES)."""
        found = self._delivered.get(caller)
        if instance != self._instance or found is None or found[0] != attempt_id:
            return
        del self._delivered[caller]
        _, entry, attempt = found
        entry.accumulator.cancel(attempt, INTERRUPTED_REASON)  # (destroyed: nothing to do)

    async def withdraw(self, instance: str, attempt: str, reason: str = CANCELLED_REASON) -> None:
        """Withdraw a waiting take (its caller gave up); a completed one keeps its round.

        ``reason``: "cancelled" (a run's deadline, a closing session) or
        "interrupted" (the caller was interrupted).
        """
        if instance != self._instance:
            return
        found = self._attempts.get(attempt)
        if found is not None:
            self._withdraw(*found, Failure(WITHDRAWN), reason)
            return
        # Not queued: either done already, or this call overtook the take.
        self._early_withdrawals[attempt] = reason
        if len(self._early_withdrawals) > REMEMBERED_WITHDRAWALS:
            self._early_withdrawals.popitem(last=False)

    async def num_accumulated(self, instance: str, entry_id: int) -> int | Failure:
        entry = self._entry(instance, entry_id)
        if isinstance(entry, Failure):
            return entry
        return entry.accumulator.num_accumulated()

    async def set_global_step(self, instance: str, entry_id: int, step: int) -> int | Failure:
        """Set the step; returns the previous one (the caller logs a lowered step)."""
        entry = self._entry(instance, entry_id)
        if isinstance(entry, Failure):
            return entry
        previous = entry.accumulator.global_step()
        entry.accumulator.set_global_step(step)
        return previous

    async def global_step(self, instance: str, entry_id: int) -> int | Failure:
        entry = self._entry(instance, entry_id)
        if isinstance(entry, Failure):
            return entry
        return entry.accumulator.global_step()

    async def stats(self, instance: str, entry_id: int) -> dict[str, int | None] | Failure:
        """The in-process accumulator's counters, with the waiting done here folded in."""
        entry = self._entry(instance, entry_id)
        if isinstance(entry, Failure):
            return entry
        try:
            found = entry.accumulator.stats()
        except errors.OpError as error:
            return Failure.of(error)
        for reason, count in entry.withdrawn.items():
            key = f"takes_{reason}"
            found[key] = (found[key] or 0) + count
        return found

    async def num_waiting(self, instance: str, entry_id: int) -> int | Failure:
        entry = self._entry(instance, entry_id)
        if isinstance(entry, Failure):
            return entry
        return entry.accumulator.num_waiting()

    async def destroy(self, instance: str, entry_id: int) -> Failure | None:
        """Destroy: waiting takes, from every process, fail with CancelledError."""
        entry = self._entry(instance, entry_id)
        if isinstance(entry, Failure):
            return entry
        self._destroy(entry_id)
        return None

    # --- waiting takes -----------------------------------------------------------

    def _destroy(self, entry_id: int) -> None:
        """Destroy: the accumulator cancels its waiting takes (their callbacks
        complete their futures)."""
        entry = self._entries.pop(entry_id)
        if entry.shared_name:
            del self._shared[entry.shared_name]
        entry.accumulator.close()

    @staticmethod
    def _withdraw(entry: _Entry, waiter: _Waiter, outcome: Failure, reason: str) -> None:
        """Give up a take still waiting (served ones keep their round); whoever
        was behind it may go."""
        if waiter.attempt.done or waiter.future.done():
            return
        entry.accumulator.cancel(waiter.attempt, reason)
        waiter.outcome = outcome
        waiter.future.set_result(None)


def _nbytes(outcome: Any) -> int:
    """The bytes of a take's result (a dense array, or a sparse take's parts)."""
    if isinstance(outcome, np.ndarray):
        return outcome.nbytes
    return sum(part.nbytes for part in outcome)


def _wake(loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
    """A take attempt's callback (called under its accumulator's lock, maybe
    from a thread of the accumulator's own): complete ``future`` on ``loop``."""
    with contextlib.suppress(RuntimeError):  # the loop is closed: the host is going away
        loop.call_soon_threadsafe(_complete, future)


def _complete(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
