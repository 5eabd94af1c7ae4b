"""Per-accumulator statistics: what each counter counts, exact under concurrency,
and readable while takes wait."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import Background, wait_for_waiting
from tf_accum import errors
from tf_accum.accumulators.attempts import Cancellation, cancelled_by
from tf_accum.accumulators.base import STATS_KEYS

raw = tfa.raw_ops
F32 = tfa.float32


def _dense() -> int:
    return raw.ResourceConditionalAccumulator(dtype=F32, shape=[2], reduction_type="SUM")


def _apply(h: int, step: int = 0) -> None:
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=step, gradient=[1.0, 1.0])


def test_a_fresh_accumulator_has_zero_counters_and_nobody_waiting() -> None:
    h = _dense()
    stats = tfa.accumulator_stats(h)
    assert list(stats) == list(STATS_KEYS)
    assert stats == {key: 0 for key in STATS_KEYS} | {"head_num_required": None}
    assert all(type(v) is int for k, v in stats.items() if k != "head_num_required")
    raw.DestroyResourceOp(resource=h)


def test_each_counter_counts_its_event() -> None:
    h = _dense()
    _apply(h)
    _apply(h)
    raw.ResourceAccumulatorSetGlobalStep(handle=h, new_global_step=5)
    _apply(h, step=4)  # stale
    with pytest.raises(errors.InvalidArgumentError):
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=9, gradient=[1.0])  # rejected
    raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=F32)
    with pytest.raises(errors.DeadlineExceededError):
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32, timeout=0)
    first = Background(raw.ResourceAccumulatorTakeGradient, handle=h, num_required=3, dtype=F32)
    wait_for_waiting(h, 1)
    cancellation = Cancellation()

    def cancellable() -> Any:
        with cancelled_by(cancellation):
            return raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)

    second = Background(cancellable)
    wait_for_waiting(h, 2)
    stats = tfa.accumulator_stats(h)
    assert stats == {
        "accepted": 2,
        "stale": 1,
        "rejected": 1,
        "takes_served": 1,
        "takes_timed_out": 1,
        "takes_cancelled": 0,
        "takes_interrupted": 0,
        "waiting": 2,
        "head_num_required": 3,
        "num_accumulated": 0,
        "global_step": 6,
    }
    cancellation.cancel(errors.CancelledError(None, None, "session closed"))
    assert isinstance(second.error(), errors.CancelledError)
    assert tfa.accumulator_stats(h)["takes_cancelled"] == 1
    raw.DestroyResourceOp(resource=h)
    assert isinstance(first.error(), errors.CancelledError)
    with pytest.raises(errors.NotFoundError):
        tfa.accumulator_stats(h)


def test_compat_stats_go_through_the_raw_function() -> None:
    acc = tfa.compat.v1.SparseConditionalAccumulator(F32, shape=[4, 1])
    acc.apply_grad([1], [[2.0]])
    acc.apply_grad([1], [[2.0]], local_step=-1)
    assert acc.stats() == tfa.accumulator_stats(acc.accumulator_ref)
    assert (acc.stats()["accepted"], acc.stats()["stale"]) == (1, 1)
    acc.close()
    with pytest.raises(errors.NotFoundError):
        acc.stats()


def test_stats_are_exact_under_concurrency_and_never_wait_for_a_take() -> None:
    """Appliers (some stale, some invalid), takers with and without timeouts, and a
    reader: every snapshot is self-consistent and the totals are exact."""
    h = _dense()
    threads_n, per_thread = 4, 300
    served = [0] * threads_n
    timed_out = [0] * threads_n
    taken_sum = [0.0] * threads_n
    snapshots: list[dict[str, Any]] = []
    stop = threading.Event()

    def applier() -> None:
        for i in range(per_thread):
            if i % 10 == 3:
                _apply(h, step=-1)  # stale (the global step only grows from 0)
            elif i % 10 == 7:
                with contextlib.suppress(errors.InvalidArgumentError):
                    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=[1.0])
            else:
                _apply(h, step=2**40)

    def taker(k: int) -> None:
        while not stop.is_set():
            try:
                result = raw.ResourceAccumulatorTakeGradient(
                    handle=h, num_required=1 + k % 3, dtype=F32, timeout=0.002 * (k + 1)
                )
                served[k] += 1
                taken_sum[k] += float(result[0])
            except errors.DeadlineExceededError:
                timed_out[k] += 1

    def reader() -> None:
        while not stop.is_set():
            snapshots.append(tfa.accumulator_stats(h))

    appliers = [threading.Thread(target=applier) for _ in range(threads_n)]
    others = [threading.Thread(target=taker, args=(k,)) for k in range(threads_n)]
    others.append(threading.Thread(target=reader))
    for thread in appliers + others:
        thread.start()
    for thread in appliers:
        thread.join(30)
    stop.set()
    for thread in others:
        thread.join(30)
    assert not any(thread.is_alive() for thread in appliers + others)
    stats = tfa.accumulator_stats(h)
    good = threads_n * per_thread * 8 // 10
    assert stats["accepted"] == good
    assert stats["stale"] == threads_n * per_thread // 10
    assert stats["rejected"] == threads_n * per_thread // 10
    assert stats["takes_served"] == sum(served)
    assert stats["takes_timed_out"] == sum(timed_out)
    assert stats["waiting"] == 0 and stats["head_num_required"] is None
    accumulated = stats["num_accumulated"]
    assert isinstance(accumulated, int)
    assert sum(taken_sum) + accumulated == good
    assert stats["global_step"] == sum(served)
    assert snapshots
    for earlier, later in zip(snapshots, snapshots[1:], strict=False):
        for key in ("accepted", "stale", "rejected", "takes_served", "takes_timed_out"):
            assert earlier[key] <= later[key]
    for snap in snapshots:
        assert (snap["waiting"] == 0) == (snap["head_num_required"] is None)
        assert snap["global_step"] == snap["takes_served"]
    raw.DestroyResourceOp(resource=h)


def test_reading_stats_while_a_take_blocks_returns_at_once() -> None:
    h = _dense()
    taker = Background(raw.ResourceAccumulatorTakeGradient, handle=h, num_required=5, dtype=F32)
    wait_for_waiting(h, 1)
    reader = Background(tfa.accumulator_stats, h)
    stats = reader.result()
    assert stats["waiting"] == 1 and stats["head_num_required"] == 5
    assert not taker.done()
    for _ in range(5):
        _apply(h)
    np.testing.assert_array_equal(taker.result(), [5.0, 5.0])
    raw.DestroyResourceOp(resource=h)
