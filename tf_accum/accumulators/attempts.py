"""Take attempts, and cancelling them from outside.

A take attempt is a request for one round, queued in its accumulator's one
deque of attempts, completed at once or later. It moves through one
:class:`Stage` at a time, always under its accumulator's lock: queued, then
served, then delivered to its owner; or withdrawn by its owner (out of time,
interrupted, given up), cancelled (destroyed, cancelled from outside), or,
once served, returned (its round went back if it could).

Whoever completes it (serves or cancels it) calls its ``callback``, with the
accumulator's lock held: the callback must be short, must not raise nor call
the accumulator, and must do no harm when called again (an Event's ``set``).

A :class:`Cancellation` cancels the waiting takes (and queue dequeues) of
one run or session from outside: a run's deadline, a closing session. A take
registers a callback while it waits; ``cancel(error)`` runs every registered
callback once (outside the cancellation's lock), and a take registered after
that is refused at once. The callback withdraws the attempt, so a cancelled
take consumes nothing.
"""

from __future__ import annotations

import contextvars
import enum
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tf_accum import errors
from tf_accum.context_blocks import ContextBlock

Round = TypeVar("Round")


class Stage(enum.Enum):
    """Where a take attempt stands; it changes only under the accumulator's lock."""

    QUEUED = "queued"  # made, or waiting in the queue
    SERVED = "served"  # its round is set aside for it; its owner has not collected it
    DELIVERED = "delivered"  # its owner collected its round: from here it is the take's
    WITHDRAWN = "withdrawn"  # left unserved by its owner (out of time, interrupted)
    CANCELLED = "cancelled"  # failed with ``error`` (destroyed, cancelled from outside)
    RETURNED = "returned"  # served, then given up: its round went back if it could


QUEUED, SERVED, DELIVERED, WITHDRAWN, CANCELLED, RETURNED = Stage


class TakeAttempt(Generic[Round]):
    """One take: how many gradients it needs, where it stands, and, once
    served, its round (``state``, ``count`` gradients, the ``serial``-th round
    served)."""

    __slots__ = (
        "num_required",
        "callback",
        "stage",
        "state",
        "count",
        "serial",
        "error",
        "cancellation",
        "key",
    )

    def __init__(self, num_required: int, callback: Callable[[], Any] | None = None) -> None:
        self.num_required = num_required
        self.callback = callback
        self.stage = QUEUED
        self.state: Round | None = None
        self.count = 0
        self.serial = 0
        self.error: errors.OpError | None = None
        self.cancellation: Cancellation | None = None  # the one it is registered with, if any
        self.key: int | None = None  # its registration there

    @property
    def done(self) -> bool:
        """Whether it is served or over (no longer waits for a round)."""
        return self.stage is not QUEUED

    def _complete(self, stage: Stage) -> None:
        self.stage = stage
        callback = self.callback
        if callback is not None:
            callback()


def copy_error(error: errors.OpError, more: str = "") -> errors.OpError:
    """A fresh exception per raiser, its message followed by ``more``: one
    instance raised in several threads shares a traceback."""
    message = error.message + more
    copy: errors.OpError = type(error)(error.node_def, error.op, message)  # type: ignore[call-arg]
    return copy


CancelCallback = Callable[[errors.OpError], None]


class Cancellation:
    """A one-shot cancellation signal shared by the takes of one run or session.

    Invariant guarded by ``_lock``: once ``error`` is set it never changes and
    ``_callbacks`` is empty.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: dict[int, CancelCallback] = {}
        self._next = 0
        self.error: errors.OpError | None = None

    def register(self, callback: CancelCallback) -> int | None:
        """Call ``callback(error)`` on cancellation; returns a key, or None if already cancelled."""
        with self._lock:
            if self.error is not None:
                return None
            self._next += 1
            self._callbacks[self._next] = callback
            return self._next

    def unregister(self, key: int | None) -> None:
        if key is None:
            return
        with self._lock:
            self._callbacks.pop(key, None)

    def cancel(self, error: errors.OpError) -> bool:
        """Cancel once with ``error``; returns False if it was already cancelled.

        Must not be called with any accumulator's lock held: the callbacks take it.
        """
        with self._lock:
            if self.error is not None:
                return False
            self.error = error
            callbacks, self._callbacks = list(self._callbacks.values()), {}
        for callback in callbacks:
            callback(error)
        return True

    @property
    def cancelled(self) -> bool:
        return self.error is not None


_current: contextvars.ContextVar[Cancellation | None] = contextvars.ContextVar(
    "tf_accum_cancellation", default=None
)


def current_cancellation() -> Cancellation | None:
    """The cancellation that takes started here join (a session run's), if any."""
    return _current.get()


def cancelled_by(cancellation: Cancellation) -> ContextBlock[Cancellation]:
    """Takes started in the block (and in threads started with its context) join ``cancellation``."""
    return ContextBlock(_current, cancellation)
