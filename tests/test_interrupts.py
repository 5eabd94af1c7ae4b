"""Ctrl-C and injected exceptions: no half-applied gradient, lost round, broken lock
or swallowed interrupt (issue 9, item 5). Real signals and ``_thread.interrupt_main``."""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import Background, wait_for_waiting
from tf_accum.accumulators import interrupts
from tf_accum.resources import current_table

raw = tfa.raw_ops
F32 = tfa.float32
FRESH = 2**40  # a local step no take catches up with

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


def _noop() -> None:
    """A call: where a held-back interrupt surfaces."""


def test_the_deferring_handler_is_installed_and_chains_to_the_default() -> None:
    h = _sum_acc()
    assert interrupts.installed()
    with pytest.raises(KeyboardInterrupt):
        _thread.interrupt_main()
        _noop()
    raw.DestroyResourceOp(resource=h)


_IGNORING_CHILD = textwrap.dedent(
    """
    import os, signal
    import numpy as np
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell's background job (`cmd &`) starts
    import tf_accum as tfa
    from tf_accum.accumulators import interrupts
    raw = tfa.raw_ops
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[2], reduction_type="SUM")
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=np.ones(2, np.float32))
    os.kill(os.getpid(), signal.SIGINT)  # ignored: nothing may surface
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=np.ones(2, np.float32))
    taken = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=tfa.float32)
    print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN, interrupts.installed(), taken.tolist())
    signal.signal(signal.SIGINT, signal.default_int_handler)  # given a handler later on
    raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[2])
    print(interrupts.installed())
    """
)


def test_a_process_that_ignores_sigint_keeps_ignoring_it_until_it_gives_it_a_handler() -> None:
    # a job started to survive Ctrl-C must not become interruptible by tf_accum;
    # once it handles SIGINT itself, the next accumulator protects its calls
    done = subprocess.run(
        [sys.executable, "-c", _IGNORING_CHILD], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "[2.0,", "2.0]", "True"]


