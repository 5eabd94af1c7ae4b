"""The non-blocking core: take attempts queued with try_take, served through
their callback, collected, cancelled; and rounds given back after a take
computed its result."""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.test_interrupts import _inject_at_line, _Injected
from tf_accum import raw_ops as raw
from tf_accum.accumulators import dense, division
from tf_accum.accumulators.attempts import Cancellation
from tf_accum.resources.current import current_table

F32 = tfa.float32
FRESH = 2**40


def _accumulator(reduction: str = "MEAN", size: int = 4) -> tuple[int, Any]:
    h: int = raw.ResourceConditionalAccumulator(dtype=F32, shape=[size], reduction_type=reduction)
    return h, current_table().lookup(h)


def _apply(h: int, value: float, size: int = 4) -> None:
    raw.ResourceAccumulatorApplyGradient(
        handle=h, local_step=FRESH, gradient=np.full(size, value, np.float32)
    )


class _Calls:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def test_an_attempt_that_can_be_served_at_once_is_served_and_says_so() -> None:
    h, acc = _accumulator()
    _apply(h, 1.0)
    _apply(h, 3.0)
    calls = _Calls()
    attempt = acc.try_take(2, calls)
    assert attempt.done and calls.count == 1
    np.testing.assert_array_equal(acc.collect(attempt), np.full(4, 2.0, np.float32))
    stats = tfa.accumulator_stats(h)
    assert (stats["takes_served"], stats["global_step"], stats["num_accumulated"]) == (1, 1, 0)
    raw.DestroyResourceOp(resource=h)


def test_attempts_wait_in_the_queue_and_are_served_in_order_by_applies() -> None:
    h, acc = _accumulator("SUM")
    first_calls, second_calls = _Calls(), _Calls()
    first = acc.try_take(2, first_calls)
    second = acc.try_take(1, second_calls)
    assert not first.done and not second.done and acc.num_waiting() == 2
    assert tfa.accumulator_stats(h)["head_num_required"] == 2
    _apply(h, 1.0)
    assert first_calls.count == 0 and second_calls.count == 0  # the front needs two
    _apply(h, 2.0)
    assert first.done and first_calls.count == 1 and not second.done
    _apply(h, 5.0)
    assert second.done and second_calls.count == 1
    np.testing.assert_array_equal(acc.collect(first), np.full(4, 3.0, np.float32))
    np.testing.assert_array_equal(acc.collect(second), np.full(4, 5.0, np.float32))
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("reason", ["timed_out", "cancelled", "interrupted"])
def test_a_cancelled_waiting_attempt_consumes_nothing_and_is_counted(reason: str) -> None:
    h, acc = _accumulator("SUM")
    calls = _Calls()
    attempt = acc.try_take(1, calls)
    assert acc.cancel(attempt, reason)
    assert calls.count == 0 and acc.num_waiting() == 0
    _apply(h, 4.0)  # not eaten by the withdrawn attempt
    stats = tfa.accumulator_stats(h)
    assert stats[f"takes_{reason}"] == 1 and stats["num_accumulated"] == 1
    with pytest.raises(RuntimeError, match="withdrawn"):
        acc.collect(attempt)
    raw.DestroyResourceOp(resource=h)


