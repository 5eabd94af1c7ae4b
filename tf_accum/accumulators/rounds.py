"""A round's life, shared by every accumulator: its gradients counted, the
one queue of take attempts it is handed to in order, and its way back.

Nothing waits inside the accumulator. :meth:`Rounds.try_take` queues a take
attempt (see attempts.py) that is served at once or later, by whichever call
makes the counter reach its ``num_required`` while it is at the front, and
says so through its callback; :meth:`Rounds.collect` turns a served attempt's
round into the take's result; :meth:`Rounds.cancel` withdraws an attempt, or
gives back the round of one served but not collected. :meth:`Rounds.take` is
the blocking take of the raw ops: a thread waits for its attempt's callback,
and whatever stops it (a timeout, a cancellation, Ctrl-C's
KeyboardInterrupt) withdraws the attempt or gives its round back.

Invariant guarded by ``_lock``: ``_count`` is the number of gradients merged
into ``_round`` since the last completed take; the front of ``_waiting``
has ``num_required > _count`` (a flush serves it otherwise);
``_global_step`` is a wrapping int64; ``_served`` counts rounds handed
over (never down: the last one's serial), ``_given_back`` the ones given
back since; the ``_n_*`` counters are statistics. Methods named ``*_locked``
run with ``_lock`` held. Each change is computed first and stored in one
assignment, so the state is consistent between any two statements.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tf_accum import errors
from tf_accum.accumulators.attempts import (
    CANCELLED,
    DELIVERED,
    QUEUED,
    RETURNED,
    SERVED,
    WITHDRAWN,
    Cancellation,
    Stage,
    TakeAttempt,
    copy_error,
)
from tf_accum.accumulators.interrupts import holding, interruptible, joined
from tf_accum.accumulators.missing import missing_resource_error

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# A waiting take looks at its attempt at least this often (seconds), should
# the serving thread have been interrupted between serving it and waking it.
LOOK_AGAIN = 1.0

Round = TypeVar("Round")

# Why an owner withdrew its attempt, as stats() counts it.
TIMED_OUT, CANCELLED_REASON, INTERRUPTED = "timed_out", "cancelled", "interrupted"


class Rounds(ABC, Generic[Round]):
    """Global step, gradient counter, the queue of take attempts, and the
    hand-over of rounds to them (see the module's docstring)."""

    # the round's accumulated state (None: no gradient yet)
    _round: Round | None = None

    def __init__(self, label: str) -> None:
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
        self._n_timed_out = 0
        self._n_cancelled = 0
        self._n_interrupted = 0
        # the serials of served rounds given back (see _put_back_locked)
        self._given_back: dict[int, bool] = {}

    # --- subclass hooks -------------------------------------------------------

    @abstractmethod
    def _detach_round_locked(self) -> Round:
        """The round's accumulated state, about to be handed over, with any
        bookkeeping done first; the state stays in ``_round`` (the caller
        empties it with the counters: see _hand_over_locked)."""

    def _before_attach_locked(self, state: Round) -> None:
        """Bookkeeping before a detached round is put back as it is (only
        while the round is empty; the caller stores it with its counters);
        NotImplementedError: this kind cannot put a round back."""
        raise NotImplementedError

    def _settle_locked(self) -> None:
        """Carry through, or drop, a change to the round that an exception cut
        short, if the kind records one (the dense kind does); by default none."""

    def _merge_round_locked(self, state: Round, count: int, serial: int) -> bool:
        """Merge the raw state of the served round ``serial`` (``count``
        gradients) into the current round, counting them and marking the
        round given back (``_given_back``) with them; say whether it was
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
        it was."""
        with self._lock:
            self._kept_by_taker = max(self._kept_by_taker, serial)

    # --- takes: the non-blocking core -----------------------------------------

    def try_take(
        self,
        num_required: int,
        callback: Callable[[], Any] | None = None,
        cancellation: Cancellation | None = None,
    ) -> TakeAttempt[Round]:
        """Queue a take of every gradient once at least ``num_required`` are
        in and every take queued before it is served; returns its attempt,
        served already if it could be (``attempt.done``).

        ``callback()`` is called once the attempt is served or cancelled (at
        once if it is served now), with the accumulator's lock held: it must
        not raise nor call the accumulator (see attempts.py). Collect the
        round with :meth:`collect`, or give it up with :meth:`cancel`. With
        ``cancellation``, cancelling it cancels the attempt.

        Raises:
            NotFoundError: the accumulator was destroyed.
            whatever ``cancellation`` was cancelled with already.
        """
        attempt: TakeAttempt[Round] = TakeAttempt(num_required, callback)
        with self._lock:
            self._queue_locked(attempt, cancellation)
        return attempt

    def collect(self, attempt: TakeAttempt[Round]) -> Any:
        """The result of a served ``attempt`` (once). If computing it fails,
        the round goes back and the error is raised.

        Raises:
            the error it was cancelled with (CancelledError once destroyed);
            RuntimeError: it is not served (still waiting, or given up).
        """
        _forget_cancellation(attempt)
        state = self._deliver(attempt)
        try:
            return self._finish_round(*state)
        except BaseException:
            with self._lock:
                self._give_back_locked(attempt, None)
            raise

    def cancel(self, attempt: TakeAttempt[Round], reason: str = CANCELLED_REASON) -> bool:
        """Give ``attempt`` up: withdraw it if it waits, or give back the
        round it was served (collected too, when its result left the round
        as it was: see :meth:`can_give_back`), if it can go back (see
        _put_back_locked).
        Its callback is not called. ``reason`` ("timed_out", "cancelled",
        "interrupted") is what stats() counts it as. Says whether it consumed
        nothing."""
        _forget_cancellation(attempt)
        with self._lock:
            return self._give_back_locked(attempt, reason)

    def can_give_back(self, attempt: TakeAttempt[Round]) -> bool:
        """Whether the round of a delivered ``attempt`` could still go back
        (see :meth:`cancel`): its result did not change the round's own buffers."""
        with self._lock:
            return attempt.stage is DELIVERED and self._put_back_possible_locked(attempt.serial)

    def _queue_locked(self, attempt: TakeAttempt[Round], cancellation: Cancellation | None) -> None:
        self._check_open_locked()
        if cancellation is not None:
            key = cancellation.register(lambda error: self._cancel_from_outside(attempt, error))
            if key is None:
                assert cancellation.error is not None
                self._n_cancelled += 1
                attempt.stage = CANCELLED
                raise copy_error(cancellation.error)
            attempt.cancellation, attempt.key = cancellation, key
        self._waiting.append(attempt)
        self._flush_locked()

    def _deliver(self, attempt: TakeAttempt[Round]) -> tuple[Round, int, int]:
        """The round of a served ``attempt``: from here it is the take's (no
        cancellation puts it back). Raises the error it was cancelled with."""
        with self._lock:
            stage = attempt.stage
            if stage is SERVED:
                attempt.stage = DELIVERED
                return attempt.state, attempt.count, attempt.serial  # type: ignore[return-value]
        if stage is CANCELLED:
            assert attempt.error is not None
            raise copy_error(attempt.error)
        raise RuntimeError(f"a take attempt that is {stage.value} has no round to collect")

    def _give_back_locked(self, attempt: TakeAttempt[Round], reason: str | None) -> bool:
        """Withdraw ``attempt`` or give back its round (see :meth:`cancel`),
        counted in the stats as ``reason`` (None: not counted)."""
        stage = attempt.stage
        if stage is QUEUED:
            attempt.stage = WITHDRAWN
            if attempt in self._waiting:
                self._waiting.remove(attempt)
                self._count_withdrawal_locked(reason)
                self._flush_locked()  # whoever is behind it may go now
            return True
        if stage is SERVED or stage is DELIVERED:
            if self._put_back_locked(attempt.state, attempt.count, attempt.serial):  # type: ignore[arg-type]
                attempt.stage = RETURNED
                self._count_withdrawal_locked(reason)
                return True
            if stage is SERVED:
                attempt.stage = RETURNED
                self._count_withdrawal_locked(reason)  # and lost
            return False
        return stage is not DELIVERED

    def _count_withdrawal_locked(self, reason: str | None) -> None:
        if reason == TIMED_OUT:
            self._n_timed_out += 1
        elif reason == INTERRUPTED:
            self._n_interrupted += 1
        elif reason == CANCELLED_REASON:
            self._n_cancelled += 1

    def _cancel_from_outside(self, attempt: TakeAttempt[Round], error: errors.OpError) -> None:
        """A cancellation's callback (runs without the lock held): a waiting
        attempt fails with ``error``, as does one served but not yet
        collected whose round can go back."""
        with self._lock:
            stage = attempt.stage
            if stage is QUEUED and attempt in self._waiting:
                attempt.error = copy_error(error)
                attempt._complete(CANCELLED)  # wakes its owner
                self._n_cancelled += 1
                self._waiting.remove(attempt)
                self._flush_locked()
            elif stage is SERVED and self._put_back_locked(
                attempt.state,  # type: ignore[arg-type]
                attempt.count,
                attempt.serial,
            ):
                # its owner is woken already, and finds it cancelled
                attempt.error, attempt.stage = copy_error(error), CANCELLED
                self._n_cancelled += 1

    # --- the blocking take ----------------------------------------------------

    def take(
        self,
        num_required: int,
        timeout: float | None = None,
        cancellation: Cancellation | None = None,
    ) -> Any:
        """Wait until at least ``num_required`` gradients are in, then take them all.

        Takes are served in arrival order; a take completes when the counter
        reaches its ``num_required`` while it is at the front of the queue. On
        completion the global step goes up by one and the counter goes to 0.
        A take is all or nothing: if computing its result fails, the round is
        given back (see below), and the error raised.

        Raises:
            DeadlineExceededError: ``timeout`` seconds passed first; the attempt
                is withdrawn and consumes nothing.
            CancelledError: the accumulator was destroyed while waiting.
            NotFoundError: the accumulator was already destroyed.
            KeyboardInterrupt: Ctrl-C (or whatever else a SIGINT handler
                raises) before the result was returned (by the outermost
                public call, when a delivery is open: see interrupts.py): the
                attempt is withdrawn, or, if it was served already, its round goes back:
                undone when nothing has happened since, else merged into the
                current round (the step staying where the takes moved it).
            whatever ``cancellation`` was cancelled with (a run's deadline, a
                closing session): the attempt is withdrawn and consumes nothing
                (one served but not yet collected gives its round back the same way).
        """
        attempt: TakeAttempt[Round] = TakeAttempt(num_required)
        joined(self, attempt)  # given up if the public call fails before returning
        try:
            with self._lock:
                self._check_open_locked()
                if not self._waiting and self._count >= num_required:
                    self._hand_over_locked(attempt, DELIVERED)  # nothing to wait for
                else:
                    wakeup = threading.Event()
                    attempt.callback = wakeup.set
                    self._queue_locked(attempt, cancellation)
            if attempt.stage is not DELIVERED:
                self._wait(attempt, wakeup, timeout)
                self._deliver(attempt)
            return self._finish_round(attempt.state, attempt.count, attempt.serial)  # type: ignore[arg-type]
        except BaseException as error:
            if not self._give_up(attempt, error):
                raise
        # the interrupt is deferred: the round is the take's, and it follows
        return self._finish_round(attempt.state, attempt.count, attempt.serial)  # type: ignore[arg-type]

    @interruptible
    def _wait(
        self, attempt: TakeAttempt[Round], wakeup: threading.Event, timeout: float | None
    ) -> None:
        """Block (without the lock) until ``attempt`` is served or cancelled;
        out of time, withdraw it and raise DeadlineExceededError."""
        deadline = None if timeout is None or math.isinf(timeout) else time.monotonic() + timeout
        try:
            while not attempt.done:
                wait = LOOK_AGAIN
                if deadline is not None:
                    wait = min(wait, max(0.0, deadline - time.monotonic()))
                if wakeup.wait(wait) or deadline is None:
                    continue
                if time.monotonic() < deadline:
                    continue
                with self._lock:
                    if attempt.stage is QUEUED:
                        self._give_back_locked(attempt, TIMED_OUT)
                        raise errors.DeadlineExceededError(
                            None, None, "Timed out waiting for notification"
                        )
        finally:
            _forget_cancellation(attempt)

    def _give_up(self, attempt: TakeAttempt[Round], error: BaseException) -> bool:
        """A take is stopped by ``error``: withdraw its attempt if it still
        waits, or give back the round it was served (counted as interrupted
        unless it was delivered already). If the round cannot go back, it is
        lost with the exception, unless the program asked for interrupts to
        be deferred: then the attempt is delivered, and this says True (the
        take returns its round, and the interrupt follows)."""
        with self._lock:
            state, count, serial = attempt.state, attempt.count, attempt.serial
            served = attempt.stage is SERVED
            if served and not self._put_back_locked(state, count, serial) and holding(error):  # type: ignore[arg-type]
                attempt.stage = DELIVERED
                return True
            # a round its take had collected already is not counted as interrupted
            self._give_back_locked(attempt, None if attempt.stage is DELIVERED else INTERRUPTED)
        return False

    # --- the queue and the hand-over -----------------------------------------

    def _check_open_locked(self) -> None:
        if self._closed:
            raise missing_resource_error(self.label)

    def _hand_over_locked(self, attempt: TakeAttempt[Round], stage: Stage) -> None:
        """Complete the round for ``attempt``: its state, its count and its
        serial are set aside in it, and it moves to ``stage``, in the same
        statement that empties the round and moves the step on."""
        state = self._detach_round_locked()
        step = self._global_step + 1
        step = INT64_MIN if step > INT64_MAX else step
        a, count, serial = attempt, self._count, self._served + 1
        a.state, a.count, a.serial, a.stage, self._round, self._count, self._served, self._global_step = (
            state, count, serial, stage, None, 0, serial, step
        )  # fmt: skip

    def _put_back_possible_locked(self, serial: int) -> bool:
        return not self._closed and serial > self._kept_by_taker

    def _put_back_locked(self, state: Round, count: int, serial: int) -> bool:
        """Give the served round ``serial`` back, once; say whether it went back.

        If nothing has happened since, the round is undone: the counter and
        the step are as before it. Otherwise its raw state is merged into the
        current round (see _merge_round_locked): its gradients count again,
        and the step stays where the takes moved it. It cannot go back once
        its take began dividing it in place (see _keep_for_taker), nor into a
        destroyed accumulator, nor (dense) into a round of another shape."""
        if serial in self._given_back:
            return True
        if not self._put_back_possible_locked(serial):
            return False
        if self._served != serial or self._count:
            if not self._merge_round_locked(state, count, serial):
                return False
        else:
            try:
                self._before_attach_locked(state)
            except NotImplementedError:
                return False
            step = self._global_step - 1
            step = INT64_MAX if step < INT64_MIN else step
            self._round, self._count, self._global_step, self._given_back[serial] = (
                state, count, step, True
            )  # fmt: skip
        self._flush_locked()
        return True

    def _flush_locked(self) -> None:
        """Serve waiting takes from the front for as long as the counter
        allows. An attempt is served first, then leaves the queue, then its
        owner is woken; its owner's wait also looks again now and then,
        so an exception that lands between the hand-over and the wake-up
        costs a delay, not the round."""
        waiting = self._waiting
        while self._front_ready_locked():
            attempt = waiting[0]
            self._hand_over_locked(attempt, SERVED)
            waiting.popleft()
            attempt._complete(SERVED)

    def _front_ready_locked(self) -> bool:
        """Whether the counter allows the front take."""
        waiting = self._queued_locked()
        return bool(waiting) and self._count >= waiting[0].num_required

    def _queued_locked(self) -> collections.deque[TakeAttempt[Round]]:
        """The queue of waiting takes, rid first of attempts at its front
        that no longer wait (an exception cut short their serving or their
        withdrawal)."""
        waiting = self._waiting
        while waiting and waiting[0].stage is not QUEUED:
            waiting.popleft()
        return waiting

    def close(self) -> None:
        """Destroy: every waiting take fails with CancelledError; later use is NotFound."""
        with self._lock:
            if self._closed:
                return
            self._detach_round_locked()
            # each waiting take is failed first, so that a close cut short
            # leaves the rest waiting in a live accumulator, to close again
            for attempt in list(self._waiting):
                if attempt.stage is QUEUED:
                    error = errors.CancelledError(None, None, "TakeGrad operation was cancelled")
                    a, cancelled = attempt, self._n_cancelled + 1
                    a.error, a.stage, self._n_cancelled = error, CANCELLED, cancelled
                    attempt._complete(CANCELLED)  # wakes its owner
            emptied: collections.deque[TakeAttempt[Round]] = collections.deque()
            self._closed, self._count, self._round, self._waiting = True, 0, None, emptied

    @property
    def closed(self) -> bool:
        return self._closed


def _forget_cancellation(attempt: TakeAttempt[Any]) -> None:
    """Unregister ``attempt`` from the cancellation it joined, if any."""
    if attempt.cancellation is not None:
        attempt.cancellation.unregister(attempt.key)
