"""Ctrl-C and injected exceptions: tf_accum leaves the process's signal
handlers, profile and trace functions alone (issue 28), and an interrupt
leaves no half-applied gradient, broken lock or dead take, and is never
swallowed (issue 9, item 5). Real signals, ``_thread.interrupt_main`` and
injected exceptions; subprocesses where a test needs a fresh interpreter."""

from __future__ import annotations

import _thread
import contextlib
import cProfile
import ctypes
import linecache
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
import tf_accum.compat.v1 as tf
from tests.graph.support import DenseOps, waiting
from tests.graph.support import wait_for_waiting as wait_for_waiting_in
from tests.helpers import (
    WAIT,
    Background,
    line_injector,
    lock_is_free,
    run_traced,
    wait_for_waiting,
    wait_until,
)
from tf_accum.accumulators import interrupts, rounds
from tf_accum.accumulators.attempts import Cancellation
from tf_accum.accumulators.interrupts import deferred_interrupts
from tf_accum.accumulators.threads import run_uninterrupted
from tf_accum.resources import current_table

raw = tfa.raw_ops
F32 = tfa.float32
FRESH = 2**40  # a local step no take catches up with
CHILD_TIMEOUT = 120  # seconds for a child interpreter; only reached if broken

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals need the main thread"
)


def _sum_acc(shape: list[int] | None = None) -> int:
    return raw.ResourceConditionalAccumulator(dtype=F32, shape=shape or [4], reduction_type="SUM")


def _apply(h: int, value: float = 1.0, step: int = 0) -> None:
    raw.ResourceAccumulatorApplyGradient(
        handle=h, local_step=step, gradient=np.full(4, value, np.float32)
    )


def _take(h: int, n: int, timeout: float | None = 10.0) -> np.ndarray[Any, Any]:
    result: np.ndarray[Any, Any] = raw.ResourceAccumulatorTakeGradient(
        handle=h, num_required=n, dtype=F32, timeout=timeout
    )
    return result


def _stats(h: int) -> dict[str, Any]:
    return dict(tfa.accumulator_stats(h))


def _sigint_when_waiting(h: int) -> Background:
    """A real SIGINT to this process once a take waits on ``h``."""

    def send() -> None:
        wait_for_waiting(h, 1)
        os.kill(os.getpid(), signal.SIGINT)

    return Background(send)


def _run_child(program: str, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program), *args],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def _use_every_way(interrupted: bool = True) -> None:
    """Make, apply, take, time out and (optionally) interrupt a waiting take,
    dense and sparse."""
    h = _sum_acc()
    _apply(h)
    _take(h, 1)
    with pytest.raises(tfa.errors.DeadlineExceededError):
        _take(h, 1, timeout=0.01)
    if interrupted:
        sender = _sigint_when_waiting(h)
        with pytest.raises(KeyboardInterrupt):
            _take(h, 1, timeout=WAIT)
        sender.result()
    raw.DestroyResourceOp(resource=h)
    s = raw.SparseConditionalAccumulator(dtype=F32, shape=[3, 2])
    raw.SparseAccumulatorApplyGradient(
        handle=s, local_step=0, gradient_indices=np.array([1], np.int64),
        gradient_values=np.ones((1, 2), np.float32), gradient_shape=np.array([3, 2], np.int64),
        has_known_shape=True,
    )  # fmt: skip
    raw.SparseAccumulatorTakeGradient(handle=s, num_required=1, dtype=F32)
    raw.AccumulatorNumAccumulated(handle=s)


def test_using_tf_accum_changes_no_signal_handler_profile_or_trace_function() -> None:
    before = (
        signal.getsignal(signal.SIGINT),
        sys.getprofile(),
        sys.gettrace(),
        threading.getprofile(),
        threading.gettrace(),
    )
    _use_every_way()
    after = (
        signal.getsignal(signal.SIGINT),
        sys.getprofile(),
        sys.gettrace(),
        threading.getprofile(),
        threading.gettrace(),
    )
    assert after == before


def _blocked_signals(native_id: int) -> set[int]:
    """The signals the thread ``native_id`` of this process blocks (Linux's /proc)."""
    status = Path(f"/proc/self/task/{native_id}/status").read_text()
    mask = int(
        next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk")), 16
    )
    return {number for number in range(1, 65) if mask >> (number - 1) & 1}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_tf_accums_own_threads_leave_ctrl_c_to_the_programs_threads() -> None:
    """The helper of accumulators/threads.py and a run's threads for
    blocking ops block SIGINT (and the other asynchronous signals), so the kernel hands a
    process's Ctrl-C to a thread that runs Python's handler or wakes the main
    thread's wait; the faults a thread causes itself stay its own, and the
    main thread's mask is untouched."""
    main_blocked = _blocked_signals(threading.main_thread().native_id or 0)
    run_uninterrupted(lambda: None)  # the helper
    with tf.Graph().as_default():
        first, second = tf.FIFOQueue(1, tf.float32), tf.FIFOQueue(1, tf.float32)
        with tf.Session() as sess:
            # a run waiting on two dequeues waits on threads of its own
            taking = Background(sess.run, [first.dequeue(), second.dequeue()])

            def running() -> int:
                return sum(t.name.startswith("tf_accum run") for t in threading.enumerate())

            def own_threads() -> dict[str, int | None]:
                found = threading.enumerate()
                return {t.name: t.native_id for t in found if t.name.startswith("tf_accum")}

            # a thread just started is listed before it has a native id
            wait_until(lambda: running() == 2 and None not in own_threads().values())
            own = own_threads()
            blocked = {name: _blocked_signals(native or 0) for name, native in own.items()}
            sess.run([first.enqueue(1.0), second.enqueue(2.0)])
            taking.result()
    assert any(name.startswith("tf_accum uninterrupted") for name in own)
    assert any(name.startswith("tf_accum run") for name in own)
    for name, signals in blocked.items():
        assert {signal.SIGINT, signal.SIGTERM, signal.SIGALRM} <= signals, name
        assert not {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE} & signals, name
    assert _blocked_signals(threading.main_thread().native_id or 0) == main_blocked
    assert signal.SIGINT not in main_blocked


