"""A take's place in an accumulator's queue: its attempt, and where it stands.

An attempt moves through one :class:`Stage` at a time, always under its
accumulator's lock: queued, then served (sealed first when adds into its round
still run outside the lock), then claimed by its waiting thread; or withdrawn
(out of time, interrupted), cancelled (destroyed, cancelled from outside), or,
once served, returned (given up by an exception: its round went back if it
could).
"""

from __future__ import annotations

import enum
import threading
from typing import Any, Generic, TypeVar

from tf_accum import errors

Round = TypeVar("Round")


class Stage(enum.Enum):
    """Where a take attempt stands; it changes only under the accumulator's lock."""

    QUEUED = "queued"  # waiting in the queue
    SEALED = "sealed"  # committed to a round that adds outside the lock still land in
    SERVED = "served"  # its round is handed over; its waiter has not picked it up yet
    CLAIMED = "claimed"  # its waiter picked its round up: from here it is the take's
    WITHDRAWN = "withdrawn"  # left the queue unserved (out of time, interrupted)
    CANCELLED = "cancelled"  # failed with ``error`` (destroyed, cancelled from outside)
    RETURNED = "returned"  # served, then given up: its round went back if it could


QUEUED, SEALED, SERVED, CLAIMED, WITHDRAWN, CANCELLED, RETURNED = Stage


class TakeAttempt(Generic[Round]):
    """A take waiting in the queue.

    ``wakeup`` is a lock created held; whoever serves or cancels the attempt
    (under the accumulator's lock, exactly once) releases it, and the waiting
    thread blocks acquiring it, with the accumulator's lock released.
    """

    __slots__ = ("num_required", "wakeup", "stage", "outcome", "count", "error", "serial", "key")

    def __init__(self, num_required: int) -> None:
        self.num_required = num_required
        self.wakeup = threading.Lock()
        self.wakeup.acquire()
        self.stage = QUEUED
        self.outcome: Round | None = None
        self.count = 0
        self.error: errors.OpError | None = None
        self.serial = 0  # takes served so far, once this one is
        self.key: int | None = None  # its registration with a cancellation


class SealedRound:
    """A round handed to its take while adds into it still run outside the lock.

    The take was ready on the gradients already counted, so it is committed
    at once (the global step goes up, the next round starts, and applies go on
    into it); it returns once ``in_flight`` reaches 0, with every gradient that
    landed (``count``). ``round`` tells its adds from the next round's.
    """

    __slots__ = ("attempt", "round", "in_flight", "count", "outcome", "serial")

    def __init__(self, attempt: TakeAttempt[Any], round: int, in_flight: int, count: int) -> None:
        self.attempt = attempt
        self.round = round
        self.in_flight = in_flight
        self.count = count
        self.outcome: Any = None  # the round's state, once handed over
        self.serial = 0  # its serial, once handed over


def copy_error(error: errors.OpError) -> errors.OpError:
    """A fresh exception per raiser: one instance raised in several threads shares a traceback."""
    copy: errors.OpError = type(error)(error.node_def, error.op, error.message)  # type: ignore[call-arg]
    return copy
