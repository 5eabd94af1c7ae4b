"""Cancelling waiting takes from outside: a run's deadline, a closing session.

A take registers a callback while it waits; ``cancel(error)`` runs every
registered callback once (outside this object's lock), and a take registered
after that is refused at once. The callback withdraws the attempt, so a
cancelled take consumes nothing.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable

from tf_accum import errors
from tf_accum.context_blocks import ContextBlock

Callback = Callable[[errors.OpError], None]


class Cancellation:
    """A one-shot cancellation signal shared by the takes of one run or session.

    Invariant guarded by ``_lock``: once ``error`` is set it never changes and
    ``_callbacks`` is empty.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callback] = {}
        self._next = 0
        self.error: errors.OpError | None = None

    def register(self, callback: Callback) -> int | None:
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
