"""Bounded waits and background calls, so that a concurrency bug fails a test
instead of hanging it."""

from __future__ import annotations

import importlib.util
import linecache
import os
import sys
import threading
import time
from collections.abc import Callable, Collection
from types import CodeType
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


def loaded_on_a_thread(load: Callable[[], Any]) -> str:
    """The repr of what ``load()`` returns on a thread of its own, or "hung"
    if it has not returned within half of ``WAIT`` (for a forked child)."""
    found: list[Any] = []
    loader = threading.Thread(target=lambda: found.append(load()), daemon=True)
    loader.start()
    loader.join(WAIT / 2)
    return "hung" if not found else repr(found[0])


class BlockedCompile:
    """A stand-in for a kernel module's ``_compile``: it says it has started
    (``compiling``), waits until ``finish`` is set, then fails, so that numpy
    does the work (as when numba cannot compile)."""

    def __init__(self) -> None:
        self.compiling, self.finish = threading.Event(), threading.Event()

    def __call__(self) -> Any:
        self.compiling.set()
        assert self.finish.wait(WAIT)
        raise RuntimeError("no compiler")


def _loader_state(module: Any, tried: bool, kernels: Any) -> Any:
    from contextlib import ExitStack
    from unittest import mock

    stack = ExitStack()
    stack.enter_context(mock.patch.object(module.LOADER, "tried", tried))
    stack.enter_context(mock.patch.object(module.LOADER, "kernels", kernels))
    return stack


def fresh_kernels(module: Any, compile: Callable[[], Any] | None = None) -> Any:
    """A context in which a kernel module (half_kernel, sparse_kernel) has
    loaded nothing yet, optionally with ``compile`` as its ``_compile``."""
    from unittest import mock

    stack = _loader_state(module, False, None)
    if compile is not None:
        stack.enter_context(mock.patch.object(module, "_compile", compile))
    return stack


def kernels_in_use(module: Any, kernels: Any) -> Any:
    """A context in which a kernel module (half_kernel, sparse_kernel) has
    loaded ``kernels`` (None: as if numba were missing)."""
    return _loader_state(module, True, kernels)


def sparse_row_loops(path: str) -> Any:
    """A context in which sparse applies and takes run on ``path``: "numpy"
    (as without numba) or "compiled" (sparse_kernel's loops, which must load)."""
    from tf_accum.accumulators import sparse_kernel

    kernels = sparse_kernel.load() if path == "compiled" else None
    assert path == "numpy" or kernels is not None, "numba is installed but did not compile"
    return kernels_in_use(sparse_kernel, kernels)


# the sparse paths a test can run on here: "compiled" needs numba (the fast extra)
SPARSE_PATHS = ["numpy"] + (["compiled"] if importlib.util.find_spec("numba") else [])


def assert_answers_while_compiling(
    module: Any, apply: Callable[[], Any], count: Callable[[], Any]
) -> None:
    """``apply`` (an accumulator's first large apply) compiles ``module``'s
    loops without holding the accumulator's lock: ``count`` (its number of
    gradients) answers meanwhile. The compilation then fails and numpy
    applies the gradient."""
    blocked = BlockedCompile()
    with fresh_kernels(module, blocked):
        first = Background(apply)
        try:
            assert blocked.compiling.wait(WAIT)
            assert Background(count).result(WAIT) == 0
            assert not first.done()
        finally:
            blocked.finish.set()  # never leave the loader half-way for later tests
            first.result(WAIT)
    assert count() == 1


class Spy:
    """A kernel module's compiled loops (a NamedTuple of functions) as
    ``kernels``, the same loops counting their calls by name in ``calls``."""

    def __init__(self, kernels: Any) -> None:
        self.calls: list[str] = []

        def counted(name: str) -> Any:
            fn = getattr(kernels, name)

            def call(*args: Any) -> Any:
                self.calls.append(name)
                return fn(*args)

            return call

        self.kernels = type(kernels)(*(counted(name) for name in kernels._fields))


def run_traced(
    call: Callable[[], Any], tracer: Any, error: type[BaseException]
) -> tuple[bool, Any]:
    """``call()`` with ``tracer`` as the thread's trace function (``sys.settrace``):
    (True, what it returned), or (False, None) when it raised ``error``. The trace
    and profile functions are unset after (see line_injector)."""
    sys.settrace(tracer)
    try:
        return True, call()
    except error:
        return False, None
    finally:
        sys.settrace(None)
        sys.setprofile(None)


def line_injector(
    traced: Callable[[str], bool],
    first: int,
    error: Callable[[int], BaseException],
    times: int = 1,
    where: list[str] | None = None,
    left_out: Collection[CodeType] = (),
) -> Any:
    """A trace function (for ``sys.settrace``) raising ``error(n)`` at the start of
    the ``first``-th line started in the modules ``traced`` accepts (by module
    name), but for the functions whose code is in ``left_out``, and at the
    ``times - 1`` lines started after it, ``n`` counting lines; the functions
    it raised in are appended to ``where``.

    Only a line's first run in a call counts: CPython also reports the end of a
    ``with`` block as its line, once ``__exit__`` has run, where no
    asynchronous exception can land (the next check for one comes after
    ``__exit__`` returned) and raising there would leave a context manager's
    lock held. Calls are numbered as they start (a frame's id is reused once
    the frame is gone). A ``try:`` line is left out: CPython 3.11 raises a
    tracer's exception there outside the enclosing ``with`` block's cleanup,
    where no asynchronous exception is raised (it runs no bytecode).

    CPython unsets a trace function that raises. With more exceptions to
    raise, it leaves a profile function (``sys.setprofile``) that sets it
    again at the next call or return, the exception's unwinding included, on
    every frame of the thread's stack; the lines started until then, in the
    frame that raised, are not counted. The caller unsets both (``sys.settrace(None)``,
    ``sys.setprofile(None)``) when it is done.
    """
    seen: set[tuple[int, int]] = set()
    calls: dict[int, int] = {}  # a frame's id -> its call's number
    made = [0]  # calls so far

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if not traced(frame.f_globals.get("__name__", "")) or frame.f_code in left_out:
            return None
        if event == "call":
            made[0] += 1
            calls[id(frame)] = made[0]
        line = (calls.get(id(frame), 0), frame.f_lineno)
        if event == "line" and line not in seen:
            if linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() == "try:":
                return tracer
            seen.add(line)
            if first <= len(seen) < first + times:
                if where is not None:
                    where.append(frame.f_code.co_name)
                if len(seen) < first + times - 1:
                    sys.setprofile(set_again)
                raise error(len(seen))
        return tracer

    def set_again(frame: Any, event: str, arg: Any) -> None:
        sys.setprofile(None)
        sys.settrace(tracer)
        while frame is not None:
            if traced(frame.f_globals.get("__name__", "")) and frame.f_code not in left_out:
                frame.f_trace = tracer
            frame = frame.f_back

    return tracer

    return tracer


def lock_is_free(acc: Any) -> bool:
    """Whether another thread can take ``acc``'s lock (within 5 seconds)."""

    def try_lock() -> bool:
        got: bool = acc._lock.acquire(timeout=5)
        if got:
            acc._lock.release()
        return got

    return bool(Background(try_lock).result())
