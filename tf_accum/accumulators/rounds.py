"""A round's life, shared by every accumulator: its gradients counted, its
hand-over to the takes waiting in order, and its way back.

Invariant guarded by ``_lock``: ``_count`` is the number of gradients merged
into the subclass's round state since the last completed take; the front of
``_waiting`` has ``num_required > _count`` (a flush completes it otherwise,
or, while adds into the round run outside the lock, seals the round for it
or shuts the gate); ``_global_step`` is a wrapping int64; ``_served`` counts
rounds handed over (never down: the last one's serial), ``_given_back`` the
ones given back since; the ``_n_*`` counters are statistics. Methods named
``*_locked`` run with ``_lock`` held.

The changes that must go together (a round and the counters that hand it
over, a take's serving and its wake-up, a lock and the flag that says it is
held) are made in one step with respect to where CPython raises an
asynchronous exception (a Ctrl-C's KeyboardInterrupt): after a call returns,
at a backward jump, at a function's start, and a tracer's at a line's start.
See tf_accum/accumulators/whole.py.
"""

from __future__ import annotations

import collections
import threading
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

from tf_accum import errors
from tf_accum.accumulators.attempts import (
    CANCELLED,
    QUEUED,
    SEALED,
    SERVED,
    WITHDRAWN,
    SealedRound,
    Stage,
    TakeAttempt,
)
from tf_accum.accumulators.missing import missing_resource_error
from tf_accum.accumulators.whole import in_turn, then_mark

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

Round = TypeVar("Round")


class Rounds(ABC, Generic[Round]):
    """Global step, gradient counter, the queue of waiting takes, and the
    hand-over of rounds to them (see the module's docstring)."""

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

    # --- the queue and the hand-over -----------------------------------------

    def _check_open_locked(self) -> None:
        if self._closed:
            raise missing_resource_error(self.label)

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
            # (with no take waiting and the gate open, there is nothing to flush)
            if (self._waiting or self._gate_shut) and not self._closed:
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
