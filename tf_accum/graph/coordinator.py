"""``Coordinator``: stopping a set of threads together, and reporting the first failure.

Worker threads loop ``while not coord.should_stop()``; any of them may call
``request_stop()`` (with the exception that made it stop); the main thread
calls ``join(threads)``, which waits for the stop and the threads, then raises
the first exception reported, as TensorFlow's ``tf.train.Coordinator`` does.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any

from tf_accum import errors

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]

# How often join() looks again whether its threads ended, while no stop was
# requested (a thread's end has no event to wait on).
_JOIN_POLL = 0.05


class Coordinator:
    """Coordinates the stop of threads.

    Args:
        clean_stop_exception_types: exception types that stop the threads
            without being an error: ``request_stop(ex)`` with one of them is
            ``request_stop()``, and ``join`` does not raise it. Default:
            ``(errors.OutOfRangeError,)``, what an exhausted input raises.
    """

    def __init__(self, clean_stop_exception_types: Iterable[type[BaseException]] | None = None):
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info: ExcInfo | None = None
        self._joined = False
        self._registered: set[threading.Thread] = set()

    def _reported(self, ex: Any) -> ExcInfo | BaseException | None:
        error = ex[1] if isinstance(ex, tuple) and len(ex) == 3 else ex
        if isinstance(error, self._clean_stop_exception_types):
            return None
        reported: ExcInfo | BaseException | None = ex
        return reported

    def request_stop(self, ex: Any = None) -> None:
        """Ask every thread to stop; ``should_stop()`` is True from now on.

        Args:
            ex: None, or the exception that made the caller stop: an
                exception or a ``sys.exc_info()`` tuple. Only the first one
                reported is kept, for ``join`` to raise.

        Raises:
            ``ex`` itself, when given after ``join()`` returned or raised
            (nobody would see it otherwise); a clean-stop type is not raised.
        """
        with self._lock:
            reported = self._reported(ex)
            if self._joined and reported is not None:
                raise reported[1] if isinstance(reported, tuple) else reported
            if self._stop_event.is_set():
                return
            if reported is not None and self._exc_info is None:
                self._exc_info = _exc_info_of(reported)
            self._stop_event.set()

    def clear_stop(self) -> None:
        """Forget the stop request and the exception, so the threads may run again."""
        with self._lock:
            self._joined = False
            self._exc_info = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        """Whether a stop was requested."""
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self) -> Iterator[None]:
        """Inside the block, any exception is reported with ``request_stop`` and swallowed::

        with coord.stop_on_exception():
            while not coord.should_stop():
                ...
        """
        try:
            yield
        except BaseException:  # noqa: BLE001 - reported to join(), which raises it
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Wait until a stop is requested (at most ``timeout`` seconds); whether it was."""
        return self._stop_event.wait(timeout)

    def register_thread(self, thread: threading.Thread) -> None:
        """Have ``join()`` wait for ``thread`` too."""
        with self._lock:
            self._registered.add(thread)

    def join(
        self,
        threads: Iterable[threading.Thread] | None = None,
        stop_grace_period_secs: float = 120,
        ignore_live_threads: bool = False,
    ) -> None:
        """Wait until the threads end or a stop is requested; after a stop, give
        the threads ``stop_grace_period_secs`` to end.

        Args:
            threads: the threads to wait for, besides the registered ones.
            stop_grace_period_secs: how long the threads may take to end after
                the stop request.
            ignore_live_threads: do not raise for threads still running then.

        Raises:
            the first exception given to ``request_stop`` (not of a clean-stop
            type), whatever the threads do;
            RuntimeError: threads still running after the grace period (unless
                ``ignore_live_threads``), naming them.
        """
        with self._lock:
            waited = list(self._registered.union(threads or ()))
        while any(t.is_alive() for t in waited) and not self.wait_for_stop(_JOIN_POLL):
            pass
        give_up = time.monotonic() + max(0.0, stop_grace_period_secs)
        for thread in waited:
            thread.join(max(0.0, give_up - time.monotonic()))
        stragglers = [t.name for t in waited if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered = set()
            if self._exc_info is not None:
                raise self._exc_info[1]
            if stragglers and not ignore_live_threads:
                raise RuntimeError(
                    f"Coordinator stopped with threads still running: {' '.join(stragglers)}"
                )

    @property
    def joined(self) -> bool:
        """Whether ``join()`` has returned (or raised)."""
        return self._joined

    def raise_requested_exception(self) -> None:
        """Raise the exception given to ``request_stop``, if there is one."""
        with self._lock:
            if self._exc_info is not None:
                raise self._exc_info[1]

    def loop(
        self,
        timer_interval_secs: float | None,
        target: Callable[..., Any],
        args: Iterable[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> LooperThread:
        """``LooperThread.loop(self, ...)`` (tf_accum's shortcut; TensorFlow's
        Coordinator has no ``loop``)."""
        return LooperThread.loop(self, timer_interval_secs, target, args=args, kwargs=kwargs)


class LooperThread(threading.Thread):
    """A daemon thread that calls ``run_loop()`` (by default ``target(*args, **kwargs)``)
    until its coordinator is asked to stop.

    With ``timer_interval_secs`` None the calls follow each other at once;
    with a number they start at the boundaries ``t0``, ``t0 + interval``,
    ``t0 + 2 * interval``, ... (a call that overruns is followed by the
    boundaries it missed at once). The stop is checked before each call. An
    exception of a call is reported to the coordinator (``request_stop``) and
    ends the thread. ``start_loop()`` and ``stop_loop()`` run once before the
    first and after the last call; subclasses may override all three. The
    thread is registered with the coordinator, so ``coord.join()`` waits for it.

    Args:
        coord: the Coordinator.
        timer_interval_secs: seconds between calls, or None.
        target: what ``run_loop`` calls (optional in a subclass).
        args, kwargs: ``target``'s arguments.

    Raises:
        ValueError: ``coord`` is not a Coordinator, or ``args``/``kwargs``
            without ``target``.
    """

    def __init__(
        self,
        coord: Coordinator,
        timer_interval_secs: float | None,
        target: Callable[..., Any] | None = None,
        args: Iterable[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(coord, Coordinator):
            raise ValueError(f"'coord' argument must be a Coordinator: {coord}")
        if target is None and (args or kwargs):
            raise ValueError("'args' and 'kwargs' argument require that you also pass 'target'")
        super().__init__(daemon=True)
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._target = target
        self._args = tuple(args or ())
        self._kwargs = dict(kwargs or {})
        coord.register_thread(self)

    @staticmethod
    def loop(
        coord: Coordinator,
        timer_interval_secs: float | None,
        target: Callable[..., Any] | None,
        args: Iterable[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> LooperThread:
        """Make a LooperThread calling ``target`` and start it; returns it."""
        looper = LooperThread(coord, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        looper.start()
        return looper

    def run(self) -> None:
        coord = self._coord
        with coord.stop_on_exception():
            self.start_loop()
            interval = self._timer_interval_secs
            if interval is None:
                while not coord.should_stop():
                    self.run_loop()
            else:
                boundary = time.monotonic()
                while not coord.wait_for_stop(boundary - time.monotonic()):
                    boundary += interval  # a TypeError for an interval that is no number
                    self.run_loop()
            self.stop_loop()

    def start_loop(self) -> None:
        """Called once in the thread, before the first ``run_loop``."""

    def stop_loop(self) -> None:
        """Called once in the thread after the last ``run_loop`` (not after an exception)."""

    def run_loop(self) -> None:
        """One call: ``target(*args, **kwargs)`` (nothing without a target)."""
        if self._target is not None:
            self._target(*self._args, **self._kwargs)


def _exc_info_of(reported: ExcInfo | BaseException) -> ExcInfo:
    if isinstance(reported, tuple):
        return reported
    # TensorFlow 2.21 keeps sys.exc_info() instead, and outside an except
    # block fails formatting its own message (docs/departures.md, T21)
    return (type(reported), reported, reported.__traceback__)


__all__ = ["Coordinator", "LooperThread"]
