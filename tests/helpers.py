"""Bounded waits and background calls, so that a concurrency bug fails a test
instead of hanging it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from tf_accum.resources import current_table

WAIT = 10.0  # seconds: generous, only ever reached when something is broken
CHILD_WAIT = 20.0  # seconds; a forked child that takes longer is hung


class Background:
    """Run ``fn(*args, **kwargs)`` in a daemon thread and keep its outcome."""

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self._result: Any = None
        self._error: BaseException | None = None
        self.finished = threading.Event()

        def run() -> None:
            try:
                self._result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the test thread
                self._error = exc
            finally:
                self.finished.set()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return self.finished.is_set()

    def result(self, timeout: float = WAIT) -> Any:
        assert self.finished.wait(timeout), "background call did not return in time"
        if self._error is not None:
            raise self._error
        return self._result

    def error(self, timeout: float = WAIT) -> BaseException | None:
        assert self.finished.wait(timeout), "background call did not return in time"
        return self._error


def wait_until(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.001)


def waiting_takes(handle: int) -> int:
    return current_table().lookup(handle).num_waiting()


def wait_for_waiting(handle: int, count: int) -> None:
    """Block until exactly ``count`` takes are queued on ``handle``."""
    wait_until(lambda: waiting_takes(handle) == count)


def wait_child(pid: int) -> int:
    """The exit code of the forked child ``pid``; a hung child is killed (by pid) and fails."""
    deadline = time.monotonic() + CHILD_WAIT
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child hung")


def in_forked_child(work: Callable[[], str]) -> str:
    """What ``work()`` returns in a child made by ``os.fork`` (or its exception's repr).

    The child never returns into pytest: it leaves by ``os._exit`` on every path.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            try:
                outcome = work()
            except BaseException as exc:
                outcome = repr(exc)
            os.write(write, outcome.encode())
        finally:
            os._exit(0)
    os.close(write)
    code = wait_child(pid)
    with os.fdopen(read) as pipe:
        outcome = pipe.read()
    assert code == 0, f"the forked child exited with {code}: {outcome}"
    return outcome
