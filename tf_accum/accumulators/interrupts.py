"""Keeping accumulator operations whole when Ctrl-C arrives.

Python runs a signal handler in the main thread between two bytecodes, so a
KeyboardInterrupt can surface anywhere: after a gradient was added but before
it was counted, or after a take was served but before it returned. Here a
SIGINT (or ``_thread.interrupt_main()``) that arrives while the main thread is
inside a tf_accum call is held back and raised as soon as the outermost
tf_accum call has returned, at the caller's next step: the call is applied
fully and the interrupt still surfaces. Only a take's wait is interruptible at
once (see :class:`interruptible_wait`): the take is then withdrawn or, if it
had been served, returns its round and the interrupt follows it. A second
Ctrl-C more than ``FORCE_AFTER`` seconds after a held-back one is raised at
once: a call that never returns can still be interrupted.

The protection is a handler for SIGINT that wraps whatever handler was there
(normally ``signal.default_int_handler``); it is installed from the main thread
the first time an accumulator is made or waited on there while SIGINT has a
handler (an ignored SIGINT stays ignored). A handler installed later replaces
it, and with it the protection; a thread that is being profiled
(``sys.setprofile``) gets interrupts at once. Other signals are not deferred.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

# A second Ctrl-C this long after a held-back one is raised at once, so that a
# call stuck for good (a deadlock) can still be interrupted by pressing again.
FORCE_AFTER = 1.0  # seconds

# Modules whose frames are the library's own: an interrupt arriving inside them
# is delivered once the outermost of them has returned to its caller.
_LIBRARY_PREFIXES = (
    "tf_accum.accumulators",
    "tf_accum.raw_ops",
    "tf_accum.compat",
    "tf_accum.resources",
    "tf_accum.graph",
)
# Frames that wait on another process (the distributed table): an interrupt
# there is raised at once, as a take's wait is, or Ctrl-C could not stop a
# remote call that never returns.
_REMOTE_PREFIXES = ("tf_accum.distributed",)


class _State:
    """Touched only by the main thread (signal handlers run there), except ``main``."""

    main = threading.main_thread().ident
    installed = False
    original: Any = None
    pending: int | None = None  # a signal held back until the library returns
    since = 0.0  # when it was held back
    hook: Any = None  # the profile hook that delivers it
    window = False  # the main thread is in an interruptible wait


def in_main_thread() -> bool:
    return threading.get_ident() == _State.main


def install() -> None:
    """Put the deferring SIGINT handler in place (main thread only; once SIGINT
    has a handler: an ignored one is left alone and looked at again next call)."""
    if _State.installed or threading.get_ident() != _State.main:
        return
    try:
        current = signal.getsignal(signal.SIGINT)
        if callable(current):
            if current is not _handler:
                _State.original = current
                signal.signal(signal.SIGINT, _handler)
            _State.installed = True
        # a process started in the background may give SIGINT a handler later,
        # and is then protected from there on
    except (ValueError, OSError):  # pragma: no cover - embedded interpreters
        _State.installed = True


def installed() -> bool:
    """Whether SIGINT is held back inside tf_accum calls now."""
    return signal.getsignal(signal.SIGINT) is _handler


class interruptible_wait:  # noqa: N801 - used like a function, as a context manager
    """Within the block, a SIGINT in the main thread is raised at once (a take's wait)."""

    __slots__ = ("main",)

    def __enter__(self) -> None:
        self.main = threading.get_ident() == _State.main
        if self.main:
            if _State.pending is not None:
                # held back earlier in this call: raise it before waiting for anything
                signum, _State.pending = _State.pending, None
                sys.setprofile(None)
                _raise_now(signum, None)
            _State.window = True

    def __exit__(self, *exc: object) -> None:
        if self.main:
            _State.window = False


def hold_back(error: BaseException) -> None:
    """Deliver a KeyboardInterrupt after the library has returned instead of now.

    Called in the main thread by a take that was served before it saw the
    interrupt: it returns its round, and the interrupt follows.
    """
    if not isinstance(error, KeyboardInterrupt):  # pragma: no cover - callers check
        raise error
    if _State.pending is None and not _defer(signal.SIGINT, sys._getframe(1), remote_ok=True):
        # somebody profiles this thread: raise it again at the next chance rather
        # than lose it
        _thread.interrupt_main()


def _handler(signum: int, frame: FrameType | None) -> Any:
    if _State.pending is not None and sys.getprofile() is not _State.hook:
        _State.pending = None  # its hook was replaced: it will never be delivered
    if _State.pending is not None:
        if time.monotonic() - _State.since < FORCE_AFTER:
            return None  # one is already on its way
        # pressed again long after: the call may never return; give up holding back
        _State.pending = None
        sys.setprofile(None)
        return _raise_now(signum, frame)
    if _State.window:
        return _raise_now(signum, frame)
    if not _defer(signum, frame):
        return _raise_now(signum, frame)
    return None


def _raise_now(signum: int, frame: FrameType | None) -> Any:
    original = _State.original
    if callable(original):
        return original(signum, frame)
    raise KeyboardInterrupt  # pragma: no cover - handler replaced under us


def _library_frame(frame: FrameType) -> bool:
    name = frame.f_globals.get("__name__", "")
    return isinstance(name, str) and name.startswith(_LIBRARY_PREFIXES)


def _defer(signum: int, frame: FrameType | None, *, remote_ok: bool = False) -> bool:
    """Arrange for ``signum`` to be raised once the library's outermost frame has returned.

    Returns False (nothing arranged) when ``frame`` is not inside the library,
    is inside a call to another process (unless ``remote_ok``: that call has
    returned already), or when the thread is being profiled by somebody else.
    """
    outermost = None
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if isinstance(name, str) and name.startswith(_REMOTE_PREFIXES):
            if not remote_ok:
                return False
            outermost = frame
        elif _library_frame(frame):
            outermost = frame
        frame = frame.f_back
    if outermost is None or sys.getprofile() is not None:
        return False
    _State.pending = signum
    _State.since = time.monotonic()
    returned = False

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal returned
        if not returned:
            returned = event == "return" and frame is outermost
            return
        # the first event in the caller after the library returned
        sys.setprofile(None)
        if _State.pending is not None:
            _State.pending = None
            _raise_now(signum, frame)

    _State.hook = hook
    sys.setprofile(hook)
    return True


def _after_fork_in_child() -> None:
    # the forking thread is the child's main thread
    _State.main = threading.get_ident()
    _State.pending = None
    _State.window = False


os.register_at_fork(after_in_child=_after_fork_in_child)
