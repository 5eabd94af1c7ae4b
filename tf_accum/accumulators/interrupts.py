"""What a Ctrl-C inside a tf_accum call leaves behind: a take's round goes
back unless the public call that took it returns; and, opt-in, Ctrl-C
delivered after a tf_accum call has returned, not inside it.

By default tf_accum installs nothing (see the README, "Interrupts, fork and
pickling"), and a KeyboardInterrupt surfaces wherever Python raises it,
leaving no apply half done. A public take (a raw op, a ``take_grad``, a
``Session.run`` that only fetches what its takes take) runs through
:func:`delivered`, which opens a delivery first, in its ``try``: every take
made in the thread while it is open joins it (:func:`joined`; nested public
calls join the outermost). If an exception leaves that call, whatever line of
tf_accum it came from, the call's ``except`` gives each of those takes up: a
waiting one is withdrawn, and a served one gives its round back (see
Rounds.cancel), so that nothing the caller never received is consumed. A call
that goes on to return closes its delivery as its last step inside the
``try`` and keeps its rounds; nothing runs between that and the return. Only
a round whose result changed the round's own buffers cannot go back (see
Rounds._keep_for_taker). Outside a delivery (a Session.run whose takes feed
other ops, a host's takes) a take is the caller's once it has returned.

An interrupt that lands once the call has returned, before the program stored
its result (or while a MEAN of 1 MB or more divides its round in place),
loses that round, as in TensorFlow. A program that would rather not lose
those asks for the deferral explicitly, around the code that calls tf_accum::

    from tf_accum.accumulators.interrupts import deferred_interrupts

    with deferred_interrupts():
        while True:
            results.append(acc.take_grad(1))

Within the block (main thread only), SIGINT's handler is replaced by one that
calls the handler it found (normally ``signal.default_int_handler``), at once
when the signal arrives outside tf_accum or while a take, a Session.run or a
call to an accumulator host (the distributed table) waits, and otherwise once
the outermost tf_accum call has returned and the caller has stored its
result: at the caller's next call, or once the call after it has returned
(as ``results.append(...)``). A take whose wait the interrupt stopped just as
it was served, when its round cannot go back, returns the round, and the
interrupt follows in the same way. For that short stretch a profile function
is installed; if one is installed already (cProfile, a tracer's), nothing is
deferred, and one that ``sys.getprofile`` cannot see (yappi's) would be
replaced: do not combine them. A second Ctrl-C more than ``FORCE_AFTER``
seconds after a deferred one is delivered at once, so that a call that never
returns can still be interrupted. The handler found is put back when the
block ends (unless the program replaced it inside), and a deferred interrupt
still pending is delivered then.
"""

from __future__ import annotations

import contextlib
import inspect
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import CodeType, FrameType
from typing import Any, TypeVar

T = TypeVar("T")
Function = TypeVar("Function", bound=Callable[..., Any])

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


# A second Ctrl-C this long after a deferred one is delivered at once.
FORCE_AFTER = 1.0  # seconds

_PACKAGE = "tf_accum."
# Parts of the package that run a program's own loop rather than a call.
_NOT_CALLS = ("tf_accum.examples", "tf_accum.__main__")
# Code that waits for other threads or processes: an interrupt there is
# delivered at once (a take then withdraws or puts its round back).
_WAITS: set[CodeType] = set()


def interruptible(function: Function) -> Function:
    """Mark ``function`` as a wait that Ctrl-C interrupts at once; returns it."""
    _WAITS.add(function.__code__)
    return function


class _Deferral:
    """The state of one ``deferred_interrupts`` block (main thread only)."""

    def __init__(self, found: Callable[[int, FrameType | None], Any]) -> None:
        self.found = found
        self.pending = False
        self.since = 0.0
        self.hook: Callable[[FrameType, str, Any], Any] | None = None
        self.error: BaseException | None = None  # raised already once, to raise again

    def handler(self, signum: int, frame: FrameType | None) -> Any:
        if self.pending:
            if time.monotonic() - self.since < FORCE_AFTER:
                return None  # one is already on its way
            self._drop_hook()  # pressed again long after: the call may never return
            return self.found(signum, frame)
        outermost = _outermost_call(frame)
        if outermost is None or not self.defer(signum, outermost, None):
            return self.found(signum, frame)
        return None

    def defer(self, signum: int, outermost: FrameType, error: BaseException | None) -> bool:
        """Deliver ``signum`` (or raise ``error`` again) once ``outermost`` has
        returned and its caller made its next call; False if it cannot be
        (somebody else profiles the thread)."""
        if sys.getprofile() is not None:
            return False
        self.pending, self.since, self.error = True, time.monotonic(), error
        returned = False

        def hook(event_frame: FrameType, event: str, arg: Any) -> None:
            nonlocal returned
            if event == "call" and event_frame.f_code in _WAITS:
                # the call is about to wait, maybe for ever (a run's takes): an
                # interrupt held for its return would never come, so it comes now
                self.deliver(signum, event_frame)
            elif not returned:
                returned = event == "return" and event_frame is outermost
            elif event in ("call", "c_return", "c_exception"):
                # the caller has its result: raise where Python would have
                self.deliver(signum, event_frame)

        self.hook = hook
        sys.setprofile(hook)
        return True

    def deliver(self, signum: int, frame: FrameType | None) -> None:
        if self.pending:
            error, self.error = self.error, None
            self._drop_hook()
            if error is not None:
                raise error
            self.found(signum, frame)

    def _drop_hook(self) -> None:
        self.pending = False
        if sys.getprofile() is self.hook:
            sys.setprofile(None)
        self.hook = None


_active: _Deferral | None = None  # the deferral of the block running now


def holding(error: BaseException) -> bool:
    """Whether ``error``, an interrupt that stopped a take already served,
    is deferred: in a ``deferred_interrupts`` block, the take then returns its
    round and ``error`` is raised again once the call has returned."""
    deferral = _active
    if (
        deferral is None
        or deferral.pending
        or not isinstance(error, KeyboardInterrupt)
        or threading.current_thread() is not threading.main_thread()
    ):
        return False
    outermost = _outermost_call(inspect.currentframe(), waits=False)
    return outermost is not None and deferral.defer(signal.SIGINT, outermost, error)


def _outermost_call(frame: FrameType | None, waits: bool = True) -> FrameType | None:
    """The outermost tf_accum frame on ``frame``'s stack (code of the program's
    own that tf_accum called, a logging handler say, counts as inside the
    call), or None when there is none, or (``waits``) one is waiting (see
    :func:`interruptible`)."""
    outermost = None
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if isinstance(name, str) and name.startswith(_PACKAGE) and not name.startswith(_NOT_CALLS):
            if waits and frame.f_code in _WAITS:
                return None
            outermost = frame
        frame = frame.f_back
    return outermost


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Deliver a Ctrl-C that arrives inside a tf_accum call once the call has
    returned (see the module's docstring).

    Raises:
        RuntimeError: not in the main thread (only it receives signals).
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("deferred_interrupts() works in the main thread only")
    found = signal.getsignal(signal.SIGINT)
    if not callable(found):  # ignored, or not handled by Python: nothing to defer
        yield
        return
    global _active
    deferral, outer = _Deferral(found), _active
    signal.signal(signal.SIGINT, deferral.handler)
    _active = deferral
    try:
        yield
    finally:
        _active = outer
        if signal.getsignal(signal.SIGINT) == deferral.handler:
            signal.signal(signal.SIGINT, found)
        deferral.deliver(signal.SIGINT, None)
