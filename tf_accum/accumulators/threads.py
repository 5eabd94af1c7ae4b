"""The threads tf_accum starts: threads that leave the process's signals to
the program's own, and a helper that runs work a KeyboardInterrupt must not
cut in two.

Python runs a signal's handler in the main thread only, so an exception from
it (Ctrl-C's KeyboardInterrupt) can land in the main thread between any two
of several numpy calls that change an accumulator's round together.
:func:`run_uninterrupted` runs such work, called from the main thread, on a
helper thread instead, where no handler runs: once queued, the work is done
whole, whatever happens to the thread that queued it. :func:`start_thread`
starts a thread that leaves the process's signals to the program's own
threads. Nothing here touches the process's signal handlers.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
from collections.abc import Callable
from typing import Any

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
    """Work for the helper: a callable, the error it raised, and a lock the
    helper lets go once it is over."""

    __slots__ = ("work", "error", "over")

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work
        self.error: BaseException | None = None
        self.over = threading.Lock()
        self.over.acquire()


class Helper:
    """A daemon thread, started on first use (and again in a forked child),
    running the jobs queued to it in turn, each to its end."""

    __slots__ = ("name", "_jobs", "_start_lock")

    def __init__(self, name: str) -> None:
        self.name = name
        self._forget()
        if hasattr(os, "register_at_fork"):  # not on Windows
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        # a forked child has none of the parent's threads: start a new one there
        self._jobs: queue.SimpleQueue[Job] | None = None
        self._start_lock = threading.Lock()

    def queue(self, job: Job) -> None:
        jobs = self._jobs
        if jobs is None:
            with self._start_lock:
                if self._jobs is None:
                    made: queue.SimpleQueue[Job] = queue.SimpleQueue()
                    start_thread(_serve, self.name, made)
                    self._jobs = made
                jobs = self._jobs
        jobs.put(job)


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
            job.over.release()
            del job


_helper = Helper("tf_accum uninterrupted")


def run_uninterrupted(work: Callable[[], None]) -> None:
    """Run ``work()`` whole, wherever an interrupt lands in the calling thread.

    In the main thread ``work`` runs on a helper thread, where no signal
    handler runs, while this one waits; an exception raised into the wait
    (Ctrl-C) stops the wait, not the work, so ``work`` guards what it
    changes itself (it takes the lock it needs). Elsewhere ``work`` runs
    here. Raises ``work``'s own exception, if any. ``work`` must not wait
    for the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        work()
        return
    job = Job(work)
    _helper.queue(job)
    job.over.acquire()
    if job.error is not None:
        raise job.error
