"""The host: every accumulator of one container, inside one async Ray actor.

Each accumulator is an in-process one (tf_accum.accumulators), so merging,
staleness, steps and results are exactly the in-process code. Only waiting
moves here: the in-process take blocks a thread on a condition, while an async
actor must keep its event loop free, so a take that cannot complete at once
waits on an asyncio future in this module's FIFO queue. The inner
accumulator's own queue stays empty, so its take is only ever called when it
completes at once (it takes everything, bumps the step, divides a MEAN).

Every method runs on the actor's single event-loop thread, so each one is
atomic with respect to the others: that is the lock.

Nothing here raises to the caller: errors are returned as ``Failure`` values.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import math
import os
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators import half_kernel, sparse_kernel
from tf_accum.accumulators.base import AccumulatorBase
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.distributed.bulk import Bulk, HostMappings
from tf_accum.distributed.lives import CallerLives
from tf_accum.distributed.placement import Placement
from tf_accum.distributed.wire import CANCELLED, MISSING, RESTARTED, TIMED_OUT, WITHDRAWN, Failure
from tf_accum.resources.errors import shared_spec_conflict
from tf_accum.resources.local import new_accumulator

# How many withdrawals of takes not (or no longer) queued are remembered: a
# withdrawal may overtake its take (calls from one caller are not ordered).
REMEMBERED_WITHDRAWALS = 10_000

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
        "num_accumulated",
        "set_global_step",
        "global_step",
        "stats",
        "num_waiting",
        "destroy",
    }
)


class _Waiter:
    __slots__ = ("num_required", "future", "caller", "attempt", "timer")

    def __init__(
        self, num_required: int, future: asyncio.Future[Any], caller: str, attempt: str
    ) -> None:
        self.num_required = num_required
        self.future = future
        self.caller = caller
        self.attempt = attempt
        self.timer: asyncio.TimerHandle | None = None


class _Entry:
    """One accumulator and the takes waiting on it, in arrival order.

    Invariant: the front of ``waiting`` needs more gradients than are
    accumulated (``_flush`` completes it otherwise).
    """

    __slots__ = ("accumulator", "waiting", "shared_name", "owner", "withdrawn")

    def __init__(
        self, accumulator: AccumulatorBase[Any], shared_name: str, owner: str | None
    ) -> None:
        self.accumulator = accumulator
        self.waiting: collections.deque[_Waiter] = collections.deque()
        self.shared_name = shared_name
        self.owner = owner  # the creating process of a private accumulator
        # takes withdrawn here, by reason (the inner accumulator never sees them wait)
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
        self._lives = CallerLives(self._caller_died)
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

    async def census(self) -> tuple[int, int]:
        """(accumulators held, callers' buffers mapped): for tests and diagnostics."""
        return len(self._entries), self._mappings.count()

    async def hold(self, caller: str) -> None:
        """Never returns while ``caller`` lives: its result is the caller's life token.

        The caller owns this call's result; once the caller dies, awaiting the
        result raises OwnerDiedError, which is how the host learns of it.
        """
        await self._lives.hold(caller)

    def _caller_died(self, caller: str) -> None:
        """Withdraw the dead process's waiting takes; destroy its private accumulators."""
        for entry, waiter in list(self._attempts.values()):
            if waiter.caller == caller:
                self._withdraw(entry, waiter, Failure(WITHDRAWN), INTERRUPTED_REASON)
        for entry_id, entry in list(self._entries.items()):
            if entry.owner == caller:
                self._destroy(entry_id)
        self._mappings.release_caller(caller)
        self._lives.forget(caller)

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
        self._lives.watch(caller, life)
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
        if entry.waiting:
            self._flush(entry)
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
        self._lives.watch(caller, life)
        outcome = await self._round(entry, num_required, timeout, attempt, caller, cancelled)
        if bulk is not None and isinstance(outcome, np.ndarray):
            return self._mappings.give(outcome, bulk) or outcome
        return outcome

    async def _round(
        self,
        entry: _Entry,
        num_required: int,
        timeout: float | None,
        attempt: str,
        caller: str,
        cancelled: bool,
    ) -> Any:
        reason = self._early_withdrawals.pop(attempt, None)
        if reason is not None:
            entry.withdrawn[reason] += 1
            return Failure(WITHDRAWN)
        if not entry.waiting and entry.accumulator.num_accumulated() >= num_required:
            return self._take_now(entry, num_required)
        if cancelled or timeout == 0:
            entry.withdrawn[CANCELLED_REASON if cancelled else TIMED_OUT_REASON] += 1
            return Failure(WITHDRAWN) if cancelled else TIMED_OUT
        loop = asyncio.get_running_loop()
        waiter = _Waiter(num_required, loop.create_future(), caller, attempt)
        if timeout is not None and not math.isinf(timeout):
            waiter.timer = loop.call_later(
                timeout, self._withdraw, entry, waiter, TIMED_OUT, TIMED_OUT_REASON
            )
        entry.waiting.append(waiter)
        self._attempts[attempt] = (entry, waiter)
        try:
            return await asyncio.shield(waiter.future)
        except asyncio.CancelledError:
            self._withdraw(entry, waiter, Failure(WITHDRAWN), INTERRUPTED_REASON)
            raise
        finally:
            self._attempts.pop(attempt, None)

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
        found["waiting"] = len(entry.waiting)
        found["head_num_required"] = entry.waiting[0].num_required if entry.waiting else None
        return found

    async def num_waiting(self, instance: str, entry_id: int) -> int | Failure:
        entry = self._entry(instance, entry_id)
        if isinstance(entry, Failure):
            return entry
        return len(entry.waiting)

    async def destroy(self, instance: str, entry_id: int) -> Failure | None:
        """Destroy: waiting takes, from every process, fail with CancelledError."""
        entry = self._entry(instance, entry_id)
        if isinstance(entry, Failure):
            return entry
        self._destroy(entry_id)
        return None

    # --- the queue ----------------------------------------------------------------

    def _destroy(self, entry_id: int) -> None:
        entry = self._entries.pop(entry_id)
        if entry.shared_name:
            del self._shared[entry.shared_name]
        entry.accumulator.close()
        while entry.waiting:
            self._settle(entry.waiting.popleft(), CANCELLED)

    def _take_now(self, entry: _Entry, num_required: int) -> Any:
        try:
            # completes at once: nothing waits in the inner accumulator
            return entry.accumulator.take(num_required, 0)
        except errors.OpError as error:
            return Failure.of(error)

    @staticmethod
    def _settle(waiter: _Waiter, outcome: Any) -> None:
        if waiter.timer is not None:
            waiter.timer.cancel()
        if not waiter.future.done():
            waiter.future.set_result(outcome)

    def _flush(self, entry: _Entry) -> None:
        """Complete waiting takes from the front for as long as the counter allows."""
        waiting = entry.waiting
        count = entry.accumulator.num_accumulated
        while waiting and count() >= waiting[0].num_required:
            waiter = waiting.popleft()
            self._settle(waiter, self._take_now(entry, waiter.num_required))

    def _withdraw(self, entry: _Entry, waiter: _Waiter, outcome: Failure, reason: str) -> None:
        """Take a still-waiting attempt out of the queue; whoever was behind it may go."""
        if waiter.future.done():
            return
        entry.withdrawn[reason] += 1
        entry.waiting.remove(waiter)
        self._settle(waiter, outcome)
        if entry.waiting:
            self._flush(entry)
