"""A take's round goes back until the public call that took it returns.

A public take (a raw op, a ``take_grad``, a ``Session.run`` that only fetches
what its takes take) runs through :func:`delivered`, which opens a delivery
first, in its ``try``: every take made in the thread while it is open joins it (nested
public calls join the outermost). If an exception (Ctrl-C's
KeyboardInterrupt, say) leaves that call, whatever line of tf_accum it came
from, the call's ``except`` gives each of those takes up: a waiting one is
withdrawn, and a served one gives its round back (see Rounds.cancel), so that
nothing the caller never received is consumed. A call that goes on to return
closes its delivery as its last step inside the ``try`` and keeps its rounds;
nothing runs between that and the return.

Only a round whose result changed the round's own buffers cannot go back
(see Rounds._keep_for_taker). Outside a delivery (a Session.run whose takes
feed other ops, a host's takes) a take is the caller's once it has returned.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()

# What open_delivery returns to a call made inside another public take call.
NESTED: list[tuple[Any, Any]] = []


def open_delivery() -> list[tuple[Any, Any]]:
    """Open this thread's delivery and return its list of takes, or
    :data:`NESTED` if one is open already (the outermost call's)."""
    if getattr(_local, "open", None) is not None:
        return NESTED
    taken: list[tuple[Any, Any]] = []
    _local.open = taken
    return taken


def close_delivery(taken: list[tuple[Any, Any]]) -> None:
    """The call that opened ``taken`` returns: its takes are the caller's."""
    if taken is not NESTED:
        _local.open = None


def give_back(taken: list[tuple[Any, Any]] | None) -> None:
    """The call that opened ``taken`` fails: give up its takes and close it.
    Called in the call's ``except``: the takes count as interrupted when the
    exception being handled is a KeyboardInterrupt, as cancelled otherwise.
    None, or NESTED, does nothing (the outermost call gives back)."""
    if taken is None or taken is NESTED:
        return
    reason = "interrupted" if isinstance(sys.exc_info()[1], KeyboardInterrupt) else "cancelled"
    try:
        for rounds, attempt in taken:
            rounds.cancel(attempt, reason)
    finally:
        if getattr(_local, "open", None) is taken:
            _local.open = None


def delivered(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` as a public take call: in a delivery of its own
    (or the outermost one open), closed as its last step, its takes given back if
    an exception leaves it."""
    taken = None
    try:
        taken = open_delivery()
        result = call(*args, **kwargs)
        close_delivery(taken)  # last: nothing runs between this and the return
        return result
    except BaseException:
        give_back(taken)
        raise


def joined(rounds: Any, attempt: Any) -> None:
    """Enter ``attempt`` (a take attempt of ``rounds``) in this thread's open
    delivery, if any: it is given up if that call fails before returning."""
    taken: list[tuple[Any, Any]] | None = getattr(_local, "open", None)
    if taken is not None:
        taken.append((rounds, attempt))
