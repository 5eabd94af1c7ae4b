"""The seam between ops and table: per-context tables and outside cancellation."""

from __future__ import annotations

import contextvars
import threading
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import Background, wait_for_waiting, wait_until
from tf_accum import errors
from tf_accum.accumulators.attempts import Cancellation, cancelled_by
from tf_accum.resources import LocalResourceTable, current_table, set_table, using_table
from tf_accum.resources import local as local_table

raw = tfa.raw_ops
F32 = tfa.float32


def _dense(**kw: Any) -> int:
    return raw.ResourceConditionalAccumulator(dtype=F32, shape=[1], **kw)


def _apply(h: int, v: float, step: int = 0) -> None:
    raw.ResourceAccumulatorApplyGradient(
        handle=h, local_step=step, gradient=np.array([v], np.float32)
    )


def _count(h: int) -> int:
    return int(raw.ResourceAccumulatorNumAccumulated(handle=h))


def test_a_context_table_holds_its_own_accumulators() -> None:
    own = LocalResourceTable()
    outside = _dense(shared_name="seam-shared")
    with using_table(own):
        assert current_table() is own
        inside = _dense(shared_name="seam-shared")
        _apply(inside, 1.0)
        assert _count(inside) == 1
        with pytest.raises(errors.NotFoundError):
            _count(outside)  # the process's accumulator is not in this table
    assert inside != outside
    assert _count(outside) == 0
    with pytest.raises(errors.NotFoundError):
        _count(inside)
    own.close()
    assert own.live_handles() == []
    raw.DestroyResourceOp(resource=outside)


def test_threads_started_with_the_context_inherit_the_table() -> None:
    own = LocalResourceTable()
    seen: list[object] = []
    with using_table(own):
        context = contextvars.copy_context()
    plain = threading.Thread(target=lambda: seen.append(current_table()))
    inherited = threading.Thread(target=lambda: context.run(lambda: seen.append(current_table())))
    for thread in (plain, inherited):
        thread.start()
        thread.join(10)
    assert seen[0] is not own and seen[1] is own


def test_set_table_returns_the_previous_table() -> None:
    mine = LocalResourceTable()
    previous = set_table(mine)
    try:
        assert current_table() is mine
    finally:
        assert set_table(previous) is mine  # type: ignore[arg-type]
    assert current_table() is previous


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_cancelling_withdraws_a_waiting_take_which_consumes_nothing(kind: str) -> None:
    if kind == "dense":
        h = _dense(reduction_type="SUM")

        def take() -> Any:
            return raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=F32)

        def apply(v: float) -> None:
            _apply(h, v)
    else:
        h = raw.SparseConditionalAccumulator(dtype=F32, shape=[3, 1], reduction_type="SUM")

        def take() -> Any:
            return raw.SparseAccumulatorTakeGradient(handle=h, num_required=2, dtype=F32)

        def apply(v: float) -> None:
            raw.SparseAccumulatorApplyGradient(
                handle=h,
                local_step=0,
                gradient_indices=[0],
                gradient_values=np.array([[v]], np.float32),
                gradient_shape=[],
                has_known_shape=False,
            )

    cancellation = Cancellation()

    def cancellable_take() -> object:
        with cancelled_by(cancellation):
            return take()

    waiting = Background(cancellable_take)
    wait_for_waiting(h, 1)
    apply(1.0)
    deadline = errors.DeadlineExceededError(None, None, "Timed out waiting for notification")
    assert cancellation.cancel(deadline)
    error = waiting.error()
    assert isinstance(error, errors.DeadlineExceededError)
    assert error is not deadline  # each raiser gets its own instance
    assert not cancellation.cancel(deadline)  # one-shot
    wait_for_waiting(h, 0)
    # The withdrawn take consumed nothing: the next take gets both gradients.
    apply(2.0)
    result = take()
    values: Any = result if kind == "dense" else result.values
    np.testing.assert_array_equal(np.ravel(values), [3.0])
    raw.DestroyResourceOp(resource=h)


def test_a_take_joining_a_cancelled_run_fails_at_once_without_queueing() -> None:
    h = _dense()
    cancellation = Cancellation()
    cancellation.cancel(errors.CancelledError(None, None, "TakeGrad operation was cancelled"))
    with cancelled_by(cancellation), pytest.raises(errors.CancelledError):
        raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)
    assert current_table().lookup(h).num_waiting() == 0
    # a take that can complete at once still does: nothing waits, nothing is cancelled
    _apply(h, 4.0)
    with cancelled_by(cancellation):
        np.testing.assert_array_equal(
            raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32), [4.0]
        )
    raw.DestroyResourceOp(resource=h)


def test_cancelling_the_head_lets_the_take_behind_it_complete() -> None:
    h = _dense()
    cancellation = Cancellation()

    def head() -> object:
        with cancelled_by(cancellation):
            return raw.ResourceAccumulatorTakeGradient(handle=h, num_required=3, dtype=F32)

    first = Background(head)
    wait_for_waiting(h, 1)
    second = Background(raw.ResourceAccumulatorTakeGradient, handle=h, num_required=1, dtype=F32)
    wait_for_waiting(h, 2)
    _apply(h, 5.0)
    assert not second.done()  # head-of-line blocking
    cancellation.cancel(errors.CancelledError(None, None, "TakeGrad operation was cancelled"))
    assert isinstance(first.error(), errors.CancelledError)
    np.testing.assert_array_equal(second.result(), [5.0])
    raw.DestroyResourceOp(resource=h)


def test_destroyed_labels_are_remembered_only_up_to_a_bound() -> None:
    table = LocalResourceTable()
    with using_table(table):
        first = _dense(shared_name="seam-first")
        raw.DestroyResourceOp(resource=first)
        with pytest.raises(errors.NotFoundError, match="localhost/seam-first/"):
            _count(first)
        for _ in range(local_table.REMEMBERED_DESTROYED):
            raw.DestroyResourceOp(resource=_dense())
        assert len(table._gone) == local_table.REMEMBERED_DESTROYED
        with pytest.raises(errors.NotFoundError, match=f"<handle {first}>"):
            _count(first)


def test_a_take_cancelled_while_an_apply_races_it_is_served_or_withdrawn_whole() -> None:
    """Whatever wins, every accepted gradient is taken exactly once."""
    for _ in range(50):
        h = _dense(reduction_type="SUM")
        cancellation = Cancellation()

        def take(c: Cancellation = cancellation, handle: int = h) -> object:
            with cancelled_by(c):
                return raw.ResourceAccumulatorTakeGradient(handle=handle, num_required=1, dtype=F32)

        waiting = Background(take)
        wait_for_waiting(h, 1)
        applier = Background(_apply, h, 1.0)
        cancellation.cancel(errors.CancelledError(None, None, "TakeGrad operation was cancelled"))
        applier.result()
        error = waiting.error()

        def no_take_waits(handle: int = h) -> bool:
            return current_table().lookup(handle).num_waiting() == 0

        wait_until(no_take_waits)
        taken = 0.0 if error is not None else float(waiting.result()[0])
        left = _count(h)
        assert taken + left == 1.0
        raw.DestroyResourceOp(resource=h)