def test_interrupt_main_during_a_waiting_take_surfaces_and_the_take_is_withdrawn() -> None:
    h = _sum_acc()
    timer = threading.Timer(0.05, _thread.interrupt_main)
    timer.start()
    # interrupt_main does not wake a blocked lock: the take wakes at its timeout,
    # sees the interrupt, and withdraws
    with pytest.raises(KeyboardInterrupt):
        _take(h, 1, timeout=0.5)
    timer.join()
    stats = _stats(h)
    assert stats["waiting"] == 0 and stats["takes_interrupted"] == 1
    assert stats["takes_served"] == 0 and stats["global_step"] == 0
    _apply(h)
    np.testing.assert_array_equal(_take(h, 1), np.ones(4, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_a_real_sigint_interrupts_a_blocked_take_at_once() -> None:
    h = _sum_acc()
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        _take(h, 1, timeout=30)
    assert time.monotonic() - start < 20  # woken by the signal, not the timeout
    timer.join()
    assert _stats(h)["waiting"] == 0
    _apply(h)
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 1
    raw.DestroyResourceOp(resource=h)


def test_a_served_take_returns_its_round_and_the_interrupt_follows() -> None:
    h = _sum_acc()

    def interrupt_then_serve() -> None:
        wait_for_waiting(h, 1)
        _thread.interrupt_main()  # pending while the take is blocked
        _apply(h, 2.0)  # serves the take

    helper = Background(interrupt_then_serve)
    result = None
    with pytest.raises(KeyboardInterrupt):
        # called directly: the interrupt surfaces at this frame's next step
        result = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)
        _noop()
    helper.result()
    assert result is not None  # the round was returned, not lost
    np.testing.assert_array_equal(result, np.full(4, 2.0, np.float32))
    stats = _stats(h)
    assert stats["takes_served"] == 1 and stats["global_step"] == 1
    assert stats["num_accumulated"] == 0
    raw.DestroyResourceOp(resource=h)


def test_an_interrupt_inside_an_apply_is_delivered_after_it_is_applied_and_counted() -> None:
    h = _sum_acc([1000])
    acc = current_table().lookup(h)
    original = acc._add  # type: ignore[attr-defined]

    def add_then_interrupt(total: Any, gradient: Any) -> None:
        original(total, gradient)
        _thread.interrupt_main()  # lands between the add and the count
        _noop()

    acc._add = add_then_interrupt  # type: ignore[attr-defined]
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=np.ones(1000, np.float32))
    with pytest.raises(KeyboardInterrupt):
        raw.ResourceAccumulatorApplyGradient(
            handle=h, local_step=0, gradient=np.ones(1000, np.float32)
        )
        _noop()
    acc._add = original  # type: ignore[attr-defined]
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 2
    result = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)
    np.testing.assert_array_equal(result, np.full(1000, 2.0, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_an_exception_injected_into_a_waiting_take_leaves_the_lock_and_queue_whole() -> None:
    """Any exception out of the wait (here from the wakeup lock itself) withdraws the take."""
    h = _sum_acc()
    acc = current_table().lookup(h)

    class Boom(Exception):
        pass

    class ExplodingLock:
        def __init__(self) -> None:
            self.real = threading.Lock()
            self.real.acquire()

        def acquire(self, *args: Any) -> bool:
            raise Boom

        def release(self) -> None:
            self.real.release()

    import tf_accum.accumulators.base as base_module

    real_attempt = base_module._TakeAttempt

    class Attempt(real_attempt):  # type: ignore[misc, valid-type]
        __slots__ = ()

        def __init__(self, n: int) -> None:
            super().__init__(n)
            self.wakeup = ExplodingLock()  # type: ignore[misc]

    base_module._TakeAttempt = Attempt  # type: ignore[misc, assignment]
    try:
        with pytest.raises(Boom):
            _take(h, 1)
    finally:
        base_module._TakeAttempt = real_attempt  # type: ignore[misc]
    assert acc.num_waiting() == 0
    assert not acc._lock._is_owned()  # type: ignore[attr-defined]
    # the lock is free for other threads
    Background(_apply, h).result()
    np.testing.assert_array_equal(_take(h, 1), np.ones(4, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_a_sigint_storm_conserves_every_gradient() -> None:
    """Main thread applies and takes under a storm of real SIGINTs; workers too.

    Every interrupted apply is applied fully or not at all, every take returns
    its round or leaves it: what was taken plus what is left equals what the
    accumulator accepted, and the lock still works.
    """
    h = _sum_acc()
    stop = threading.Event()
    worker_taken = [0.0]
    errors_seen: list[BaseException] = []

    go = threading.Event()

    def storm() -> None:
        go.wait(10)
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.0005)

    def worker() -> None:
        try:
            while not stop.is_set():
                _apply(h)
                with contextlib.suppress(tfa.errors.DeadlineExceededError):
                    worker_taken[0] += float(_take(h, 2, timeout=0.01)[0])
        except BaseException as exc:  # pragma: no cover - a failure to report
            errors_seen.append(exc)

    workers = [threading.Thread(target=worker) for _ in range(2)]
    storm_thread = threading.Thread(target=storm)
    for thread in workers:
        thread.start()
    storm_thread.start()
    main_taken = 0.0
    interrupts_seen = 0
    ones = np.ones(4, np.float32)
    deadline = time.monotonic() + 1.5
    try:
        go.set()
        while time.monotonic() < deadline:
            result = None
            try:
                raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=ones)
                result = raw.ResourceAccumulatorTakeGradient(
                    handle=h, num_required=1, dtype=F32, timeout=0.01
                )
                _noop()
            except KeyboardInterrupt:
                interrupts_seen += 1
            except tfa.errors.DeadlineExceededError:
                pass
            if result is not None:
                main_taken += float(result[0])
                result = None
    finally:
        stop.set()
        # signals sent just before the storm stopped may still be on their way
        for thread in (storm_thread, *workers):
            while True:
                try:
                    thread.join(10)
                    break
                except KeyboardInterrupt:
                    interrupts_seen += 1
        for _ in range(5):
            try:
                time.sleep(0.01)
                _noop()
            except KeyboardInterrupt:
                interrupts_seen += 1
    assert not errors_seen
    assert not storm_thread.is_alive() and not any(t.is_alive() for t in workers)
    assert interrupts_seen > 0
    stats = _stats(h)
    left = int(raw.ResourceAccumulatorNumAccumulated(handle=h))
    assert main_taken + worker_taken[0] + left == stats["accepted"]
    assert stats["waiting"] == 0
    raw.DestroyResourceOp(resource=h)


def test_a_second_ctrl_c_long_after_the_first_interrupts_a_stuck_call() -> None:
    """A call stuck inside the library gets a first interrupt held back;
    pressing again later raises at once (giving up the call's atomicity)."""
    h = _sum_acc()
    acc = current_table().lookup(h)
    release = threading.Event()
    second = threading.Timer(interrupts.FORCE_AFTER + 0.3, os.kill, (os.getpid(), signal.SIGINT))

    def stuck_add(total: Any, gradient: Any) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # held back: we are inside an apply
        _noop()
        second.start()
        release.wait(10)  # stuck, until the second press

    acc._add = stuck_add  # type: ignore[attr-defined]
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=np.ones(4, np.float32))
    try:
        with pytest.raises(KeyboardInterrupt):
            raw.ResourceAccumulatorApplyGradient(
                handle=h, local_step=0, gradient=np.ones(4, np.float32)
            )
    finally:
        release.set()
        second.join(10)
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 1  # the second never counted
    raw.DestroyResourceOp(resource=h)


class _Injected(Exception):
    pass


def _inject_at_line(k: int) -> Any:
    """A tracer that raises _Injected at the k-th line started in tf_accum's accumulators.

    Only a line's first run in a frame counts: CPython also reports the exit of
    a ``with`` block as its line, where no real asynchronous exception can land
    (the next check for one is after ``__exit__`` has returned), and raising
    there would leave any context manager's lock held.
    """
    seen: set[tuple[int, int]] = set()

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if not frame.f_globals.get("__name__", "").startswith("tf_accum.accumulators"):
            return None
        if event == "line" and (id(frame), frame.f_lineno) not in seen:
            seen.add((id(frame), frame.f_lineno))
            if len(seen) == k:
                raise _Injected(k)
        return tracer

    return tracer


def _recording_injection(k: int, where: list[str]) -> Any:
    """_inject_at_line(k), noting the function it raised in."""
    inner = _inject_at_line(k)

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        try:
            traced = inner(frame, event, arg)
        except _Injected:
            where.append(frame.f_code.co_name)
            raise
        return tracer if traced is not None else None

    return tracer


# Where an exception may still lose a round whole: the few lines that hand it
# over (as for any take served, with or without adds running)
_HAND_OVER = {"_complete_round_locked", "_detach_round_locked", "_seal_locked"}


def _lock_is_free(acc: Any) -> bool:
    def try_lock() -> bool:
        got: bool = acc._lock.acquire(timeout=5)
        if got:
            acc._lock.release()
        return got

    return bool(Background(try_lock).result())


def _walk_injections(call: Any, acc: Any, after: Any) -> int:
    """Run ``call`` with an exception injected at its 1st, 2nd, ... line until it
    completes; after each, check the lock discipline. Returns the number of lines."""
    import sys

    k = 0
    while True:
        k += 1
        assert k < 500
        sys.settrace(_inject_at_line(k))
        try:
            call()
            finished = True
        except _Injected:
            finished = False
        finally:
            sys.settrace(None)
        after()
        assert not acc._lock._is_owned()
        assert _lock_is_free(acc)
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


@pytest.mark.parametrize("reduction", ["SUM", "MEAN"])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_an_exception_at_any_line_of_a_take_loses_at_most_a_whole_round(
    kind: str, reduction: str
) -> None:
    """Raise at every line, in turn, of a take that finds its two gradients: it
    returns them, or they stay for the next take, or, only when the exception
    lands in the hand-over itself or once a MEAN began dividing the round's own
    buffer, the round is lost whole. Never a round whose count disagrees with
    its sum, nor one put back divided: the next take is exact."""
    import sys

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
    lines, lost = 0, 0
    for k in range(1, 300):
        apply(1.0)
        apply(2.0)
        where: list[str] = []
        sys.settrace(_recording_injection(k, where))
        try:
            taken: float | None = take(2)
        except _Injected:
            taken = None
        finally:
            sys.settrace(None)
        left = acc.num_accumulated()
        if taken is not None:
            assert taken == (1.5 if mean else 3.0) and left == 0
        else:
            assert left in (0, 2), f"line {k} ({where}): half a round left"
            if left == 0:
                kept = acc._kept_by_taker == acc._served  # its take began dividing it
                assert where[0] in _HAND_OVER or kept, f"line {k}: lost in {where}"
                lost += not kept  # in the hand-over; once kept, every later line loses it
        assert not acc._lock._is_owned() and _lock_is_free(acc) and acc.num_waiting() == 0
        apply(4.0)  # the round left, if any, plus this one
        assert acc.num_accumulated() == left + 1, f"line {k}"
        total = 4.0 + (3.0 if left else 0.0)
        want = np.float32(total) / np.float32(left + 1) if mean else total
        assert take(1) == want, f"line {k} ({where})"
        if taken is not None:
            lines = k
            break
    assert lines > 10 and lost < lines // 4  # it really walked through the code
    raw.DestroyResourceOp(resource=h)


def test_an_exception_injected_into_a_waiting_thread_withdraws_its_take() -> None:
    import ctypes

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