_OWN_HANDLER_CHILD = """
    import os, signal, sys, threading, time
    when = sys.argv[1]
    seen = []

    def handler(signum, frame):
        seen.append(signum)  # does not raise: a take's wait goes on

    if when == "before":
        signal.signal(signal.SIGINT, handler)
    elif when == "ignored":  # as a shell's background job (`cmd &`) starts
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    import numpy as np
    import tf_accum as tfa
    if when == "after":
        signal.signal(signal.SIGINT, handler)
    mine = signal.getsignal(signal.SIGINT)
    acc = tfa.compat.v1.ConditionalAccumulator(tfa.float32, shape=[2], reduction_type="SUM")
    acc.apply_grad([1.0, 1.0], local_step=0)
    acc.take_grad(1)
    # a take that waits, gets a SIGINT the handler swallows, and is then served
    done = threading.Event()

    def interrupt_then_serve():
        while not acc.accumulator_ref or tfa.accumulator_stats(acc.accumulator_ref)["waiting"] == 0:
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        acc.apply_grad([2.0, 2.0], local_step=1)
        done.set()

    helper = threading.Thread(target=interrupt_then_serve)
    helper.start()
    taken = acc.take_grad(1, timeout=60)
    helper.join()
    print(signal.getsignal(signal.SIGINT) is mine, seen == ([] if when == "ignored" else [2]))
    print(taken.tolist() == [2.0, 2.0], sys.getprofile() is None, sys.gettrace() is None)
"""


@pytest.mark.parametrize("when", ["before", "after", "ignored"])
def test_a_programs_own_sigint_handler_stays_in_place_and_is_called(when: str) -> None:
    """Installed before or after import (or SIGINT ignored), it is still the
    handler after every kind of use, and a SIGINT during a take's wait reaches
    it (the take waits on and is served)."""
    assert _run_child(_OWN_HANDLER_CHILD, when) == ["True"] * 5


