"""Large dense adds run outside the accumulator's lock, through stripes
(tf_accum/accumulators/stripes.py): several threads add at once, every element
gets the gradients in one order, and a take never sees half an add."""

from __future__ import annotations

import ctypes
import itertools
import sys
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import Background, wait_until
from tests.test_interrupts import (
    _HAND_OVER,
    FRESH,
    _inject_at_line,
    _Injected,
    _recording_injection,
)
from tf_accum.accumulators import stripes
from tf_accum.accumulators.cancellation import Cancellation
from tf_accum.resources import current_table

raw = tfa.raw_ops
F32 = tfa.float32
SIZE = 4096  # elements; the tests lower stripes.MIN_ELEMENTS to reach the path


@pytest.fixture(autouse=True)
def small_stripes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(stripes, "MIN_ELEMENTS", 1024)
    yield


def _acc(reduction: str = "SUM", size: int = SIZE) -> tuple[int, Any]:
    h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[size], reduction_type=reduction)
    return h, current_table().lookup(h)


def _apply(h: int, gradient: np.ndarray[Any, Any], step: int = 0) -> None:
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=step, gradient=gradient)


def _take(h: int, n: int, timeout: float | None = 10.0) -> np.ndarray[Any, Any]:
    result: np.ndarray[Any, Any] = raw.ResourceAccumulatorTakeGradient(
        handle=h, num_required=n, dtype=F32, timeout=timeout
    )
    return result


def _quiet(acc: Any) -> bool:
    """No add running outside the lock, no stripe held, the gate open."""
    got = [lock for lock in acc._stripes.locks if lock.acquire(blocking=False)]
    for lock in got:  # only those this check took
        lock.release()
    gate_open = acc._gate.is_set() and not acc._gate_shut
    return len(got) == len(acc._stripes.locks) and acc._in_flight == 0 and gate_open


class _Paused:
    """Stripes.run that stops before adding, call by call: the k-th call (from
    0, up to ``count``) sets ``entered[k]`` and waits for ``go[k]``; later
    calls run straight through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, count: int = 1) -> None:
        self.entered = [threading.Event() for _ in range(count)]
        self.go = [threading.Event() for _ in range(count)]
        calls = iter(range(count))
        numbering = threading.Lock()
        original = stripes.Stripes.run
        paused = self

        def run(self: Any, job: stripes.StripedAdd) -> None:
            with numbering:
                k = next(calls, None)
            if k is not None:
                paused.entered[k].set()
                assert paused.go[k].wait(10)
            original(self, job)

        monkeypatch.setattr(stripes.Stripes, "run", run)


def test_concurrent_adds_give_every_element_the_same_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gradients whose float32 sum depends on the order of the adds: if some
    stripe received them in another order than the rest, the sum would not be
    the same in every element. And it is the sum in some order of the adds."""
    size = 1 << 18  # adds long enough to overlap
    rng = np.random.default_rng(7)
    # magnitudes from 1e-3 to 1e6: almost every reordering rounds differently
    values = (10.0 ** rng.uniform(-3, 6, 160) * rng.choice([-1, 1], 160)).astype(np.float32)
    splits: list[bool] = []
    original = stripes.Stripes.run

    def spy(self: Any, job: stripes.StripedAdd) -> None:
        splits.append(len(job.bounds) > 1)
        original(self, job)

    monkeypatch.setattr(stripes.Stripes, "run", spy)
    # On a loaded machine the four threads may happen to run one after another;
    # each attempt checks the order, and attempts go on until adds did overlap.
    for _attempt in range(6):
        h, acc = _acc(size=size)
        _apply(h, np.full(size, 0.5, np.float32))  # the round's first gradient
        barrier = threading.Barrier(4)

        def worker(h: int, barrier: threading.Barrier, part: np.ndarray[Any, Any]) -> None:
            barrier.wait(10)
            for v in part:
                _apply(h, np.full(size, v, np.float32))

        workers = [Background(worker, h, barrier, values[i::4]) for i in range(4)]
        for w in workers:
            w.result()
        result = _take(h, 161)
        assert result.dtype == np.float32 and result.shape == (size,)
        assert np.all(result == result[0]), "stripes saw the adds in different orders"
        assert abs(float(result[0]) - (0.5 + float(values.astype(np.float64).sum()))) < 1.0
        assert _quiet(acc)
        raw.DestroyResourceOp(resource=h)
        if any(splits):
            break
    assert any(splits), "no add ran alongside another: the test did not exercise stripes"


