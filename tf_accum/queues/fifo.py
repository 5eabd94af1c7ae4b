"""One first-in first-out queue of tuples of arrays, in process: TensorFlow's FIFOQueue.

Nothing waits inside the queue: an enqueue, dequeue or close that cannot
complete at once joins its line (enqueues and closes in one, dequeues in
another) as an attempt, and every change runs :meth:`FIFOQueue._flush_locked`,
which completes whatever attempts can now complete, front first. The waiting
thread blocks on its attempt's ``wakeup`` with the lock released, and
withdraws the attempt in ``finally`` if it stops waiting (out of time, an
outside cancellation, Ctrl-C).

As in TensorFlow: enqueue attempts complete in order, an enqueue of many
elements adding them as room appears; a plain close is an attempt in the same
line, so it takes effect after the enqueues already waiting; a dequeue of
``n`` takes elements as they come while at the front of its line. A
withdrawn dequeue puts what it took back at the front (it was the front
attempt, so no other dequeue took anything since): it consumes nothing
(docs/departures.md T28). A withdrawn enqueue leaves the elements it has
added.
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.attempts import Cancellation, copy_error
from tf_accum.accumulators.interrupts import interruptible
from tf_accum.dtypes import DType
from tf_accum.shapes import DeclaredShape, kernel_text

Array = np.ndarray[Any, Any]
Element = tuple[Array, ...]

# How TensorFlow names the queues' resource type in its messages.
_TYPE_NAME = "N10tensorflow14QueueInterfaceE"

# A wait says what it waits for after this long, then again after twice as long, ...
REPORT_AFTER = 60.0  # seconds

_log = logging.getLogger("tf_accum")


def missing_queue_error(label: str) -> errors.NotFoundError:
    """The error for using a queue that was destroyed."""
    return errors.NotFoundError(None, None, f"Resource {label}/{_TYPE_NAME} does not exist.")


@dataclass(frozen=True)
class QueueSpec:
    """A queue's attributes, fixed at creation: its components' dtypes and
    shapes (``shapes`` is empty when none were given), and its capacity (a
    negative one is no bound)."""

    component_types: tuple[DType, ...]
    shapes: tuple[DeclaredShape, ...]
    capacity: int
    kind: str = "FIFOQueue"

    def describe(self) -> str:
        types = ", ".join(t.name for t in self.component_types)
        shapes = ", ".join(kernel_text(s) for s in self.shapes) if self.shapes else "any"
        return f"a FIFOQueue of ({types}), shapes ({shapes}), capacity {self.capacity}"


class _Attempt:
    """An enqueue, a close or a dequeue waiting in its line.

    ``wakeup`` is a lock created held: whoever completes the attempt (under
    the queue's lock, exactly once) releases it.
    """

    __slots__ = ("kind", "elements", "n", "allow_smaller", "taken", "wakeup", "done", "error")

    def __init__(self, kind: str, elements: list[Element] | None = None, n: int = 0) -> None:
        self.kind = kind  # "enqueue", "close" or "dequeue"
        self.elements = collections.deque(elements or ())  # still to add
        self.n = n
        self.allow_smaller = False
        self.taken: list[Element] = []
        self.wakeup = threading.Lock()
        self.wakeup.acquire()
        self.done = False
        self.error: errors.OpError | None = None


class FIFOQueue:
    """A bounded first-in first-out queue of elements (tuples of arrays).

    Invariant guarded by ``_lock``: ``_items`` holds the elements in order; an
    attempt is in its line exactly while it is not ``done``; only the front
    dequeue attempt holds taken elements; while ``_destroyed`` both lines are empty.
    """

    def __init__(self, spec: QueueSpec, label: str) -> None:
        self.spec = spec
        self.label = label
        self.name = label.split("/", 1)[-1]
        self._lock = threading.Lock()
        self._items: collections.deque[Element] = collections.deque()
        self._enqueuers: collections.deque[_Attempt] = collections.deque()
        self._dequeuers: collections.deque[_Attempt] = collections.deque()
        self._closed = False
        self._destroyed = False

    # --- what the ops call ----------------------------------------------------------

    def size(self) -> int:
        with self._lock:
            self._check_live_locked()
            return len(self._items)

    def is_closed(self) -> bool:
        with self._lock:
            self._check_live_locked()
            return self._closed

    def enqueue(
        self,
        elements: list[Element],
        timeout: float | None = None,
        cancellation: Cancellation | None = None,
    ) -> None:
        """Add ``elements`` at the back, waiting for room as needed.

        Raises:
            CancelledError: the queue is closed ("... is closed."), or the
                wait was cancelled (a close with cancel_pending_enqueues, a
                closing session, the queue destroyed).
            DeadlineExceededError: ``timeout`` passed first (the elements
                added by then stay).
        """
        with self._lock:
            self._check_live_locked()
            if self._closed:
                raise errors.CancelledError(None, None, f"FIFOQueue '{self.name}' is closed.")
            attempt = _Attempt("enqueue", elements)
            self._enqueuers.append(attempt)
            self._flush_locked()
        self._wait(attempt, timeout, cancellation)

    def dequeue(
        self,
        n: int,
        allow_smaller: bool = False,
        timeout: float | None = None,
        cancellation: Cancellation | None = None,
    ) -> list[Element]:
        """Take ``n`` elements from the front, waiting for them as needed.

        With ``allow_smaller`` (DequeueUpTo), a closed queue gives what it
        has, if anything.

        Raises:
            OutOfRangeError: the queue is closed with too few elements.
            CancelledError: the wait was cancelled (a closing session, the
                queue destroyed); nothing is consumed.
            DeadlineExceededError: ``timeout`` passed first; nothing is consumed.
        """
        attempt = _Attempt("dequeue", n=n)
        attempt.allow_smaller = allow_smaller
        with self._lock:
            self._check_live_locked()
            self._dequeuers.append(attempt)
            self._flush_locked()
        self._wait(attempt, timeout, cancellation)
        return attempt.taken

    def close_queue(
        self,
        cancel_pending_enqueues: bool = False,
        timeout: float | None = None,
        cancellation: Cancellation | None = None,
    ) -> None:
        """Refuse later enqueues; dequeues that cannot be served fail from then on.

        A plain close takes effect after the enqueues waiting already (it
        waits behind them); closing a closed queue so is CancelledError
        "Queue '...' is already closed.". With ``cancel_pending_enqueues``
        those enqueues fail with CancelledError and the queue closes at once.
        """
        with self._lock:
            self._check_live_locked()
            if cancel_pending_enqueues:
                while self._enqueuers:
                    self._finish_locked(self._enqueuers.popleft(), _cancelled_error("enqueue"))
                self._closed = True
                self._flush_locked()
                return
            attempt = _Attempt("close")
            self._enqueuers.append(attempt)
            self._flush_locked()
        self._wait(attempt, timeout, cancellation)

    def close(self) -> None:
        """Destroy (what a resource table does to what it holds): every
        waiting attempt fails with CancelledError; later use is NotFoundError."""
        with self._lock:
            if self._destroyed:
                return
            self._destroyed = True
            for line in (self._enqueuers, self._dequeuers):
                while line:
                    attempt = line.popleft()
                    attempt.taken = []
                    self._finish_locked(attempt, _cancelled_error(attempt.kind))
            self._items.clear()

    # --- the lines ----------------------------------------------------------------

    def _check_live_locked(self) -> None:
        if self._destroyed:
            raise missing_queue_error(self.label)

    def _room_locked(self) -> bool:
        return self.spec.capacity < 0 or len(self._items) < self.spec.capacity

    def _flush_locked(self) -> None:
        """Complete every attempt that can complete now, front first, until none can."""
        progress = True
        while progress:
            progress = self._flush_enqueuers_locked() | self._flush_dequeuers_locked()

    def _flush_enqueuers_locked(self) -> bool:
        progress = False
        while self._enqueuers:
            head = self._enqueuers[0]
            if head.kind == "close":
                error = None
                if self._closed:
                    error = errors.CancelledError(
                        None, None, f"Queue '{self.name}' is already closed."
                    )
                self._closed = True
            else:
                while head.elements and self._room_locked():
                    self._items.append(head.elements.popleft())
                    progress = True
                if head.elements:
                    return progress
                error = None
            self._enqueuers.popleft()
            self._finish_locked(head, error)
            progress = True
        return progress

    def _flush_dequeuers_locked(self) -> bool:
        progress = False
        while self._dequeuers:
            head = self._dequeuers[0]
            while len(head.taken) < head.n and self._items:
                head.taken.append(self._items.popleft())
                progress = True
            error = None
            if len(head.taken) < head.n:
                if not self._closed:
                    return progress
                if not (head.allow_smaller and head.taken):
                    self._put_back_locked(head)
                    error = errors.OutOfRangeError(
                        None,
                        None,
                        f"FIFOQueue '{self.name}' is closed and has insufficient elements "
                        f"(requested {head.n}, current size {len(self._items)})",
                    )
            self._dequeuers.popleft()
            self._finish_locked(head, error)
            progress = True
        return progress

    def _put_back_locked(self, attempt: _Attempt) -> None:
        self._items.extendleft(reversed(attempt.taken))
        attempt.taken = []

    @staticmethod
    def _finish_locked(attempt: _Attempt, error: errors.OpError | None) -> None:
        attempt.done = True
        attempt.error = error
        attempt.wakeup.release()

    # --- waiting --------------------------------------------------------------------

    @interruptible
    def _wait(
        self, attempt: _Attempt, timeout: float | None, cancellation: Cancellation | None
    ) -> None:
        """Block until ``attempt`` completes; raise its error. Out of time,
        cancelled or interrupted, it is withdrawn (see the module's docstring)."""
        key = None
        try:
            if not attempt.done and cancellation is not None:
                key = cancellation.register(lambda error: self._withdraw(attempt, error))
                if key is None:
                    assert cancellation.error is not None
                    self._withdraw(attempt, cancellation.error)
            start = time.monotonic()
            deadline = None
            if timeout is not None and not math.isinf(timeout):
                deadline = start + timeout
            report = start + REPORT_AFTER
            while not attempt.done:
                wait = max(0.0, report - time.monotonic())
                if deadline is not None:
                    wait = min(wait, max(0.0, deadline - time.monotonic()))
                if attempt.wakeup.acquire(True, wait):
                    break
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    self._withdraw(attempt, _deadline_error())
                elif now >= report:
                    self._report(attempt, now - start)
                    report = now + (now - start)
        finally:
            if cancellation is not None and key is not None:
                cancellation.unregister(key)
            if not attempt.done:
                # stopped by an exception (Ctrl-C): leave the line, consuming nothing
                self._withdraw(attempt, _cancelled_error(attempt.kind))
        if attempt.error is not None:
            raise copy_error(attempt.error)

    def _report(self, attempt: _Attempt, waited: float) -> None:
        """Log what a long wait waits for (read under the lock, logged outside it)."""
        with self._lock:
            if attempt.kind == "dequeue":
                what = f"a dequeue of {attempt.n} element(s) ({len(attempt.taken)} taken so far)"
            elif attempt.kind == "close":
                what = "a close (behind the enqueues waiting before it)"
            else:
                what = f"an enqueue ({len(attempt.elements)} element(s) still to add)"
            state = (
                f"it holds {len(self._items)} element(s), capacity {self.spec.capacity}, "
                f"{'closed' if self._closed else 'open'}; {len(self._enqueuers)} enqueue(s) "
                f"and {len(self._dequeuers)} dequeue(s) wait"
            )
        _log.warning("FIFOQueue '%s': %s has waited %.0f s; %s", self.name, what, waited, state)

    def _withdraw(self, attempt: _Attempt, error: errors.OpError) -> None:
        """Take ``attempt`` out of its line unless it completed already; a
        dequeue's elements go back to the front. Then serve who can be."""
        with self._lock:
            if attempt.done:
                return
            line = self._dequeuers if attempt.kind == "dequeue" else self._enqueuers
            line.remove(attempt)
            if attempt.kind == "dequeue":
                self._put_back_locked(attempt)
            if isinstance(error, errors.CancelledError):
                # a closing session's or a failed sibling's: the queue's own words
                error = _cancelled_error(attempt.kind)
            self._finish_locked(attempt, error)
            self._flush_locked()

    def waiting(self) -> tuple[int, int]:
        """The enqueue (and close) attempts and the dequeue attempts waiting now."""
        with self._lock:
            return len(self._enqueuers), len(self._dequeuers)

    def num_waiting(self) -> int:
        """Every attempt waiting now (as an accumulator counts its waiting takes)."""
        enqueues, dequeues = self.waiting()
        return enqueues + dequeues


def _cancelled_error(kind: str) -> errors.CancelledError:
    what = "Dequeue" if kind == "dequeue" else "Enqueue"
    return errors.CancelledError(None, None, f"{what} operation was cancelled")


def _deadline_error() -> errors.DeadlineExceededError:
    return errors.DeadlineExceededError(None, None, "Timed out waiting for notification")
