"""Large dense adds run outside the accumulator's lock, through stripes
(tf_accum/accumulators/stripes.py): several threads add at once, every element
gets the gradients in one order, and a take never sees half an add."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import Background, wait_until
from tests.test_interrupts import _inject_at_line, _Injected
from tf_accum.accumulators import stripes
from tf_accum.resources import current_table

raw = tfa.raw_ops
F32 = tfa.float32
FRESH = 2**40  # a local step no take catches up with
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
    """No add running outside the lock, no stripe or gate held."""
    got = [lock for lock in (*acc._stripes.locks, acc._gate) if lock.acquire(blocking=False)]
    for lock in got:  # only those this check took
        lock.release()
    return len(got) == len(acc._stripes.locks) + 1 and acc._in_flight == 0 and not acc._gate_shut


class _Paused:
    """Stripes.run that stops before adding until ``go`` is set (the first call only)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.go = threading.Event()
        original = stripes.Stripes.run
        paused = self

        def run(self: Any, job: stripes.StripedAdd) -> None:
            if not paused.entered.is_set():
                paused.entered.set()
                assert paused.go.wait(10)
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


def test_an_add_that_fails_leaves_the_round_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy failing the add itself (no memory for its buffers): the error
    surfaces, the gradient is neither added nor counted, nothing stays held."""
    h, acc = _acc()
    _apply(h, np.ones(SIZE, np.float32))

    def no_memory(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError("no memory for the add")

    fake = type("numpy", (), {"add": staticmethod(no_memory)})
    monkeypatch.setattr(stripes, "np", fake)
    with pytest.raises(MemoryError):
        _apply(h, np.arange(2 * SIZE, dtype=np.float32)[::2])
    monkeypatch.undo()
    assert _quiet(acc)
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 1
    np.testing.assert_array_equal(_take(h, 1), np.ones(SIZE, np.float32))


def test_a_take_waits_for_an_add_running_outside_the_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The take is ready (one gradient counted) but an add is running: it is
    served only once the add is done, and its result has both gradients; an
    apply arriving meanwhile waits, then goes into the next round."""
    h, acc = _acc()
    paused = _Paused(monkeypatch)
    _apply(h, np.ones(SIZE, np.float32))
    adding = Background(_apply, h, np.full(SIZE, 2.0, np.float32))
    assert paused.entered.wait(10)
    taking = Background(_take, h, 1, 0.0)  # no time to wait: only the add holds it up
    wait_until(lambda: acc.num_waiting() == 1)
    assert acc._gate_shut
    later = Background(_apply, h, np.full(SIZE, 5.0, np.float32), 2**40)
    assert not taking.finished.wait(0.2) and not later.finished.wait(0.05)
    paused.go.set()
    adding.result()
    np.testing.assert_array_equal(taking.result(), np.full(SIZE, 3.0, np.float32))
    later.result()
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 1
    np.testing.assert_array_equal(_take(h, 1), np.full(SIZE, 5.0, np.float32))
    assert _quiet(acc)


def test_destroying_while_an_add_runs_outside_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    h, acc = _acc()
    paused = _Paused(monkeypatch)
    _apply(h, np.ones(SIZE, np.float32))
    adding = Background(_apply, h, np.ones(SIZE, np.float32))
    assert paused.entered.wait(10)
    taking = Background(_take, h, 2, None)
    wait_until(lambda: acc.num_waiting() == 1)
    raw.DestroyResourceOp(resource=h)
    paused.go.set()
    adding.result()  # it had been accepted: it completes
    assert isinstance(taking.error(), tfa.errors.CancelledError)
    assert acc._in_flight == 0 and not acc._gate_shut
    with pytest.raises(tfa.errors.NotFoundError):
        _apply(h, np.ones(SIZE, np.float32))


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
