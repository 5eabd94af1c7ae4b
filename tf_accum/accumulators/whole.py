"""Work that a KeyboardInterrupt must not cut in two.

CPython runs a signal's Python handler in the main thread only, between two
bytecodes of whatever it is running, so an exception from it (Ctrl-C's
KeyboardInterrupt) can land in the middle of several numpy calls that change
an accumulator's round together. :func:`run_whole` runs such work, called
from the main thread, on a helper thread instead, where no handler runs, and
waits for it to end before it returns or raises: once queued, the work is
done whole, and the interrupt is raised after it. Elsewhere the work runs in
the calling thread. :func:`then_mark` makes one call and a store that records
it a single step, for work that must not be repeated. Nothing here touches
the process's signal handlers.
"""

from __future__ import annotations

import collections
import operator
import os
import queue
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

_CALL = operator.methodcaller("__call__")


class _Job:
    __slots__ = ("work", "done", "finished", "error")

    def __init__(self, work: Callable[[], None]) -> None:
        self.work = work
        self.done = threading.Lock()
        self.done.acquire()
        self.finished = False
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # handed to the waiting thread
            self.error = exc
        finally:
            self.finished = True
            self.done.release()


_jobs: queue.SimpleQueue[_Job] | None = None
_start_lock = threading.Lock()


def _serve(jobs: queue.SimpleQueue[_Job]) -> None:
    while True:
        jobs.get().run()


def _queue() -> queue.SimpleQueue[_Job]:
    global _jobs
    jobs = _jobs
    if jobs is None:
        with _start_lock:
            if _jobs is None:
                made: queue.SimpleQueue[_Job] = queue.SimpleQueue()
                threading.Thread(
                    target=_serve, args=(made,), name="tf_accum whole", daemon=True
                ).start()
                _jobs = made
            jobs = _jobs
    return jobs


def _forget() -> None:
    # a forked child has none of the parent's threads: start a new one there
    global _jobs, _start_lock
    _jobs = None
    _start_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget)


def run_whole(work: Callable[[], None]) -> None:
    """Run ``work()`` to its end, even if the calling thread is interrupted.

    In the main thread ``work`` runs on a helper thread while this one waits;
    an exception raised into the wait (Ctrl-C) is raised once ``work`` has
    ended, and otherwise ``work``'s own exception, if any. Elsewhere
    ``work`` runs here. ``work`` must not wait for the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        work()
        return
    jobs = _queue()
    job = _Job(work)
    interrupt: BaseException | None = None
    try:
        # once this call has run, the job is queued: wait for its end
        jobs.put(job)
    except BaseException as exc:
        interrupt = exc
    while not job.finished:
        try:
            job.done.acquire()
        except BaseException as exc:  # raised once the work has ended
            interrupt = interrupt or exc
    if interrupt is not None:
        raise interrupt
    if job.error is not None:
        raise job.error


def in_turn(first: Callable[[], Any], second: Callable[[], Any]) -> None:
    """``first()``, then ``second()`` (C callables both), with no Python code
    between: an asynchronous exception finds both done or neither (see
    :func:`then_mark`). If ``first`` raises, ``second`` is not called."""
    collections.deque(map(_CALL, (first, second)), 0)


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
