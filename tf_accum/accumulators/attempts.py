"""A take attempt: a request for one round, queued in its accumulator's one
deque of attempts, completed at once or later.

An attempt moves through one :class:`Stage` at a time, always under its
accumulator's lock: queued, then served, then delivered to its owner; or withdrawn by its
owner (out of time, interrupted, given up), cancelled (destroyed, cancelled
from outside), or, once served, returned (its round went back if it could).

Whoever completes it (serves or cancels it) calls its ``callback``, with the
accumulator's lock held: the callback must be short, must not raise nor call
the accumulator, and must do no harm when called again (an Event's ``set``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tf_accum import errors

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
        self.cancellation: Any = None  # the Cancellation it is registered with, if any
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