def test_a_withdrawn_front_attempt_lets_the_next_one_be_served() -> None:
    h, acc = _accumulator("SUM")
    front = acc.try_take(2)
    behind = acc.try_take(1)
    _apply(h, 6.0)
    assert not behind.done
    acc.cancel(front, "interrupted")
    assert behind.done
    np.testing.assert_array_equal(acc.collect(behind), np.full(4, 6.0, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_cancelling_a_served_attempt_not_collected_puts_its_round_back() -> None:
    h, acc = _accumulator()
    attempt = acc.try_take(2)
    _apply(h, 1.0)
    _apply(h, 2.0)
    assert attempt.done
    assert acc.cancel(attempt, "interrupted")
    stats = tfa.accumulator_stats(h)
    assert (stats["takes_served"], stats["global_step"], stats["num_accumulated"]) == (0, 0, 2)
    assert stats["takes_interrupted"] == 1
    np.testing.assert_array_equal(
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=F32),
        np.full(4, 1.5, np.float32),
    )
    raw.DestroyResourceOp(resource=h)


def test_a_collected_small_mean_can_still_go_back_whole() -> None:
    """A MEAN result under 1 MB is divided in a copy: the round is as it was."""
    h, acc = _accumulator()
    _apply(h, 1.0)
    _apply(h, 2.0)
    attempt = acc.try_take(2)
    result = acc.collect(attempt)
    np.testing.assert_array_equal(result, np.full(4, 1.5, np.float32))
    assert acc.can_give_back(attempt)
    assert acc.cancel(attempt, "interrupted")
    assert not acc.can_give_back(attempt)
    stats = tfa.accumulator_stats(h)
    assert (stats["takes_served"], stats["global_step"], stats["num_accumulated"]) == (0, 0, 2)
    np.testing.assert_array_equal(acc.collect(acc.try_take(2)), result)
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("size", [4, 1 << 18], ids=["small", "1 MB"])
def test_an_interrupt_right_after_a_mean_take_divided_its_result(
    monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """A KeyboardInterrupt after the division: a small round goes back whole;
    one of 1 MB or more was divided in its own buffer, and is lost with it."""
    h, acc = _accumulator(size=size)
    _apply(h, 1.0, size)
    _apply(h, 2.0, size)
    real = division.divide_in_place

    def divide_then_interrupt(*args: Any) -> Any:
        real(*args)
        raise KeyboardInterrupt

    monkeypatch.setattr(dense, "divide_in_place", divide_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=F32)
    monkeypatch.undo()
    stats = tfa.accumulator_stats(h)
    if size * 4 < dense.RECYCLE_MIN_BYTES:
        assert (stats["takes_served"], stats["num_accumulated"]) == (0, 2)
        assert stats["takes_interrupted"] == 0  # collected already: not counted
        taken = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=F32)
        np.testing.assert_array_equal(taken, np.full(size, 1.5, np.float32))
    else:
        assert (stats["takes_served"], stats["num_accumulated"]) == (1, 0)
    raw.DestroyResourceOp(resource=h)


def test_destroy_completes_waiting_attempts_with_cancelled_error() -> None:
    h, acc = _accumulator()
    calls = _Calls()
    attempt = acc.try_take(1, calls)
    raw.DestroyResourceOp(resource=h)
    assert attempt.done and calls.count == 1
    with pytest.raises(tfa.errors.CancelledError):
        acc.collect(attempt)
    with pytest.raises(tfa.errors.NotFoundError):
        acc.try_take(1)


def test_waiting_attempts_need_no_thread() -> None:
    h, acc = _accumulator("SUM")
    before = threading.active_count()
    attempts = [acc.try_take(1) for _ in range(2000)]
    assert threading.active_count() == before and acc.num_waiting() == 2000
    for k in range(2000):
        _apply(h, float(k))
    assert all(attempt.done for attempt in attempts)
    np.testing.assert_array_equal(acc.collect(attempts[-1]), np.full(4, 1999.0, np.float32))
    raw.DestroyResourceOp(resource=h)


def test_a_cancellation_fails_a_waiting_attempt_with_its_error() -> None:
    h, acc = _accumulator()
    cancellation = Cancellation()
    calls = _Calls()
    attempt = acc.try_take(1, calls, cancellation)
    cancellation.cancel(tfa.errors.DeadlineExceededError(None, None, "the run's deadline"))
    assert attempt.done and calls.count == 1 and acc.num_waiting() == 0
    with pytest.raises(tfa.errors.DeadlineExceededError, match="the run's deadline"):
        acc.collect(attempt)
    assert tfa.accumulator_stats(h)["takes_cancelled"] == 1
    with pytest.raises(tfa.errors.DeadlineExceededError):
        acc.try_take(1, None, cancellation)  # cancelled already: refused at once
    raw.DestroyResourceOp(resource=h)


def test_a_withdrawal_cut_short_at_any_line_leaves_no_dead_attempt_to_eat_a_round() -> None:
    """An exception at each line of cancel in turn (a Ctrl-C in the thread that
    withdraws): the attempt is withdrawn or still waits, and a gradient that
    comes next goes to whoever really waits for it, never to a dead attempt."""
    h, acc = _accumulator("SUM")
    lines = 0
    for k in range(1, 200):
        attempt = acc.try_take(1)
        sys.settrace(_inject_at_line(k))
        try:
            acc.cancel(attempt, "interrupted")
            finished = True
        except _Injected:
            finished = False
        finally:
            sys.settrace(None)
        if attempt.stage.value == "queued" and attempt in acc._waiting:
            acc.cancel(attempt, "interrupted")  # not withdrawn yet: its owner does it now
        behind = acc.try_take(1)
        _apply(h, float(k))
        assert behind.done, f"line {k}: a dead attempt took the round"
        np.testing.assert_array_equal(acc.collect(behind), np.full(4, float(k), np.float32))
        assert acc.num_waiting() == 0 and acc.num_accumulated() == 0, f"line {k}"
        if finished:
            lines = k
            break
    assert lines > 3  # it really walked through the withdrawal
    raw.DestroyResourceOp(resource=h)
