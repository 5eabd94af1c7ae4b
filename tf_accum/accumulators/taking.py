"""A take's life: queued, waiting without the lock, served, and what an
exception at any point leaves (see :meth:`Takes._give_up`).

Interrupts: tf_accum installs no signal handler, profile or trace function.
A KeyboardInterrupt (or any exception a SIGINT handler raises, or one injected
into a thread) surfaces wherever Python raises it; the lock is only ever taken
by ``with`` blocks, and a take that an exception stops is given up in one
place: withdrawn if it still waited, its round given back if it had been
served (see Rounds._put_back_locked).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from tf_accum import errors
from tf_accum.accumulators.attempts import (
    CANCELLED,
    CLAIMED,
    QUEUED,
    RETURNED,
    SEALED,
    SERVED,
    WITHDRAWN,
    TakeAttempt,
    copy_error,
)
from tf_accum.accumulators.cancellation import Cancellation
from tf_accum.accumulators.interrupts import holding, interruptible
from tf_accum.accumulators.rounds import Round, Rounds

# How often a take's cleanup is begun again when interrupted itself; only
# asynchronous exceptions (a Ctrl-C pressed again) come back each time.
_GIVE_UP_TRIES = 10


class Takes(Rounds[Round]):
    """Takes on the rounds: :meth:`take`, and its cancellation from outside."""

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
        given back (see below), and the error raised.

        Raises:
            DeadlineExceededError: ``timeout`` seconds passed first; the attempt
                is withdrawn and consumes nothing.
            CancelledError: the accumulator was destroyed while waiting.
            NotFoundError: the accumulator was already destroyed.
            KeyboardInterrupt: Ctrl-C while waiting (or whatever else a SIGINT
                handler raises): the attempt is withdrawn, or, if it was served
                at that moment, its round goes back: undone when nothing has
                happened since, else merged into the current round (the step
                staying where the takes moved it).
            whatever ``cancellation`` was cancelled with (a run's deadline, a
                closing session): the attempt is withdrawn and consumes nothing
                (one served but not yet claimed by its thread gives its round
                back the same way).
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
        waits, or give back the round that it was served (see
        _put_back_locked; if it cannot go back, it is lost with the exception,
        unless the program asked for interrupts to be deferred: then the round
        is returned here for the take to return, and the interrupt follows).
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
