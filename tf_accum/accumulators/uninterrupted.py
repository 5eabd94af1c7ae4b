"""Work that a KeyboardInterrupt must not cut in two.

CPython runs a signal's Python handler in the main thread only, between two
bytecodes of whatever it is running, so an exception from it (Ctrl-C's
KeyboardInterrupt) can land in the middle of several numpy calls that change
an accumulator's round together. :func:`run_uninterrupted` runs such work, called
from the main thread, on a helper thread instead, where no handler runs, and
waits for it to end before it returns or raises: once queued, the work is
done whole, and the interrupt is raised after it. Elsewhere the work runs in
the calling thread. :class:`Helpers` are such threads: a job
queued to them runs to its end whatever happens to the thread that queued
it. :func:`then_mark` makes one call and a store that records it a single
step, for work that must not be repeated. Nothing here touches the
process's signal handlers.
"""

from __future__ import annotations

import collections
import operator
import os
import queue
import signal
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

_CALL = operator.methodcaller("__call__")

# What a thread of tf_accum's own blocks: every signal but the faults a thread
# causes itself. CPython runs Python handlers in the main thread only, and a
# signal the kernel hands to another thread wakes no wait of the main thread
# (a Ctrl-C would wait for the take the main thread waits on to end).
_BLOCKED = (
    signal.valid_signals()
    - {
        getattr(signal, name)
        for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT", "SIGTRAP", "SIGSYS")
        if hasattr(signal, name)
    }
    if hasattr(signal, "pthread_sigmask")  # POSIX
    else set()
)


def _signals_elsewhere(target: Callable[..., Any], *args: Any) -> None:
    if _BLOCKED:
        signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
    target(*args)


def start_thread(target: Callable[..., Any], name: str, *args: Any) -> threading.Thread:
    """Start a daemon thread running ``target(*args)`` that leaves the process's
    signals (Ctrl-C's SIGINT, a timer's, a termination request) to the
    program's own threads: on POSIX it blocks all but the faults it could
    cause itself, so the kernel hands them to a thread that runs Python's
    handlers or wakes the main thread. Its signal handlers are untouched."""
    thread = threading.Thread(
        target=_signals_elsewhere, args=(target, *args), name=name, daemon=True
    )
    thread.start()
    return thread


class Job:
    """Work for :class:`Helpers`: a callable, whether it has been queued,
    whether it is over (``ended``: run, or failed with ``error``), and a lock
    its helper lets go once it is over."""

    __slots__ = ("work", "queued", "ended", "error", "over")

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work
        self.queued = False
        self.ended = False
        self.error: BaseException | None = None
        self.over = threading.Lock()
        self.over.acquire()

    def wait(self) -> None:
        """Return once the job, if queued, is over (interruptible: call again)."""
        while self.queued and not self.ended:
            self.over.acquire()


class Helpers:
    """Daemon threads, started on first use (and again in a forked child),
    running the jobs queued to them to their end."""

    __slots__ = ("count", "name", "_jobs", "_start_lock")

    def __init__(self, count: int, name: str) -> None:
        self.count, self.name = count, name
        self._forget()
        if hasattr(os, "register_at_fork"):  # not on Windows
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        # a forked child has none of the parent's threads: start new ones there
        self._jobs: queue.SimpleQueue[Job] | None = None
        self._start_lock = threading.Lock()

    def queue(self, job: Job) -> None:
        """Queue ``job`` and mark it queued, as one step (:func:`then_mark`):
        an exception raised into the caller finds both done or neither."""
        jobs = self._jobs
        if jobs is None:
            with self._start_lock:
                if self._jobs is None:
                    made: queue.SimpleQueue[Job] = queue.SimpleQueue()
                    for number in range(self.count):
                        start_thread(_serve, f"{self.name} {number}", made)
                    self._jobs = made
                jobs = self._jobs
        then_mark(partial(jobs.put, job), job, "queued", True)


def _spent() -> None:
    """The work of a job its helper has run."""


def _serve(jobs: queue.SimpleQueue[Job]) -> None:
    while True:
        job = jobs.get()
        # Nothing of a job may outlive it here: its work holds views of the
        # caller's arrays, and a buffer that looks referenced is not reused
        # (dense.py), so the work is let go before the waiting thread wakes,
        # and the job before the next wait.
        work, job.work = job.work, _spent
        try:
            work()
        except BaseException as exc:  # handed to the thread that waits for the job
            job.error = exc
        finally:
            del work
            job.ended = True
            job.over.release()
            del job


_helper = Helpers(1, "tf_accum uninterrupted")


def run_uninterrupted(work: Callable[[], None]) -> None:
    """Run ``work()`` to its end, even if the calling thread is interrupted.

    In the main thread ``work`` runs on a helper thread while this one waits;
    an exception raised into the wait (Ctrl-C) is raised once ``work`` has
    ended, and otherwise ``work``'s own exception, if any. Elsewhere
    ``work`` runs here. ``work`` must not wait for the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        work()
        return
    job = Job(work)
    interrupt: BaseException | None = None
    try:
        # once this call has run, the job is queued: wait for its end
        _helper.queue(job)
    except BaseException as exc:
        interrupt = exc
    while job.queued and not job.ended:
        try:
            job.wait()
        except BaseException as exc:  # raised once the work has ended
            interrupt = interrupt or exc
    if interrupt is not None:
        raise interrupt
    if job.error is not None:
        raise job.error


def then_mark(call: Callable[[], Any], owner: object, name: str, value: object) -> None:
    """``call()``, then ``owner.<name> = value``, with no Python code between.

    Both run inside one call from here (a deque draining a map of C
    callables), and CPython raises an asynchronous exception (a signal
    handler's, or one set for the thread) only between bytecodes, after a
    call has returned, so one landing here finds both done or neither, and a
    tracer's exception at a line start finds neither. If ``call`` itself
    raises, the store is not made.
    """
    mark = partial(setattr, owner, name, value)
    collections.deque(map(_CALL, (call, mark)), 0)
