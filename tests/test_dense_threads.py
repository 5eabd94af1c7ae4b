"""Large dense rounds applied and taken from several threads at once: every
element gets the gradients in one order, and a take never sees half an add."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import numpy as np

import tf_accum as tfa
from tests.helpers import Background
from tests.test_interrupts import FRESH

raw = tfa.raw_ops
F32 = tfa.float32
SIZE = 1 << 19  # elements: each add lasts long enough for the threads to overlap


def _acc(size: int = SIZE) -> int:
    handle: int = raw.ResourceConditionalAccumulator(dtype=F32, shape=[size], reduction_type="SUM")
    return handle


def _apply(h: int, gradient: np.ndarray[Any, Any], step: int = 0) -> None:
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=step, gradient=gradient)


def _take(h: int, n: int, timeout: float | None = 10.0) -> np.ndarray[Any, Any]:
    result: np.ndarray[Any, Any] = raw.ResourceAccumulatorTakeGradient(
        handle=h, num_required=n, dtype=F32, timeout=timeout
    )
    return result


def test_concurrent_adds_give_every_element_the_same_order() -> None:
    """Gradients whose float32 sum depends on the order of the adds, applied by
    four threads at once: every element holds the same sum (the gradients
    reached each element in one order), and it is the sum in some order."""
    size = 1 << 18
    rng = np.random.default_rng(7)
    # magnitudes from 1e-3 to 1e6: almost every reordering rounds differently
    values = (10.0 ** rng.uniform(-3, 6, 160) * rng.choice([-1, 1], 160)).astype(np.float32)
    h = _acc(size)
    _apply(h, np.full(size, 0.5, np.float32))  # the round's first gradient
    barrier = threading.Barrier(4)

    def worker(part: np.ndarray[Any, Any]) -> None:
        barrier.wait(10)
        for v in part:
            _apply(h, np.full(size, v, np.float32))

    workers = [Background(worker, values[i::4]) for i in range(4)]
    for w in workers:
        w.result()
    result = _take(h, 161)
    assert result.dtype == np.float32 and result.shape == (size,)
    assert np.all(result == result[0]), "elements saw the adds in different orders"
    assert abs(float(result[0]) - (0.5 + float(values.astype(np.float64).sum()))) < 1.0
    raw.DestroyResourceOp(resource=h)


def test_many_threads_adding_and_taking_lose_nothing() -> None:
    """Real threads, each adding ones, and a taker of several sizes: every take
    is a whole round (each element equals the gradients it counted), and the
    takes and what is left hold every gradient applied."""
    h = _acc()
    ones = np.ones(SIZE, np.float32)
    appliers, per, takes = 4, 40, 12
    barrier = threading.Barrier(appliers + 1)
    results: list[np.ndarray[Any, Any]] = []

    def applier() -> None:
        barrier.wait(10)
        for _ in range(per):
            _apply(h, ones, FRESH)

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
        _apply(h, ones, FRESH)
        extra += 1
    taking.result()
    for r in results:
        assert np.all(r == r[0]) and r[0] >= 1, "a take saw part of an add"
    left = int(raw.ResourceAccumulatorNumAccumulated(handle=h))
    assert sum(int(r[0]) for r in results) + left == appliers * per + extra
    stats = tfa.accumulator_stats(h)
    assert stats["accepted"] == appliers * per + extra
    assert stats["takes_served"] == takes == len(results)
    raw.DestroyResourceOp(resource=h)