_ASYNCIO_CHILD = """
    import asyncio, os, signal
    import numpy as np
    import tf_accum as tfa
    acc = tfa.compat.v1.ConditionalAccumulator(tfa.float32, shape=[2])
    acc.apply_grad([1.0, 1.0], local_step=0)
    acc.take_grad(1)
    events = []

    async def main():
        events.append(signal.getsignal(signal.SIGINT) is not signal.default_int_handler)
        acc.apply_grad([1.0, 1.0], local_step=1)
        acc.take_grad(1)
        asyncio.get_running_loop().call_later(0.1, os.kill, os.getpid(), signal.SIGINT)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        events.append("KeyboardInterrupt")
    print(*events, signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""


def test_asyncio_run_handles_ctrl_c_after_tf_accum_was_used() -> None:
    """asyncio.run installs its own SIGINT handling (it does only when it finds
    Python's default handler): Ctrl-C cancels the main task, then raises."""
    assert _run_child(_ASYNCIO_CHILD) == ["True", "cancelled", "KeyboardInterrupt", "True"]


def _marker() -> None:
    """A call made after tf_accum's, that the profiler or tracer must see."""


@contextlib.contextmanager
def _cprofile() -> Iterator[Callable[[], set[str]]]:
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield lambda: {getattr(entry.code, "co_name", "") for entry in profiler.getstats()}
    finally:
        profiler.disable()
    assert sys.getprofile() is None


@contextlib.contextmanager
def _python_hook(install: Callable[[Any], None], event: str) -> Iterator[Callable[[], set[str]]]:
    names: set[str] = set()

    def hook(frame: Any, seen: str, arg: Any) -> Any:
        if seen == event:
            names.add(frame.f_code.co_name)
        return hook if install is sys.settrace else None

    install(hook)
    try:
        yield lambda: set(names)
        now = sys.gettrace() if install is sys.settrace else sys.getprofile()
        assert now is hook
    finally:
        install(None)


_HOOKS = {
    "cProfile": _cprofile,
    "setprofile": lambda: _python_hook(sys.setprofile, "call"),
    "settrace": lambda: _python_hook(sys.settrace, "call"),
}


@pytest.mark.parametrize("kind", sorted(_HOOKS))
def test_profilers_and_tracers_see_the_calls_after_tf_accums(kind: str) -> None:
    """cProfile (a profiler in C), a Python profile function and a trace
    function stay in place through every use, an interrupted take included."""
    with _HOOKS[kind]() as seen:
        _use_every_way()
        _marker()
        names = seen()
    assert "_marker" in names and "_use_every_way" in names


def test_a_real_sigint_interrupts_a_blocked_take_at_once_and_withdraws_it() -> None:
    h = _sum_acc()
    sender = _sigint_when_waiting(h)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        _take(h, 1, timeout=WAIT)
    assert time.monotonic() - start < WAIT / 2  # woken by the signal, not the timeout
    sender.result()
    stats = _stats(h)
    assert stats["waiting"] == 0 and stats["takes_interrupted"] == 1
    assert stats["takes_served"] == 0 and stats["global_step"] == 0
    _apply(h)
    np.testing.assert_array_equal(_take(h, 1), np.ones(4, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_interrupt_main_during_a_waiting_take_surfaces_and_the_take_is_withdrawn() -> None:
    h = _sum_acc()
    timer = threading.Timer(0.05, _thread.interrupt_main)
    timer.start()
    # interrupt_main does not wake a blocked lock: the take wakes at its timeout,
    # meets the interrupt, and withdraws
    with pytest.raises(KeyboardInterrupt):
        _take(h, 1, timeout=0.5)
    timer.join()
    stats = _stats(h)
    assert stats["waiting"] == 0 and stats["takes_interrupted"] == 1
    assert stats["takes_served"] == 0 and stats["global_step"] == 0
    _apply(h)
    np.testing.assert_array_equal(_take(h, 1), np.ones(4, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_a_take_served_as_the_interrupt_came_puts_its_round_back() -> None:
    """Served by an apply while an interrupt was pending: the interrupt is
    raised, and the round goes back whole (nothing consumed, the step as before)."""
    h = _sum_acc()

    def interrupt_then_serve() -> None:
        wait_for_waiting(h, 1)
        _thread.interrupt_main()  # pending while the take is blocked
        _apply(h, 2.0)  # serves the take

    helper = Background(interrupt_then_serve)
    with pytest.raises(KeyboardInterrupt):
        _take(h, 1, timeout=None)
    helper.result()
    stats = _stats(h)
    assert stats["takes_served"] == 0 and stats["global_step"] == 0
    assert stats["num_accumulated"] == 1 and stats["takes_interrupted"] == 1
    np.testing.assert_array_equal(_take(h, 1), np.full(4, 2.0, np.float32))
    raw.DestroyResourceOp(resource=h)


def _storm(seconds: float, taker: Callable[[], float | None]) -> tuple[int, list[float]]:
    """SIGINTs every 0.5-5 ms for ``seconds`` while the main thread calls
    ``taker``; returns the interrupts seen and what ``taker`` returned."""
    stop, go = threading.Event(), threading.Event()
    rng = np.random.default_rng(28)

    def signals() -> None:
        go.wait(WAIT)
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(float(rng.uniform(0.0005, 0.005)))

    # An interrupt landing where Python cannot raise it (a finalizer, say) is
    # reported as unraisable, as CPython does; pytest's own hook would format it
    # while the storm goes on, and be interrupted itself. Such interrupts are
    # counted here; anything else unraisable fails the test.
    unraisable: list[str] = []
    swallowed = [0]

    def keep(report: Any) -> None:
        if isinstance(report.exc_value, KeyboardInterrupt):
            swallowed[0] += 1
        else:
            unraisable.append(repr(report.exc_value))

    previous_hook, sys.unraisablehook = sys.unraisablehook, keep
    sender = threading.Thread(target=signals)
    sender.start()
    seen, taken = 0, []
    deadline = time.monotonic() + seconds
    while not stop.is_set():
        try:  # an interrupt may land anywhere, in the handler below too
            go.set()
            while time.monotonic() < deadline:
                try:
                    result = taker()
                    if result is not None:
                        taken.append(result)
                except KeyboardInterrupt:
                    seen += 1
            stop.set()
            sender.join(WAIT)
        except KeyboardInterrupt:
            seen += 1
    for _ in range(20):  # signals still on their way
        try:
            time.sleep(0.005)
        except KeyboardInterrupt:
            seen += 1
    sys.unraisablehook = previous_hook
    assert not sender.is_alive()
    assert not unraisable, unraisable
    return seen + swallowed[0], taken


# The applies a storm exercises: a dense sum (the count stored just before
# the add), a float16 sum kept in float32 (one compiled loop, or
# numpy's passes on a helper thread), and sparse rows (prepared aside, then
# written).
_APPLY_KINDS = {
    "dense": (tfa.float32, [4]),
    "float16": (tfa.float16, [4096]),
    "sparse": (tfa.float32, [10, 2]),
}


def _mean_of_ones(kind: str) -> tuple[Callable[[], None], Callable[[int, float], float], Any]:
    """A MEAN accumulator of ``kind`` fed ones: (apply, take(n, timeout) ->
    the mean taken, which is 1 exactly when the count agrees with the sum; the
    accumulator)."""
    dtype, shape = _APPLY_KINDS[kind]
    if kind != "sparse":
        h = raw.ResourceConditionalAccumulator(dtype=dtype, shape=shape, reduction_type="MEAN")
        ones = np.ones(shape, dtype.numpy_dtype)

        def apply() -> None:
            raw.ResourceAccumulatorApplyGradient(handle=h, local_step=FRESH, gradient=ones)

        def take(n: int, timeout: float) -> float:
            result = raw.ResourceAccumulatorTakeGradient(
                handle=h, num_required=n, dtype=dtype, timeout=timeout
            )
            assert (result == result.flat[0]).all()
            return float(result.flat[0])

    else:
        h = raw.SparseConditionalAccumulator(dtype=dtype, shape=shape, reduction_type="MEAN")
        dense_shape = np.array(shape, np.int64)
        rows = np.array([3, 7], np.int64)

        def apply() -> None:
            raw.SparseAccumulatorApplyGradient(
                handle=h, local_step=FRESH, gradient_indices=rows,
                gradient_values=np.ones((2, 2), np.float32), gradient_shape=dense_shape,
                has_known_shape=True,
            )  # fmt: skip

        def take(n: int, timeout: float) -> float:
            result = raw.SparseAccumulatorTakeGradient(
                handle=h, num_required=n, dtype=dtype, timeout=timeout
            )
            assert list(result.indices) == [3, 7]
            assert (result.values == result.values[0, 0]).all()
            return float(result.values[0, 0])

    return apply, take, current_table().lookup(h)


def _storm_beside_workers(
    kind: str,
    profiled: bool,
    *,
    seconds: float,
    workers: int,
    worker_takes: int,
    main_applies: bool,
) -> None:
    """A storm of real SIGINTs (under cProfile if ``profiled``) while the main
    thread takes one gradient at a time from a MEAN accumulator of ``kind`` fed
    ones (applying one first if ``main_applies``), and ``workers`` threads
    apply ones and take ``worker_takes`` at a time: every round taken, and the
    one left, has exactly as many gradients counted as its sum holds (its mean
    is 1), no dead take stays queued, and the lock still works."""
    apply, take, acc = _mean_of_ones(kind)
    stop = threading.Event()
    worker_taken: list[float] = []
    failures: list[BaseException] = []

    def worker() -> None:
        try:
            while not stop.is_set():
                apply()
                with contextlib.suppress(tfa.errors.DeadlineExceededError):
                    worker_taken.append(take(worker_takes, 0.002))
        except BaseException as exc:  # pragma: no cover - a failure to report
            failures.append(exc)

    def main_thread() -> float | None:
        if main_applies:
            apply()
        with contextlib.suppress(tfa.errors.DeadlineExceededError):
            return take(1, 0.01)
        return None

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    try:
        with _cprofile() if profiled else contextlib.nullcontext():
            seen, taken = _storm(seconds, main_thread)
    finally:
        stop.set()
        for thread in threads:
            thread.join(WAIT)
    assert not failures and not any(thread.is_alive() for thread in threads)
    assert seen > 0 and taken
    assert set(taken) | set(worker_taken) == {1.0}  # each round's count agrees with its sum
    left = acc.num_accumulated()
    if left:
        assert take(left, WAIT) == 1.0
    assert acc.num_waiting() == 0 and lock_is_free(acc)
    acc.close()


@pytest.mark.parametrize("profiled", [False, True], ids=["plain", "cProfile"])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_a_sigint_storm_keeps_every_round_whole(kind: str, profiled: bool) -> None:
    """Threads apply ones to a MEAN accumulator while the main thread takes under
    a storm of real SIGINTs (with and without cProfile): no round taken or left
    is torn (see _storm_beside_workers)."""
    _storm_beside_workers(
        kind, profiled, seconds=1.5, workers=2, worker_takes=3, main_applies=False
    )


@pytest.mark.parametrize("profiled", [False, True], ids=["plain", "cProfile"])
@pytest.mark.parametrize("kind", list(_APPLY_KINDS))
def test_a_sigint_storm_on_applies_leaves_no_half_applied_gradient(
    kind: str, profiled: bool
) -> None:
    """The main thread applies and takes under a storm of real SIGINTs (with
    and without cProfile) while a thread applies and takes too: every round
    taken, and the one left, holds exactly as many gradients as it counted
    (its mean of ones is 1), whatever the interrupt landed on."""
    _storm_beside_workers(kind, profiled, seconds=1.0, workers=1, worker_takes=2, main_applies=True)


@pytest.mark.parametrize("reduction", ["SUM", "MEAN"])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_a_take_interrupted_as_it_was_served_loses_no_round(kind: str, reduction: str) -> None:
    """A Ctrl-C is pending while a take waits; an apply serves it and another
    gradient comes in before the take's thread runs again. The interrupt
    surfaces (never swallowed) and the served round goes back, merged into the
    current one: both gradients are there, each row counted over both rounds;
    the step stays where the take moved it."""
    mean = reduction == "MEAN"
    if kind == "dense":
        h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[4], reduction_type=reduction)

        def apply(value: float, step: int) -> None:
            _apply(h, value, step)

        def take(n: int) -> Any:
            return _take(h, n, timeout=None)

    else:
        h = raw.SparseConditionalAccumulator(dtype=F32, shape=[10, 2], reduction_type=reduction)
        shape = np.array([10, 2], np.int64)

        def apply(value: float, step: int) -> None:
            rows = [3] if value == 2.0 else [3, 5]  # the second touches a new row too
            raw.SparseAccumulatorApplyGradient(
                handle=h, local_step=step, gradient_indices=np.array(rows, np.int64),
                gradient_values=np.full((len(rows), 2), value, np.float32),
                gradient_shape=shape, has_known_shape=True,
            )  # fmt: skip

        def take(n: int) -> Any:
            return raw.SparseAccumulatorTakeGradient(handle=h, num_required=n, dtype=F32)

    acc: Any = current_table().lookup(h)

    def interrupt_serve_and_go_on() -> None:
        wait_for_waiting(h, 1)
        with acc._lock:  # the take cannot give up before both are in
            _thread.interrupt_main()  # pending while the take is blocked
            apply(2.0, 0)  # serves it
            apply(4.0, 1)  # the next round

    helper = Background(interrupt_serve_and_go_on)
    results: list[Any] = []
    with pytest.raises(KeyboardInterrupt):
        results.append(take(1))
    helper.result()
    assert results == [] and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    stats = _stats(h)
    assert stats["takes_served"] == 0 and stats["takes_interrupted"] == 1
    assert stats["num_accumulated"] == 2 and stats["global_step"] == 1
    result = take(2)
    if kind == "dense":
        want = np.full(4, 3.0 if mean else 6.0, np.float32)
        np.testing.assert_array_equal(result, want)
    else:
        assert list(result.indices) == [3, 5]
        row3 = 3.0 if mean else 6.0  # counted twice, over both rounds
        np.testing.assert_array_equal(result.values, np.array([[row3] * 2, [4.0] * 2], np.float32))
    assert _stats(h)["takes_served"] == 1
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("dtype", [tfa.float16, tfa.bfloat16])
def test_an_interrupt_right_after_a_narrow_sums_compiled_add_leaves_it_whole(
    dtype: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A float16/bfloat16 sum adds with one compiled loop, counted with it;
    an interrupt landing right after the loop (here raised by it) leaves the
    add pending, and what the loop found is taken in before the sum is next
    read, without running the loop again. With an infinity and a NaN in the
    gradient (the rare follow-up work), the round still holds exactly both
    gradients, counted twice, as numpy adds them."""
    from tf_accum.accumulators import half_kernel, narrow_sum

    if half_kernel.load() is None:
        pytest.skip("needs numba (the fast extra): without it the add is several calls")
    size = 2 * half_kernel.BLOCK
    h = raw.ResourceConditionalAccumulator(dtype=dtype, shape=[size], reduction_type="SUM")
    first = np.full(size, 1.5, dtype.numpy_dtype)
    second = np.full(size, 0.25, dtype.numpy_dtype)
    second[half_kernel.BLOCK + 1] = np.inf  # in the second block: the loop stops there
    second[-1] = np.nan
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=first)
    real = narrow_sum.NarrowSum.prepare_add
    runs = []

    def interrupted_after(self: Any, gradient: Any) -> Any:
        pending = real(self, gradient)
        assert pending is not None
        loop, arguments, ticket, flat = pending

        def run(*args: Any) -> Any:
            runs.append(ticket)
            loop(*args)
            raise KeyboardInterrupt  # as if Ctrl-C landed once it returned

        return run, arguments, ticket, flat

    monkeypatch.setattr(narrow_sum.NarrowSum, "prepare_add", interrupted_after)
    with pytest.raises(KeyboardInterrupt):
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=second)
    monkeypatch.undo()
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 2
    taken = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=dtype)
    assert len(runs) == 1  # the take finished the add without running the loop again
    np.testing.assert_array_equal(taken.view(np.uint16), (first + second).view(np.uint16))
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("deferring", [False, True], ids=["default", "deferred"])
def test_a_session_run_waiting_on_several_takes_stops_at_the_first_ctrl_c(
    deferring: bool,
) -> None:
    """The synchronous-replicas chief: one run fetches a take per variable. The
    first Ctrl-C stops it at once, every take is withdrawn, nothing is consumed
    (with interrupts deferred too: the run's wait is interruptible)."""
    with (
        deferred_interrupts() if deferring else contextlib.nullcontext(),
        tf.Graph().as_default(),
    ):
        first, second = DenseOps(shape=[1]), DenseOps(shape=[1])
        with tf.Session() as sess:
            first.put(sess, [1.0])  # in, but short of the two each take wants
            main_thread = threading.get_ident()

            def sigint_when_both_wait() -> None:
                wait_for_waiting_in(sess, 2)
                # to the main thread: a signal sent to the process may reach one of
                # its other threads (the run's take threads wait too), and CPython
                # then runs the handler only once the main thread runs Python again,
                # here at the run's deadline (seen once in a full run); what is
                # tested is that the run's wait is one Ctrl-C interrupts
                signal.pthread_kill(main_thread, signal.SIGINT)

            sender = Background(sigint_when_both_wait)
            start = time.monotonic()
            # bounded: a Ctrl-C that failed to stop the run fails the test, not hangs it
            bound = tf.RunOptions(timeout_in_ms=int(WAIT * 1000))
            with pytest.raises(KeyboardInterrupt):
                sess.run([first.take, second.take], {first.n: 2, second.n: 2}, options=bound)
            assert time.monotonic() - start < WAIT / 2
            sender.result()
            # the run's take threads end
            wait_until(
                lambda: not any(t.name.startswith("tf_accum run") for t in threading.enumerate())
            )
            assert waiting(sess) == 0
            # the step did not move (a gradient of step 0 still counts) and
            # the gradient already in stayed
            assert first.count(sess) == 1 and second.count(sess) == 0
            first.put(sess, [3.0])
            np.testing.assert_array_equal(first.get(sess, 2), [2.0])  # the mean of both


def test_a_deferred_ctrl_c_held_when_a_run_goes_on_to_wait_comes_at_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In ``deferred_interrupts()``, a Ctrl-C that lands while a run is still
    setting up its takes is held for the run's return; the run then waits on
    its takes (here for ever): the held interrupt is raised as the wait begins."""
    from tf_accum.graph import executor

    submit = executor._Scheduler._submit
    submitted = []

    def submit_then_ctrl_c(self: Any, op: Any) -> None:
        submit(self, op)
        submitted.append(op)
        if len(submitted) == 2:  # both takes are out; the run has not begun to wait
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(executor._Scheduler, "_submit", submit_then_ctrl_c)
    with deferred_interrupts(), tf.Graph().as_default():
        first, second = DenseOps(shape=[1]), DenseOps(shape=[1])
        with tf.Session() as sess:
            bound = tf.RunOptions(timeout_in_ms=int(WAIT * 1000))  # a held one fails, not hangs
            start = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                sess.run([first.take, second.take], {first.n: 1, second.n: 1}, options=bound)
            assert time.monotonic() - start < WAIT / 2
            assert len(submitted) == 2
            wait_until(
                lambda: not any(t.name.startswith("tf_accum run") for t in threading.enumerate())
            )
            assert waiting(sess) == 0 and sys.getprofile() is None


def test_an_exception_out_of_a_takes_wait_leaves_the_lock_and_queue_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Any exception out of the wait withdraws the take."""
    h = _sum_acc()
    acc = current_table().lookup(h)

    def explode(*args: Any) -> None:
        raise _Boom

    monkeypatch.setattr(rounds.Rounds, "_wait", explode)
    with pytest.raises(_Boom):
        _take(h, 1)
    monkeypatch.undo()
    assert acc.num_waiting() == 0 and lock_is_free(acc)
    assert _stats(h)["takes_interrupted"] == 1
    # the lock is free for other threads
    Background(_apply, h).result()
    np.testing.assert_array_equal(_take(h, 1), np.ones(4, np.float32))
    raw.DestroyResourceOp(resource=h)


class _Injected(Exception):
    pass


def _inject_at_line(k: int, times: int = 1) -> Any:
    """A tracer that raises _Injected at the k-th line started in tf_accum's
    accumulators (and at the ``times - 1`` lines started after it), lines told
    apart as tests.helpers.line_injector says. The delivery (DELIVERY), which
    gives back a round taken by a call that fails, is left out: an exception
    there loses what it was giving back."""

    return line_injector(_in_accumulators, k, _Injected, times, left_out=DELIVERY)


# The functions of a public take call's delivery (see tf_accum.accumulators.interrupts).
DELIVERY = frozenset(
    getattr(interrupts, name).__code__
    for name in ("open_delivery", "close_delivery", "give_back", "delivered", "joined")
)


def _in_accumulators(name: str) -> bool:
    return name.startswith("tf_accum.accumulators")


def _recording_injection(k: int, where: list[str], times: int = 1) -> Any:
    """_inject_at_line(k, times), noting the functions it raised in."""
    return line_injector(_in_accumulators, k, _Injected, times, where, DELIVERY)


def _walk_injections(call: Any, acc: Any, after: Any) -> int:
    """Run ``call`` with an exception injected at its 1st, 2nd, ... line until it
    completes; after each, check the lock discipline. Returns the number of lines."""
    k = 0
    while True:
        k += 1
        assert k < 500
        finished, _ = run_traced(call, _inject_at_line(k), _Injected)
        after()
        assert lock_is_free(acc)
        assert acc.num_waiting() == 0  # no dead take left in the queue
        if finished:
            return k


def test_an_exception_injected_at_any_line_keeps_the_lock_discipline() -> None:
    """Raise at every line, in turn, of a take that finds its gradients, of a take
    that waits and is served, and of an apply: the lock is never left held or
    released twice, and the queue never keeps a dead take."""
    h = _sum_acc()
    acc = current_table().lookup(h)
    fresh = 2**40  # every take moves the global step on: keep the gradients fresh

    def drain() -> None:
        while int(raw.ResourceAccumulatorNumAccumulated(handle=h)):
            raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)

    def ready_take() -> None:
        _apply(h, step=fresh)
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32, timeout=5)

    stop = threading.Event()
    servers: list[Background] = []

    def serve_when_waiting() -> None:
        while not stop.is_set():
            if acc.num_waiting():
                _apply(h, step=fresh)
                return
            time.sleep(0.0005)

    def served_take() -> None:
        stop.clear()
        servers.append(Background(serve_when_waiting))
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32, timeout=5)

    def after_served() -> None:
        stop.set()
        servers[-1].result()
        drain()

    lines = [
        _walk_injections(ready_take, acc, drain),
        _walk_injections(served_take, acc, after_served),
        _walk_injections(lambda: _apply(h, step=fresh), acc, drain),
    ]
    assert min(lines) > 3  # it really walked through the code
    raw.DestroyResourceOp(resource=h)


THIRD_IN_A_ROW = (
    "a third exception, in the delivery's give-back after the take's own was cut "
    "short, loses the served round"
)


@pytest.mark.parametrize(
    "times",
    [1, 2, pytest.param(3, marks=pytest.mark.xfail(strict=True, reason=THIRD_IN_A_ROW))],
    ids=["once", "2 lines in a row", "3 lines in a row"],
)
@pytest.mark.parametrize("reduction", ["SUM", "MEAN"])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_an_exception_at_any_line_of_a_take_loses_at_most_a_whole_round(
    kind: str, reduction: str, times: int
) -> None:
    """Raise at every line, in turn, of a take that finds its two gradients: it
    returns them, or they stay for the next take, or, only once a MEAN began
    dividing the round's own buffer, the round is lost whole. Never a round whose count disagrees with
    its sum, nor one put back divided: the next take is exact. The take gives up
    in its own ``except``, and the public call that made it (the delivery) gives
    up again if that was cut short: an exception and a second one in a row, in
    the clean-up, lose nothing; a third may."""
    mean = reduction == "MEAN"
    if kind == "dense":
        h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[4], reduction_type=reduction)

        def apply(value: float) -> None:
            _apply(h, value, FRESH)

        def take(n: int) -> float:
            return float(_take(h, n)[0])

    else:
        h = raw.SparseConditionalAccumulator(dtype=F32, shape=[10, 2], reduction_type=reduction)
        shape = np.array([10, 2], np.int64)

        def apply(value: float) -> None:
            raw.SparseAccumulatorApplyGradient(
                handle=h, local_step=FRESH, gradient_indices=np.array([3], np.int64),
                gradient_values=np.full((1, 2), value, np.float32), gradient_shape=shape,
                has_known_shape=True,
            )  # fmt: skip

        def take(n: int) -> float:
            result = raw.SparseAccumulatorTakeGradient(handle=h, num_required=n, dtype=F32)
            assert list(result.indices) == [3]
            return float(result.values[0, 0])

    acc: Any = current_table().lookup(h)
    lines = 0
    most = 0  # the most exceptions one take met
    for k in range(1, 300):
        apply(1.0)
        apply(2.0)
        where: list[str] = []
        _, taken = run_traced(lambda: take(2), _recording_injection(k, where, times), _Injected)
        left = acc.num_accumulated()
        if taken is not None:
            assert taken == (1.5 if mean else 3.0) and left == 0
        else:
            assert left in (0, 2), f"line {k} ({where}): half a round left"
            if left == 0:  # lost only once its take began dividing the round's own buffer
                assert acc._kept_by_taker == acc._served, f"line {k}: lost in {where}"
        assert lock_is_free(acc) and acc.num_waiting() == 0
        apply(4.0)  # the round left, if any, plus this one
        assert acc.num_accumulated() == left + 1, f"line {k}"
        total = 4.0 + (3.0 if left else 0.0)
        want = np.float32(total) / np.float32(left + 1) if mean else total
        assert take(1) == want, f"line {k} ({where})"
        most = max(most, len(where))
        if taken is not None:
            lines = k
            break
    assert lines > 10  # it really walked through the code
    assert times == 1 or most > 1, "no take met a second exception"
    raw.DestroyResourceOp(resource=h)


def test_an_exception_injected_into_a_waiting_thread_withdraws_its_take() -> None:
    h = _sum_acc()
    taker = Background(_take, h, 1, 0.3)
    wait_for_waiting(h, 1)
    thread_id = next(t.ident for t in threading.enumerate() if t is taker._thread)
    assert thread_id is not None
    set_async = ctypes.pythonapi.PyThreadState_SetAsyncExc
    assert set_async(ctypes.c_ulong(thread_id), ctypes.py_object(_Injected)) == 1
    assert isinstance(taker.error(), _Injected)  # surfaces when the wait wakes
    stats = _stats(h)
    assert stats["waiting"] == 0 and stats["takes_interrupted"] == 1
    _apply(h)
    np.testing.assert_array_equal(_take(h, 1), np.ones(4, np.float32))
    raw.DestroyResourceOp(resource=h)


def _raising_at(code_name: str, text: str, times: int = 1) -> Any:
    """A tracer raising _Injected at the start of the line ``text`` of the
    accumulators' function ``code_name``, the first ``times`` times it runs."""
    left = [times]

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if not frame.f_globals.get("__name__", "").startswith("tf_accum.accumulators"):
            return None
        if event == "line" and frame.f_code.co_name == code_name and left[0]:
            source = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
            if source.strip() == text:
                left[0] -= 1
                raise _Injected(text)
        return tracer

    return tracer


@pytest.mark.parametrize(
    "text", ["waiting.popleft()", "attempt._complete(SERVED)"], ids=["dequeue", "wake"]
)
def test_an_apply_interrupted_just_after_serving_a_take_still_delivers_its_round(
    text: str,
) -> None:
    """An exception lands in the apply that serves a waiting take, after the
    round was handed over and before the take's thread was woken: the take
    still gets the round (its wait looks again now and then), the apply is in
    it, and no dead take stays queued."""
    h = _sum_acc()
    acc = current_table().lookup(h)
    taker = Background(_take, h, 1, None)
    wait_for_waiting(h, 1)
    assert run_traced(lambda: _apply(h, 3.0), _raising_at("_flush_locked", text), _Injected) == (
        False,
        None,
    )
    np.testing.assert_array_equal(taker.result(), np.full(4, 3.0, np.float32))
    stats = _stats(h)
    assert stats["takes_served"] == 1 and stats["waiting"] == 0 and acc.num_waiting() == 0
    assert stats["num_accumulated"] == 0 and lock_is_free(acc)
    raw.DestroyResourceOp(resource=h)


def test_a_destroy_cut_short_fails_the_takes_it_reached_and_can_be_done_again() -> None:
    """An exception lands in a destroy between failing one waiting take and
    the next: the first take fails with CancelledError, the other still
    waits in the accumulator, which is still there; destroying it again
    fails the other take too, and each is counted once."""
    h = _sum_acc()
    acc: Any = current_table().lookup(h)
    first = Background(_take, h, 1, None)
    wait_for_waiting(h, 1)
    second = Background(_take, h, 1, None)
    wait_for_waiting(h, 2)
    raising = _raising_at("close", "attempt._complete(CANCELLED)  # wakes its owner")
    assert run_traced(acc.close, raising, _Injected) == (False, None)
    assert isinstance(first.error(), tfa.errors.CancelledError)  # its wait looked again
    stats = _stats(h)
    assert stats["waiting"] == 1 and stats["takes_cancelled"] == 1 and not acc.closed
    raw.DestroyResourceOp(resource=h)
    assert isinstance(second.error(), tfa.errors.CancelledError)
    assert acc.closed and acc._n_cancelled == 2


class _Boom(Exception):
    pass


def test_a_cancellation_puts_back_the_round_of_a_take_not_yet_claimed() -> None:
    """A take served whose thread has not picked its round up yet (a Session.run
    stopped by Ctrl-C cancels it then): the round goes back, nothing consumed."""
    h = _sum_acc()
    acc: Any = current_table().lookup(h)
    cancellation = Cancellation()
    attempt = acc.try_take(1, cancellation=cancellation)
    _apply(h, 2.0)  # serves it
    assert attempt.done
    assert _stats(h)["takes_served"] == 1 and acc.num_accumulated() == 0
    cancellation.cancel(tfa.errors.CancelledError(None, None, "stopped"))
    stats = _stats(h)
    assert stats["takes_served"] == 0 and stats["global_step"] == 0
    assert stats["num_accumulated"] == 1 and stats["takes_cancelled"] == 1
    assert isinstance(attempt.error, tfa.errors.CancelledError)
    np.testing.assert_array_equal(_take(h, 1), np.full(4, 2.0, np.float32))
    raw.DestroyResourceOp(resource=h)


# --- the opt-in: deferred_interrupts() ---------------------------------------


def test_deferring_is_opt_in_and_puts_the_handler_back() -> None:
    found = signal.getsignal(signal.SIGINT)
    with deferred_interrupts():
        assert signal.getsignal(signal.SIGINT) is not found
        with pytest.raises(KeyboardInterrupt):  # outside tf_accum: at once
            _thread.interrupt_main()
            _marker()
    assert signal.getsignal(signal.SIGINT) is found
    assert sys.getprofile() is None


def test_a_deferred_interrupt_inside_an_apply_follows_it_applied_and_counted() -> None:
    h = _sum_acc([1000])
    acc: Any = current_table().lookup(h)
    original = acc._add_aside_locked
    after: list[int] = []

    def add_then_interrupt(total: Any, gradient: Any) -> None:
        original(total, gradient)
        _thread.interrupt_main()  # lands inside the apply, before it returns
        _marker()

    acc._add_aside_locked = add_then_interrupt
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=np.ones(1000, np.float32))
    with deferred_interrupts(), pytest.raises(KeyboardInterrupt):
        raw.ResourceAccumulatorApplyGradient(
            handle=h, local_step=0, gradient=np.ones(1000, np.float32)
        )
        after.append(1)  # the caller's next call completes, then the interrupt
    del acc._add_aside_locked
    assert after == [1] and sys.getprofile() is None
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 2
    np.testing.assert_array_equal(_take(h, 2), np.full(1000, 2.0, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_a_deferred_take_served_as_the_interrupt_came_gives_its_round_back() -> None:
    """Served, and a gradient in since: as by default, the interrupt stops the
    take at once and its round is merged into the next one (nothing lost)."""
    h = _sum_acc()
    acc: Any = current_table().lookup(h)

    def interrupt_serve_and_go_on() -> None:
        wait_for_waiting(h, 1)
        with acc._lock:  # the take cannot give up before both are in
            _thread.interrupt_main()  # pending while the take is blocked
            _apply(h, 2.0)  # serves it
            _apply(h, 4.0, step=1)  # the next round

    helper = Background(interrupt_serve_and_go_on)
    results: list[np.ndarray[Any, Any]] = []
    with deferred_interrupts(), pytest.raises(KeyboardInterrupt):
        results.append(_take(h, 1, timeout=None))
    helper.result()
    assert results == [] and sys.getprofile() is None
    stats = _stats(h)
    assert stats["takes_served"] == 0 and stats["global_step"] == 1
    assert stats["num_accumulated"] == 2 and stats["takes_interrupted"] == 1
    np.testing.assert_array_equal(_take(h, 2), np.full(4, 6.0, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_a_deferred_block_still_interrupts_a_waiting_take_at_once() -> None:
    h = _sum_acc()
    sender = _sigint_when_waiting(h)
    with deferred_interrupts(), pytest.raises(KeyboardInterrupt):
        _take(h, 1, timeout=WAIT)
    sender.result()
    stats = _stats(h)
    assert stats["waiting"] == 0 and stats["takes_interrupted"] == 1
    raw.DestroyResourceOp(resource=h)


def test_a_delivery_given_back_on_an_ordinary_error_counts_its_takes_as_cancelled() -> None:
    """A public call that took a round and then fails with an ordinary error
    (not Ctrl-C) gives the round back, counted as cancelled, not interrupted."""
    h = _sum_acc()
    _apply(h, 2.0)
    taken = None
    with pytest.raises(_Boom):
        try:
            taken = interrupts.open_delivery()
            _take(h, 1)
            raise _Boom
        except BaseException:
            interrupts.give_back(taken)
            raise
    stats = _stats(h)
    assert stats["takes_cancelled"] == 1 and stats["takes_interrupted"] == 0
    assert stats["num_accumulated"] == 1 and stats["global_step"] == 0
    np.testing.assert_array_equal(_take(h, 1), np.full(4, 2.0, np.float32))
    raw.DestroyResourceOp(resource=h)
