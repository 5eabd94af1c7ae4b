"""The state machine every accumulator shares: step, counter and waiting takes.

Dense and sparse accumulators differ only in how a gradient is validated and
merged and how a round's result is computed; everything about *when* a take
completes lives here.

Interrupts: tf_accum installs no signal handler, profile or trace function.
A KeyboardInterrupt (or any exception a SIGINT handler raises, or one injected
into a thread) surfaces wherever Python raises it; the lock is only ever taken
by ``with`` blocks, and a take that an exception stops is given up in one
place (:meth:`AccumulatorBase._give_up`): withdrawn if it still waited, its
round put back if it had been served (when nothing has happened since).
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.attempts import (
    CANCELLED,
    CLAIMED,
    QUEUED,
    RETURNED,
    SEALED,
    SERVED,
    WITHDRAWN,
    SealedRound,
    Stage,
    TakeAttempt,
    copy_error,
)
from tf_accum.accumulators.cancellation import Cancellation
from tf_accum.accumulators.interrupts import holding, interruptible
from tf_accum.accumulators.missing import missing_resource_error
from tf_accum.accumulators.spec import REDUCTION_TYPES, AccumulatorSpec
from tf_accum.accumulators.whole import in_turn, then_mark

logger = logging.getLogger("tf_accum")

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# The keys of stats(), in the order they are documented.
STATS_KEYS = (
    "accepted",
    "stale",
    "rejected",
    "takes_served",
    "takes_timed_out",
    "takes_cancelled",
    "takes_interrupted",
    "waiting",
    "head_num_required",
    "num_accumulated",
    "global_step",
)

__all__ = [
    "REDUCTION_TYPES",
    "STATS_KEYS",
    "AccumulatorBase",
    "AccumulatorSpec",
    "missing_resource_error",
]

Round = TypeVar("Round")
# How often a take's cleanup is begun again when interrupted itself; only
# asynchronous exceptions (a Ctrl-C pressed again) come back each time.
_GIVE_UP_TRIES = 10
_APPLY_METHODS = ("apply", "apply_dense", "apply_sparse")


class AccumulatorBase(ABC, Generic[Round]):
    """Global step, gradient counter, the FIFO queue of waiting takes, and statistics.

    Invariant guarded by ``_lock``: ``_count`` is the number of gradients merged
    into the subclass's round state since the last completed take; the front of
    ``_waiting`` has ``num_required > _count`` (a flush completes it otherwise,
    or, while adds into the round run outside the lock, seals the round for it
    or shuts the gate);
    ``_global_step`` is a wrapping int64; ``_served`` counts rounds handed
    over (never down: the last one's serial), ``_given_back`` the ones given
    back since;
    the ``_n_*`` counters are the statistics. Methods named ``*_locked`` run
    with ``_lock`` held.
    """

    kind: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # every leaf's apply counts the gradients it refuses
        for name in _APPLY_METHODS:
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "_counts_rejections", False):
                setattr(cls, name, _counting_rejections(method))

    def __init__(self, spec: AccumulatorSpec, label: str) -> None:
        self.spec = spec
        self.dtype = spec.dtype
        self.numpy_dtype = spec.dtype.numpy_dtype
        self.shape = spec.shape
        self.reduction_type = spec.reduction_type
        self.label = label
        # An RLock: a release by a thread that does not hold it fails loudly.
        self._lock = threading.RLock()
        self._global_step = 0
        self._count = 0
        self._served = 0
        # the latest served round whose own buffers its take began to change
        # (see _keep_for_taker): never put back
        self._kept_by_taker = 0
        self._waiting: collections.deque[TakeAttempt[Round]] = collections.deque()
        self._closed = False
        self._n_accepted = 0
        self._n_stale = 0
        self._n_rejected = 0
        self._n_timed_out = 0
        self._n_cancelled = 0
        self._n_interrupted = 0
        # the serials of served rounds given back (see _put_back_locked): a
        # dict, so that a round's mark is stored with its count in one statement
        self._given_back: dict[int, bool] = {}
        # Adds running outside the lock (see stripes.py) into the current round;
        # each carries the round's number (``_served`` when it began). A take
        # ready on the gradients already counted does not wait for them: the
        # round is sealed (SealedRound), committed, and the next one starts
        # while they land. One round is sealed at a time: while a second could
        # be, the gate is shut (held), and new applies wait at it, so that
        # take is served as soon as the adds are done.
        self._in_flight = 0
        self._sealed: SealedRound | None = None
        self._gate = threading.Lock()
        self._gate_shut = False

    # --- subclass hooks -------------------------------------------------------

    # the instance attribute holding the round's state (None: no gradient yet)
    _ROUND: ClassVar[str]

    @abstractmethod
    def _detach_round_locked(self) -> Round:
        """The round's accumulated state, about to be handed over, with any
        bookkeeping done first; the state stays in place (the caller empties
        the round in one statement with the counters: see
        _complete_round_locked)."""

    def _attach_round_locked(self, state: Round) -> None:
        """Put a detached round back (only called while the round is empty)."""
        raise NotImplementedError

    def _merge_round_locked(self, state: Round, count: int, serial: int) -> bool:
        """Merge the raw state of the served round ``serial`` (``count``
        gradients) into the current round, counting them and marking the
        round given back (``_given_back``) in one step; say whether it was
        (False: it cannot be, and nothing changed)."""
        return False

    @abstractmethod
    def _finish_round(self, state: Round, count: int, serial: int) -> Any:
        """Turn a detached round (the ``serial``-th served) into the take's
        result (runs without the lock). If this raises, the round is put back
        unless :meth:`_keep_for_taker` was called."""

    def _keep_for_taker(self, serial: int) -> None:
        """Called by :meth:`_finish_round` just before it changes the served
        round ``serial``'s own buffers in place (a MEAN's division): from then
        on the round is never put back, since it would go back changed, not as
        it was; an exception that follows (only an injected one can: the
        changes allocate nothing) loses it whole."""
        with self._lock:
            self._kept_by_taker = max(self._kept_by_taker, serial)

    # --- shared operations ----------------------------------------------------

    def _check_open_locked(self) -> None:
        if self._closed:
            raise missing_resource_error(self.label)

    def num_accumulated(self) -> int:
        """The number of gradients accepted since the last completed take."""
        with self._lock:
            self._check_open_locked()
            return self._count

    def num_waiting(self) -> int:
        """The number of takes waiting in the queue (for tests and diagnostics)."""
        with self._lock:
            return len(self._waiting)

    def global_step(self) -> int:
        """The current global step."""
        with self._lock:
            self._check_open_locked()
            return self._global_step

    def stats(self) -> dict[str, int | None]:
        """A consistent snapshot of the accumulator's counters (see ``STATS_KEYS``).

        ``accepted``, ``stale`` and ``rejected`` count gradients: merged, dropped
        as stale, refused as invalid by the accumulator (after or before its
        lock). ``takes_served``, ``takes_timed_out``, ``takes_cancelled``
        (destroy or an outside cancellation) and ``takes_interrupted`` count
        takes; ``waiting`` is the queue's length now and ``head_num_required``
        the front take's ``num_required`` (None when nobody waits). All are
        read under the lock in one go, so they agree with one another.

        Raises:
            NotFoundError: the accumulator was destroyed.
        """
        with self._lock:
            self._check_open_locked()
            head = self._waiting[0].num_required if self._waiting else None
            return {
                "accepted": self._n_accepted,
                "stale": self._n_stale,
                "rejected": self._n_rejected,
                "takes_served": self._served - len(self._given_back),
                "takes_timed_out": self._n_timed_out,
                "takes_cancelled": self._n_cancelled,
                "takes_interrupted": self._n_interrupted,
                "waiting": len(self._waiting),
                "head_num_required": head,
                "num_accumulated": self._count,
                "global_step": self._global_step,
            }

    def set_global_step(self, new_global_step: int) -> None:
        """Set the global step; a lower value is applied too, with a warning.

        Waiting takes are not woken: their condition depends only on the counter.
        """
        with self._lock:
            self._check_open_locked()
            previous, self._global_step = self._global_step, new_global_step
        if new_global_step < previous:
            # logged outside the lock: handlers are user code
            logger.warning(
                "Attempt to set the global step of %s to a smaller value: %d -> %d",
                self.label,
                previous,
                new_global_step,
            )

    def apply_dense(
        self, local_step: int, gradient: np.ndarray[Any, Any], owned: bool = False
    ) -> None:
        """Merge a dense gradient; only dense accumulators implement it."""
        raise TypeError(f"{self.label} is a {self.kind} accumulator")

    def apply_sparse(
        self,
        local_step: int,
        indices: np.ndarray[Any, Any],
        values: np.ndarray[Any, Any],
        gradient_shape: np.ndarray[Any, Any] | None,
        owned: bool = False,
    ) -> None:
        """Merge a sparse gradient; only sparse accumulators implement it."""
        raise TypeError(f"{self.label} is a {self.kind} accumulator")

    def _stale_locked(self) -> None:
        """Count a gradient dropped as stale."""
        self._n_stale += 1

    def take(
        self,
        num_required: int,
        timeout: float | None = None,
        cancellation: Cancellation | None = None,
    ) -> Any:
        """Wait until at least ``num_required`` gradients are in, then take them all.

        Takes are served in arrival order; a take completes when the counter
        reaches its ``num_required`` while it is at the front of the queue. On
        completion the global step goes up by one and the counter goes to 0;
        gradients still being added at that moment (large dense adds run
        outside the lock) belong to its round, and it returns once they are in.
        A take is all or nothing: if computing its result fails, the round is
        put back (when nothing has happened since), and the error raised.

        Raises:
            DeadlineExceededError: ``timeout`` seconds passed first; the attempt
                is withdrawn and consumes nothing.
            CancelledError: the accumulator was destroyed while waiting.
            NotFoundError: the accumulator was already destroyed.
            KeyboardInterrupt: Ctrl-C while waiting (or whatever else a SIGINT
                handler raises): the attempt is withdrawn, or, if it was served
                at that moment, its round goes back when nothing has happened
                since, and is lost otherwise.
            whatever ``cancellation`` was cancelled with (a run's deadline, a
                closing session): the attempt is withdrawn and consumes nothing
                (one served but not yet claimed by its thread puts its round
                back, when nothing has happened since).
        """
        attempt: TakeAttempt[Round] | None = None
        served: tuple[Round, int, int] | None = None
        try:
            with self._lock:
                self._check_open_locked()
                if not self._waiting and self._count >= num_required and not self._in_flight:
                    count = self._count
                    served = (self._complete_round_locked(), count, self._served)
                else:
                    attempt = TakeAttempt(num_required)
                    self._enqueue_locked(attempt, cancellation)
                    # serves it at once if an exception left a served take at
                    # the front; shuts the gate if only adds in flight hold it up
                    self._flush_locked()
            if attempt is not None:
                self._wait(attempt, timeout, cancellation)
                served = self._claim(attempt)
            return self._finish_round(*served)  # type: ignore[misc]
        except BaseException as error:
            # whatever went wrong, and wherever: no dead take stays queued, and
            # a served round whose result was not computed goes back
            kept = self._give_up(attempt, served, error)
            if kept is None:
                raise
        return self._finish_round(*kept)

    def _enqueue_locked(
        self, attempt: TakeAttempt[Round], cancellation: Cancellation | None
    ) -> None:
        if cancellation is not None:
            key = cancellation.register(lambda error: self._cancel_attempt(attempt, error))
            if key is None:
                assert cancellation.error is not None
                self._n_cancelled += 1
                attempt.stage = CANCELLED
                raise copy_error(cancellation.error)
            attempt.key = key
        self._waiting.append(attempt)

    @interruptible
    def _wait(
        self, attempt: TakeAttempt[Round], timeout: float | None, cancellation: Cancellation | None
    ) -> None:
        """Block (without the lock) until ``attempt`` is served, cancelled or out
        of time. An exception out of here leaves the attempt to
        :meth:`_give_up`."""
        deadline = None if timeout is None or math.isinf(timeout) else time.monotonic() + timeout
        try:
            woken = False
            while not woken:
                wait = threading.TIMEOUT_MAX
                if deadline is not None:
                    wait = min(wait, max(0.0, deadline - time.monotonic()))
                woken = attempt.wakeup.acquire(True, wait)
                if not woken and deadline is not None and time.monotonic() >= deadline:
                    if not self._ready_but_for_flights(attempt):
                        break
                    deadline = None  # served once the adds running now are done
            if not woken:
                with self._lock:
                    self._resume_front_locked()
                    if attempt.stage is QUEUED:
                        self._withdraw_locked(attempt)
                        self._n_timed_out += 1
                        raise errors.DeadlineExceededError(
                            None, None, "Timed out waiting for notification"
                        )
                # sealed (before or since the deadline): served once its round is whole
                self._await_landing(attempt)
        finally:
            if cancellation is not None:
                cancellation.unregister(attempt.key)

    def _claim(self, attempt: TakeAttempt[Round]) -> tuple[Round, int, int]:
        """The round of ``attempt``, served: from here it is the take's (no
        cancellation puts it back). Raises the error it was cancelled with."""
        with self._lock:
            if attempt.stage is SERVED:
                attempt.stage = CLAIMED
                return attempt.outcome, attempt.count, attempt.serial  # type: ignore[return-value]
        assert attempt.error is not None
        raise attempt.error

    def _give_up(
        self,
        attempt: TakeAttempt[Round] | None,
        served: tuple[Round, int, int] | None,
        error: BaseException,
    ) -> tuple[Round, int, int] | None:
        """A take is stopped by ``error``: withdraw its ``attempt`` if it still
        waits, or put the round back that it was served (and nothing has
        happened since; otherwise the round is lost with the exception, unless
        the program asked for interrupts to be deferred: then the round is
        returned here for the take to return, and the interrupt follows).
        Counted as interrupted when it had waited, unless its round was
        claimed already.

        An interrupt landing in the cleanup proper (a second Ctrl-C) does not
        leave the take half given up (a dead take queued would eat a later
        round, a round attached but not counted would break the count): the
        cleanup is begun again and finished, then the last such exception is
        raised. (One landing in the few instructions that enter it still
        can.)"""
        again: BaseException | None = None
        kept = None
        for _ in range(_GIVE_UP_TRIES):
            try:
                if attempt is not None:
                    kept = self._give_up_once(attempt, error)
                elif served is not None:
                    with self._lock:
                        self._put_back_locked(*served)
                break
            except BaseException as exc:
                again = exc
        if again is not None:
            raise again
        return kept

    def _give_up_once(
        self, attempt: TakeAttempt[Round], error: BaseException
    ) -> tuple[Round, int, int] | None:
        while True:
            self._await_landing(attempt)
            with self._lock:
                self._resume_front_locked()
                stage = attempt.stage
                if stage is SEALED:
                    continue  # sealed since we looked: its adds are landing
                if stage is QUEUED:
                    self._withdraw_locked(attempt, QUEUED)  # marked below
                    # one statement: withdrawn exactly when counted
                    attempt.stage, self._n_interrupted = WITHDRAWN, self._n_interrupted + 1
                elif stage is SERVED or stage is CLAIMED:
                    state: Any = attempt.outcome
                    interrupted = self._n_interrupted + (stage is SERVED)
                    # one statement: given up exactly when its round went back
                    attempt.stage, self._n_interrupted = (
                        (RETURNED, interrupted)
                        if self._put_back_locked(state, attempt.count, attempt.serial)
                        else (stage, self._n_interrupted)
                    )
                    if attempt.stage is RETURNED:
                        return None
                    if stage is SERVED and holding(error):
                        # the interrupt is deferred: the round is the take's
                        attempt.stage = CLAIMED
                        return state, attempt.count, attempt.serial
                    attempt.stage, self._n_interrupted = RETURNED, interrupted  # lost
                return None

    def _ready_but_for_flights(self, attempt: TakeAttempt[Round]) -> bool:
        """Whether ``attempt`` waits only for adds running outside the lock."""
        with self._lock:
            self._resume_front_locked()
            return bool(self._in_flight) and self._front_ready_locked(attempt)

    @staticmethod
    def _await_landing(attempt: TakeAttempt[Round]) -> None:
        """Wait until a sealed ``attempt`` is served: the adds into its round
        are running, so the wait is short and bounded."""
        if attempt.stage is SEALED:
            attempt.wakeup.acquire()

    def _front_ready_locked(self, attempt: TakeAttempt[Round] | None = None) -> bool:
        """Whether the counter allows the front take (which is ``attempt``, if given)."""
        waiting = self._waiting
        return (
            bool(waiting)
            and (attempt is None or waiting[0] is attempt)
            and self._count >= waiting[0].num_required
        )

    def _withdraw_locked(self, attempt: TakeAttempt[Round], stage: Stage = WITHDRAWN) -> None:
        # A withdrawn take must not swallow later gradients: let whoever is
        # behind it try. Its stage changes last, so that an exception between
        # these lines leaves it to be withdrawn again (see _give_up).
        if attempt in self._waiting:
            self._waiting.remove(attempt)
        self._flush_locked()
        attempt.stage = stage

    def _cancel_attempt(self, attempt: TakeAttempt[Round], error: errors.OpError) -> None:
        """Withdraw a take from outside (runs without the lock held): a waiting
        one, or one served whose waiter has not claimed its round yet, if the
        round can go back (nothing has happened since): it consumes nothing."""
        with self._lock:
            self._resume_front_locked()
            stage = attempt.stage
            if stage is QUEUED:
                attempt.error = copy_error(error)
                self._n_cancelled += 1
                self._withdraw_locked(attempt, CANCELLED)
                attempt.wakeup.release()
            elif stage is SERVED and self._put_back_locked(
                attempt.outcome,  # type: ignore[arg-type]
                attempt.count,
                attempt.serial,
            ):
                attempt.error = copy_error(error)
                attempt.stage = CANCELLED
                self._n_cancelled += 1

    def _complete_round_locked(self) -> Round:
        step = self._global_step + 1
        step = INT64_MIN if step > INT64_MAX else step
        served, fields, name = self._served + 1, self.__dict__, self._ROUND
        state = self._detach_round_locked()
        # one statement on one line, with no call in it: the round is handed
        # over exactly when the counter and the step move on (CPython raises
        # an asynchronous exception only after a call, at a backward jump or
        # at a function's start; a tracer's, at a line's start)
        fields[name], self._count, self._served, self._global_step = None, 0, served, step
        return state

    def _put_back_locked(self, state: Round, count: int, serial: int) -> bool:
        """Give the served round ``serial`` back, once; say whether it went back.

        If nothing has happened since, the round is undone: the counter and
        the step are as before it. Otherwise its raw state is merged into the
        current round (see _merge_round_locked): its gradients count again,
        and the step stays where the takes moved it. It cannot go back once
        its take began dividing it in place (see _keep_for_taker), nor into a
        destroyed accumulator, nor (dense) into a round of another shape."""
        if serial in self._given_back:  # already: an exception cut the last call short
            self._flush_locked()
            return True
        if self._closed or serial <= self._kept_by_taker:
            return False
        if self._served != serial or self._count:
            if not self._merge_round_locked(state, count, serial):
                return False
        else:
            try:
                self._attach_round_locked(state)
            except NotImplementedError:
                return False
            step = self._global_step - 1
            step = INT64_MAX if step < INT64_MIN else step
            # one statement: the counters say the round is back exactly when
            # they all do (an exception before it leaves the round attached
            # but uncounted, and a second put back finishes the job)
            self._count, self._global_step, self._given_back[serial] = count, step, True
        self._flush_locked()
        return True

    def _flush_locked(self) -> None:
        """Complete waiting takes from the front for as long as the counter allows
        (sealing the round if adds into it run outside the lock), and open or
        shut the gate."""
        self._resume_front_locked()
        if self._in_flight:
            ready = self._front_ready_locked()
            if ready and self._sealed is None:
                self._seal_locked()
            else:
                if ready != self._gate_shut:
                    self._set_gate_locked(ready)
                return
        waiting, over = self._waiting, self._complete_round_locked
        while waiting and self._count >= waiting[0].num_required:
            attempt, count = waiting[0], self._count
            # one line after the call: handed its round exactly when the round
            # moves on; then woken exactly when marked served. An exception
            # between them leaves it at the front for _resume_front_locked.
            attempt.outcome, attempt.count, attempt.serial = over(), count, self._served
            then_mark(attempt.wakeup.release, attempt, "stage", SERVED)
            waiting.popleft()
        if self._gate_shut:
            self._set_gate_locked(False)

    def _resume_front_locked(self) -> None:
        """Finish what an exception cut short at the front of the queue: a
        take handed its round but not yet woken is woken, one committed to a
        sealed round is marked so, and those no longer waiting are dropped.
        Runs before anything looks at a waiting take."""
        waiting, sealed = self._waiting, self._sealed
        while waiting:
            attempt = waiting[0]
            if attempt.stage is QUEUED:
                if sealed is not None and sealed.attempt is attempt:
                    attempt.stage = SEALED
                elif attempt.serial:
                    then_mark(attempt.wakeup.release, attempt, "stage", SERVED)
                else:
                    return
            waiting.popleft()

    def _seal_locked(self) -> None:
        """Commit the front take to the current round while adds into it still
        run outside the lock (see SealedRound): the next round starts now."""
        attempt = self._waiting[0]
        sealed = SealedRound(attempt, self._served, self._in_flight, self._count)
        over, serial = self._complete_round_locked, self._served + 1
        # one line after the call: sealed exactly when its round is handed
        # over, and the adds counted in _in_flight move to it
        sealed.outcome, sealed.serial, self._sealed, self._in_flight = over(), serial, sealed, 0
        attempt.stage = SEALED  # (or by _resume_front_locked)
        self._waiting.popleft()

    def _serve_sealed_locked(self) -> None:
        """Once every add into the sealed round has landed, hand it to its take."""
        sealed = self._sealed
        if sealed is None or sealed.in_flight:
            return
        attempt = sealed.attempt
        if attempt.stage is QUEUED or attempt.stage is SEALED:  # not yet (again: see _land)
            attempt.outcome, attempt.count, attempt.serial = (
                sealed.outcome,
                sealed.count,
                sealed.serial,
            )
            # woken exactly when marked served
            then_mark(attempt.wakeup.release, attempt, "stage", SERVED)
        self._sealed = None

    def _set_gate_locked(self, shut: bool) -> None:
        # the lock and the flag change in one step (whole.then_mark): an
        # exception leaves the flag saying whether the gate is held
        gate = self._gate
        then_mark(gate.acquire if shut else gate.release, self, "_gate_shut", shut)

    def _wait_at_gate(self) -> None:
        """Wait (without the lock) until the gate opens: a take that can be served
        once the adds running outside the lock are done goes before this apply."""
        # passed through in one step: never left held by an exception in between
        in_turn(self._gate.acquire, self._gate.release)

    def _land(self, flight: Any) -> None:
        """An add that ran outside the lock (noted in ``_in_flight``) is over:
        count its gradient if it went in (``flight.complete``), once
        (``flight.landed`` says whether it was), and serve the take it held up,
        if any."""
        with self._lock:
            if flight.landed:
                # again: an exception may have come before these
                self._serve_sealed_locked()
                self._flush_locked()
                return
            sealed = self._sealed
            if sealed is not None and flight.round == sealed.round:
                # committed to its take: counted even if the accumulator has closed since
                added = int(flight.complete)
                # one statement: counted exactly when its flight ends
                sealed.in_flight, sealed.count, self._n_accepted, flight.landed = (
                    sealed.in_flight - 1,
                    sealed.count + added,
                    self._n_accepted + added,
                    True,
                )
                self._serve_sealed_locked()
                if not self._closed:
                    self._flush_locked()  # a round that waited for this one to go
                return
            # (an add whose round was handed over half-sealed, by an exception,
            # is not counted into the next one)
            added = int(flight.complete and not self._closed and flight.round == self._served)
            # one statement: counted exactly when its flight ends
            self._in_flight, self._count, self._n_accepted, flight.landed = (
                self._in_flight - 1,
                self._count + added,
                self._n_accepted + added,
                True,
            )
            if not self._closed:
                self._flush_locked()

    def _serve_waiting_locked(self) -> None:
        """Serve whoever waits, after a gradient was counted."""
        if self._waiting:
            self._flush_locked()

    def close(self) -> None:
        """Destroy: every waiting take fails with CancelledError; later use is NotFound."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._count = 0
            self._detach_round_locked()
            self.__dict__[self._ROUND] = None
            if self._gate_shut:
                self._set_gate_locked(False)  # applies waiting at it find it closed
            while self._waiting:
                attempt = self._waiting.popleft()
                attempt.error = errors.CancelledError(
                    None, None, "TakeGrad operation was cancelled"
                )
                attempt.stage = CANCELLED
                self._n_cancelled += 1
                attempt.wakeup.release()

    @property
    def closed(self) -> bool:
        return self._closed


def _counting_rejections(apply: Callable[..., None]) -> Callable[..., None]:
    """Count the gradients a leaf's apply refuses as invalid."""

    def counted(self: AccumulatorBase[Any], *args: Any, **kwargs: Any) -> None:
        try:
            apply(self, *args, **kwargs)
        except errors.InvalidArgumentError:
            with self._lock:
                self._n_rejected += 1
            raise

    counted.__doc__ = apply.__doc__
    counted.__name__ = apply.__name__
    counted._counts_rejections = True  # type: ignore[attr-defined]
    return counted