def test_striped_sum_equals_the_serial_sum_bit_for_bit() -> None:
    """One thread: the adds (whole, through the stripes) give numpy's own sum."""
    h, acc = _acc()
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal(SIZE).astype(np.float32) for _ in range(5)]
    for g in grads:
        _apply(h, g)
    expected = grads[0].copy()
    for g in grads[1:]:
        expected += g
    np.testing.assert_array_equal(_take(h, 5), expected)
    assert _quiet(acc)


def test_split_adds_of_odd_layouts_still_add_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gradient that cannot be split without a copy (strided, another dtype
    converted by the op, sharing memory) is added in one call, still in order."""
    h, acc = _acc()
    base = np.arange(2 * SIZE, dtype=np.float32)
    strided = base[::2]
    pieces: list[int] = []
    original = stripes.Stripes.run

    def spy(self: Any, job: stripes.StripedAdd) -> None:
        pieces.append(len(job.bounds))
        original(self, job)

    monkeypatch.setattr(stripes.Stripes, "run", spy)
    _apply(h, np.ones(SIZE, np.float32))
    acc._in_flight += 1  # pretend another add runs: a splittable gradient would split
    _apply(h, strided)
    _apply(h, np.zeros(SIZE, np.float32))
    acc._in_flight -= 1
    assert pieces == [1, stripes.STRIPES]
    assert not stripes.splittable(np.zeros(SIZE, np.float32), strided)
    assert not stripes.splittable(base[:SIZE], base[:SIZE])
    np.testing.assert_array_equal(_take(h, 3), 1 + strided)
    assert _quiet(acc)


class _LockThatRaises:
    """A lock whose ``acquire`` raises KeyboardInterrupt instead of acquiring,
    once, when a countdown shared by all such locks reaches zero (as a Ctrl-C
    interrupting a blocked acquire in the main thread does)."""

    countdown = -1

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        _LockThatRaises.countdown -= 1
        if _LockThatRaises.countdown == 0:
            raise KeyboardInterrupt
        if not blocking:
            return self.lock.acquire(False)
        # bounded: a lock taken twice by one add fails the test instead of hanging it
        assert self.lock.acquire(True, 10 if timeout < 0 else timeout), "a stripe never let go"
        return True

    def release(self) -> None:
        self.lock.release()

    def locked(self) -> bool:
        return self.lock.locked()


@pytest.mark.parametrize("split", [False, True])
def test_an_add_stopped_at_any_lock_is_finished_once_and_lets_every_lock_go(
    monkeypatch: pytest.MonkeyPatch, split: bool
) -> None:
    """A KeyboardInterrupt raised by each of an add's lock acquires in turn
    (whole: all four before the add; split: one per piece, between pieces):
    Stripes.finish completes the add from where it stopped, every element
    gets the gradient exactly once, and no lock stays held."""
    monkeypatch.setattr(stripes, "threading", SimpleNamespace(Lock=_LockThatRaises))
    gradient = np.arange(SIZE, dtype=np.float32)
    for k in range(1, stripes.STRIPES + 1):
        lanes = stripes.Stripes()
        total = np.ones(SIZE, np.float32)
        job = lanes.prepare(total, gradient, split)
        assert len(job.bounds) == (stripes.STRIPES if split else 1)
        _LockThatRaises.countdown = k
        with pytest.raises(KeyboardInterrupt):
            lanes.run(job)
        assert not job.complete
        held = [lock for lock in lanes.locks if lock.locked()]
        # whole: the locks before the k-th; split: the one of the piece before
        assert len(held) == (k - 1 if not split else int(k > 1))
        lanes.finish(job)
        assert job.complete
        assert not any(lock.locked() for lock in lanes.locks)
        np.testing.assert_array_equal(total, 1 + gradient)
        if split:  # the pieces before the k-th were added before the interrupt
            assert job.done == stripes.STRIPES
        lanes.finish(job)  # again: nothing more is added
        np.testing.assert_array_equal(total, 1 + gradient)


def test_an_exception_after_an_add_ran_finds_it_complete() -> None:
    """An add whose every step ran is complete before it is settled, and
    finishing it adds nothing and lets no lock go twice."""
    lanes = stripes.Stripes()
    total = np.zeros(SIZE, np.float32)
    for split in (False, True):
        job = lanes.prepare(total, np.ones(SIZE, np.float32), split)
        lanes.run(job)
        assert job.complete
        lanes.finish(job)
        assert job.complete and not job.held
    np.testing.assert_array_equal(total, np.full(SIZE, 2, np.float32))
    assert not any(lock.locked() for lock in lanes.locks)


def test_the_steps_of_an_add_keep_the_order_of_the_stripes() -> None:
    """A whole add takes every lock before it adds and lets them go after; a
    split one holds piece i's lock while it adds piece i, takes the next lock
    before it lets that one go, and holds at most two at a time."""
    for pieces in (1, stripes.STRIPES):
        steps = stripes.steps_of(stripes.STRIPES, pieces)
        held: list[int] = []
        added = []
        for what, i in steps:
            if what == stripes.TAKE:
                assert i not in held and (not held or i > held[-1])
                held.append(i)
            elif what == stripes.LET_GO:
                held.remove(i)
            else:
                assert held == (list(range(stripes.STRIPES)) if pieces == 1 else [i])
                added.append(i)
            assert len(held) <= (stripes.STRIPES if pieces == 1 else 2)
        assert added == list(range(pieces)) and not held


def _no_memory_for_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make numpy's add in the stripes fail as it would with no memory for its
    buffers (reached by a gradient added whole: see _STRIDED)."""

    def no_memory(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError("no memory for the add")

    monkeypatch.setattr(stripes, "np", type("numpy", (), {"add": staticmethod(no_memory)}))


# a gradient the stripes add whole, in one numpy call (not splittable)
_STRIDED = np.arange(2 * SIZE, dtype=np.float32)[::2]


def test_an_add_that_fails_leaves_the_round_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy failing the add itself (no memory for its buffers): the error
    surfaces, the gradient is neither added nor counted, nothing stays held."""
    h, acc = _acc()
    _apply(h, np.ones(SIZE, np.float32))
    _no_memory_for_adds(monkeypatch)
    with pytest.raises(MemoryError):
        _apply(h, _STRIDED)
    monkeypatch.undo()
    assert _quiet(acc)
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 1
    np.testing.assert_array_equal(_take(h, 1), np.ones(SIZE, np.float32))


def _full(value: float) -> np.ndarray[Any, Any]:
    return np.full(SIZE, value, np.float32)


def _paused_add(h: int, paused: _Paused, k: int = 0) -> Background:
    """Apply 2.0 in the background; it stops (as the k-th paused add) outside the lock."""
    adding = Background(_apply, h, _full(2.0), FRESH)
    assert paused.entered[k].wait(10)
    return adding


def test_a_take_ready_on_counted_gradients_is_committed_while_an_add_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The take is ready on the gradient already counted while a second one is
    added outside the lock: it is committed at once (the global step goes up,
    the next round starts and takes gradients, a timeout no longer applies) and
    returns once that add is done, with both gradients."""
    h, acc = _acc()
    paused = _Paused(monkeypatch)
    _apply(h, _full(1.0))
    adding = _paused_add(h, paused)
    taking = Background(_take, h, 1, 0.0)  # no time to wait: it must not time out
    wait_until(lambda: acc.global_step() == 1)
    assert acc.num_waiting() == 0 and not acc._gate_shut
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 0
    _apply(h, _full(5.0), 1)  # into the next round, without waiting for the add
    _apply(h, _full(7.0), 0)  # stale: the step has gone up
    assert not taking.finished.wait(0.2)  # its round is not whole yet
    paused.go[0].set()
    adding.result()
    np.testing.assert_array_equal(taking.result(), _full(3.0))
    stats = tfa.accumulator_stats(h)
    assert (stats["accepted"], stats["stale"], stats["takes_served"]) == (3, 1, 1)
    assert (stats["num_accumulated"], stats["global_step"], stats["waiting"]) == (1, 1, 0)
    assert stats["takes_timed_out"] == 0
    np.testing.assert_array_equal(_take(h, 1), _full(5.0))
    assert _quiet(acc) and acc._sealed is None


def test_a_second_round_ready_while_one_is_committed_waits_at_the_gate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One round at a time is committed with adds still running: a take ready on
    the next round meanwhile shuts the gate, applies wait at it, and once the
    first round is whole the second is committed and the gate opens."""
    h, acc = _acc()
    paused = _Paused(monkeypatch, 2)
    _apply(h, _full(1.0))
    first_add = _paused_add(h, paused, 0)
    first_take = Background(_take, h, 1)
    wait_until(lambda: acc.global_step() == 1)
    _apply(h, _full(10.0), FRESH)  # the second round's first gradient
    second_add = _paused_add(h, paused, 1)
    second_take = Background(_take, h, 1)
    wait_until(lambda: acc._gate_shut)
    assert acc.num_waiting() == 1 and acc.global_step() == 1
    later = Background(_apply, h, _full(100.0), FRESH)
    assert not later.finished.wait(0.2)  # held at the gate
    paused.go[0].set()
    first_add.result()
    np.testing.assert_array_equal(first_take.result(), _full(3.0))
    later.result()  # the gate opened: the second round was committed
    assert acc.global_step() == 2 and not second_take.done()
    paused.go[1].set()
    second_add.result()
    np.testing.assert_array_equal(second_take.result(), _full(12.0))
    np.testing.assert_array_equal(_take(h, 1), _full(100.0))
    assert _quiet(acc) and acc._sealed is None


def test_a_committed_take_ignores_a_cancellation_and_returns_its_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h, acc = _acc()
    paused = _Paused(monkeypatch)
    _apply(h, _full(1.0))
    adding = _paused_add(h, paused)
    cancellation = Cancellation()
    taking = Background(acc.take, 1, None, cancellation)
    wait_until(lambda: acc.global_step() == 1)
    cancellation.cancel(tfa.errors.CancelledError(None, None, "the run was cancelled"))
    assert not taking.finished.wait(0.1)
    paused.go[0].set()
    adding.result()
    np.testing.assert_array_equal(taking.result(), _full(3.0))
    assert tfa.accumulator_stats(h)["takes_cancelled"] == 0
    assert _quiet(acc)


@pytest.mark.parametrize("next_round", [False, True], ids=["nothing since", "next round begun"])
def test_an_exception_injected_into_a_committed_take_puts_its_whole_round_back(
    monkeypatch: pytest.MonkeyPatch, next_round: bool
) -> None:
    """Like a served take's, a committed take's round goes back when something
    other than Ctrl-C surfaces in its thread: the exception surfaces at once,
    and the round goes back once its adds are done: undone if nothing has
    happened since, else merged into the next round."""
    h, acc = _acc()
    paused = _Paused(monkeypatch)
    _apply(h, _full(1.0))
    adding = _paused_add(h, paused)
    taking = Background(_take, h, 1, 0.2)  # its wait wakes now and then
    wait_until(lambda: acc.global_step() == 1)
    if next_round:
        _apply(h, _full(5.0), FRESH)
    thread_id = taking._thread.ident
    assert thread_id is not None
    set_async = ctypes.pythonapi.PyThreadState_SetAsyncExc
    assert set_async(ctypes.c_ulong(thread_id), ctypes.py_object(_Injected)) == 1
    assert isinstance(taking.error(), _Injected)  # no wait for the adds
    assert acc._sealed is not None  # its round goes back once they are done
    paused.go[0].set()
    adding.result()
    stats = tfa.accumulator_stats(h)
    assert stats["takes_interrupted"] == 1
    if next_round:  # merged: the step stays where the take moved it
        assert (stats["num_accumulated"], stats["global_step"]) == (3, 1)
        assert stats["takes_served"] == 0
        np.testing.assert_array_equal(_take(h, 3), _full(8.0))
    else:
        assert (stats["num_accumulated"], stats["global_step"]) == (2, 0)
        assert stats["takes_served"] == 0
        np.testing.assert_array_equal(_take(h, 2), _full(3.0))
    assert _quiet(acc)


def test_a_committed_round_is_whole_when_an_exception_hits_the_landing_of_its_add() -> None:
    """Raise at every line, in turn, of the landing of the add a committed take
    waits for (and land again, as an interrupted apply does): the take gets
    both gradients, counted once, and nothing stays held."""
    h, acc = _acc()
    lines = 0
    for k in range(1, 200):
        _apply(h, _full(1.0), FRESH)
        total = acc._round
        flight = acc._stripes.prepare(total, _full(2.0), False)
        with acc._lock:
            flight.round, acc._in_flight = acc._served, acc._in_flight + 1
        acc._stripes.run(flight)  # added, not yet counted: the take is ready on one
        taking = Background(_take, h, 1)
        wait_until(lambda: acc._sealed is not None)
        sys.settrace(_inject_at_line(k))
        try:
            acc._land(flight)
            finished = True
        except _Injected:
            finished = False
            acc._land(flight)
        finally:
            sys.settrace(None)
        np.testing.assert_array_equal(taking.result(), _full(3.0), err_msg=f"line {k}")
        stats = tfa.accumulator_stats(h)
        assert stats["num_accumulated"] == 0 and stats["accepted"] == 2 * k, f"line {k}"
        assert _quiet(acc) and acc._sealed is None, f"line {k}"
        if finished:
            lines = k
            break
    assert lines > 5  # it really walked through the code
    raw.DestroyResourceOp(resource=h)


def test_an_exception_at_any_line_of_a_take_that_commits_a_round_keeps_it_whole() -> None:
    """Raise at every line, in turn, of a take that commits a round while an
    add into it still runs. The take never hangs; it returns both gradients, or
    they are left for the next take (withdrawn, or put back once whole), or,
    only when the exception lands in the hand-over itself, the round is lost
    whole. Never half a round, no add left counted as running, and the next
    round's take holds exactly what it counted."""
    h, acc = _acc()
    lines, lost = 0, 0
    for k in range(1, 300):
        with pytest.MonkeyPatch.context() as patch:
            paused = _Paused(patch)
            _apply(h, _full(1.0), FRESH)
            adding = _paused_add(h, paused)
            where: list[str] = []

            def traced(k: int = k, where: list[str] = where) -> Any:
                sys.settrace(_recording_injection(k, where))
                try:
                    return acc.take(1, 10.0)
                finally:
                    sys.settrace(None)

            taking = Background(traced)

            def committed_or_over(taking: Background = taking) -> bool:
                return acc._sealed is not None or taking.done()

            # the add goes on once the take has committed the round, or given up
            wait_until(committed_or_over)
            paused.go[0].set()
            adding.result()
            error = taking.error()
            left = int(raw.ResourceAccumulatorNumAccumulated(handle=h))
            if error is None:
                np.testing.assert_array_equal(taking.result(), _full(3.0))
                assert left == 0
            else:
                assert isinstance(error, _Injected)
                assert left in (0, 2), f"line {k} ({where}): half a round left"
                if left == 0:
                    assert where[0] in _HAND_OVER, f"line {k}: lost in {where}"
                    lost += 1
            assert acc._in_flight == 0 and acc._sealed is None and _quiet(acc), f"line {k}"
            assert acc.num_waiting() == 0 and not acc._lock._is_owned()
            _apply(h, _full(4.0), FRESH)  # the round left, if any, plus this one
            assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == left + 1
            expected = _full(4.0 + (3.0 if left else 0.0))
            np.testing.assert_array_equal(_take(h, 1), expected, err_msg=f"line {k}")
        if error is None:
            lines = k
            break
    assert lines > 30 and lost < lines // 4  # it really walked through the code
    raw.DestroyResourceOp(resource=h)


def test_an_add_failing_in_a_committed_round_is_not_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """numpy failing an add (no memory for its buffers) into a round already
    committed to its take: the error surfaces in the apply, and the take gets
    the round without it, counted without it (a mean of one)."""
    h, acc = _acc("MEAN")
    paused = _Paused(monkeypatch)
    _apply(h, _full(4.0))
    adding = Background(_apply, h, _STRIDED, FRESH)
    assert paused.entered[0].wait(10)
    taking = Background(_take, h, 1)
    wait_until(lambda: acc._sealed is not None)
    _no_memory_for_adds(monkeypatch)
    paused.go[0].set()
    assert isinstance(adding.error(), MemoryError)
    np.testing.assert_array_equal(taking.result(), _full(4.0))
    stats = tfa.accumulator_stats(h)
    assert (stats["accepted"], stats["takes_served"], stats["num_accumulated"]) == (1, 1, 0)
    monkeypatch.undo()
    assert _quiet(acc) and acc._sealed is None


def test_many_threads_adding_and_taking_lose_nothing() -> None:
    """Real threads, each adding ones, and a taker of several sizes: every take
    is a whole round (each element equals the gradients it counted), and the
    takes and what is left hold every gradient applied."""
    h, acc = _acc()
    appliers, per, takes = 4, 40, 12
    barrier = threading.Barrier(appliers + 1)
    results: list[np.ndarray[Any, Any]] = []

    def applier() -> None:
        barrier.wait(10)
        for _ in range(per):
            _apply(h, _full(1.0), FRESH)

    def taker() -> None:
        barrier.wait(10)
        for n in itertools.islice(itertools.cycle((1, 3, 8)), takes):
            results.append(_take(h, n))

    taking = Background(taker)
    for w in [Background(applier) for _ in range(appliers)]:
        w.result()
    extra = 0
    # the last takes may need more gradients than are left: one at a time,
    # each given time to serve whoever it completes
    while not taking.finished.wait(0.01):
        assert extra < 8 * takes, "the taker is stuck"
        _apply(h, _full(1.0), FRESH)
        extra += 1
    taking.result()
    for r in results:
        assert np.all(r == r[0]) and r[0] >= 1, "a take saw part of an add"
    left = int(raw.ResourceAccumulatorNumAccumulated(handle=h))
    assert sum(int(r[0]) for r in results) + left == appliers * per + extra
    stats = tfa.accumulator_stats(h)
    assert stats["accepted"] == appliers * per + extra
    assert stats["takes_served"] == takes == len(results)
    assert _quiet(acc) and acc._sealed is None


def test_destroying_while_an_add_runs_outside_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The take is not ready on the gradients counted: it waits, and destroying
    cancels it; the add that had begun completes."""
    h, acc = _acc()
    paused = _Paused(monkeypatch)
    _apply(h, np.ones(SIZE, np.float32))
    adding = _paused_add(h, paused)
    taking = Background(_take, h, 2, None)
    wait_until(lambda: acc.num_waiting() == 1)
    raw.DestroyResourceOp(resource=h)
    paused.go[0].set()
    adding.result()  # it had been accepted: it completes
    assert isinstance(taking.error(), tfa.errors.CancelledError)
    assert acc._in_flight == 0 and not acc._gate_shut
    with pytest.raises(tfa.errors.NotFoundError):
        _apply(h, np.ones(SIZE, np.float32))


def test_destroying_while_a_committed_take_waits_for_its_add(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Committed before the destroy, the take is served: it returns its round,
    with every gradient counted (a mean of two)."""
    h, acc = _acc("MEAN")
    paused = _Paused(monkeypatch)
    _apply(h, _full(1.0))
    adding = _paused_add(h, paused)
    taking = Background(_take, h, 1, None)
    wait_until(lambda: acc._sealed is not None)
    raw.DestroyResourceOp(resource=h)
    paused.go[0].set()
    adding.result()
    np.testing.assert_array_equal(taking.result(), _full(1.5))
    assert acc._in_flight == 0 and acc._sealed is None and not acc._gate_shut


@pytest.mark.parametrize("alongside", [True, False], ids=["split", "whole"])
def test_an_exception_injected_at_any_line_of_a_striped_add_adds_it_whole(
    alongside: bool,
) -> None:
    """Raise at every line, in turn, of an apply that adds alongside another
    (stripe by stripe) or alone (whole): the gradient is added exactly once and
    counted, or neither, and no stripe, gate or lock is left held."""
    h, acc = _acc()
    ones = np.ones(SIZE, np.float32)
    lines = 0
    for k in range(1, 500):
        _apply(h, ones, FRESH)  # the round's first gradient
        acc._in_flight += alongside  # pretend another add runs: this one splits
        sys.settrace(_inject_at_line(k))
        try:
            _apply(h, ones, FRESH)
            finished = True
        except _Injected:
            finished = False
        finally:
            sys.settrace(None)
        acc._in_flight -= alongside
        count = int(raw.ResourceAccumulatorNumAccumulated(handle=h))
        total = _take(h, 1)
        assert _quiet(acc), f"line {k}"
        assert not acc._lock._is_owned()
        # added whole exactly when counted (or, injected before the flight, neither)
        assert np.all(total == total[0]) and float(total[0]) in (1.0, 2.0), f"line {k}"
        assert float(total[0]) == count, f"line {k}: sum {total[0]}, count {count}"
        if finished:
            lines = k
            break
    assert lines > 10  # it really walked through the code
    raw.DestroyResourceOp(resource=h)
