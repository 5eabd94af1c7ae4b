"""A take's round goes back unless the public call that took it returns it:
an exception raised at any line between the take and the return (the raw
op's wrapper, the compat class's ``take_grad`` after the op) gives it back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import line_injector, lock_is_free, run_traced
from tests.test_interrupts import DELIVERY, _Injected
from tf_accum import raw_ops as raw
from tf_accum.accumulators import interrupts
from tf_accum.resources.current import current_table

F32 = tfa.float32
FRESH = 2**40
# The delivery (DELIVERY) gives rounds back; a ContextBlock's one line resets
# its context variable, and an exception before it leaves the variable set (the
# run's resource table, for the tests after this one).
_SKIPPED = "tf_accum.context_blocks"


def _inject_anywhere(k: int, where: list[str]) -> Any:
    """A tracer raising _Injected at the k-th line started in tf_accum (but for
    DELIVERY and _SKIPPED), noting where (see tests.helpers.line_injector)."""

    def traced(name: str) -> bool:
        return name.startswith("tf_accum.") and not name.startswith(_SKIPPED)

    return line_injector(traced, k, _Injected, where=where, left_out=DELIVERY)


def _dense(reduction: str) -> tuple[Any, Callable[[float], None], Callable[[int], float]]:
    acc = tfa.compat.v1.ConditionalAccumulator(F32, shape=[4], reduction_type=reduction)

    def apply(value: float) -> None:
        acc.apply_grad(np.full(4, value, np.float32), local_step=FRESH)

    def take(n: int) -> float:
        return float(acc.take_grad(n)[0])

    return acc, apply, take


def _raw_dense(reduction: str) -> tuple[Any, Callable[[float], None], Callable[[int], float]]:
    acc = tfa.compat.v1.ConditionalAccumulator(F32, shape=[4], reduction_type=reduction)
    h = acc.accumulator_ref

    def apply(value: float) -> None:
        acc.apply_grad(np.full(4, value, np.float32), local_step=FRESH)

    def take(n: int) -> float:
        return float(raw.ResourceAccumulatorTakeGradient(handle=h, num_required=n, dtype=F32)[0])

    return acc, apply, take


def _sparse(reduction: str) -> tuple[Any, Callable[[float], None], Callable[[int], float]]:
    acc = tfa.compat.v1.SparseConditionalAccumulator(F32, shape=[10, 2], reduction_type=reduction)

    def apply(value: float) -> None:
        acc.apply_grad([3], np.full((1, 2), value, np.float32), local_step=FRESH)

    def take(n: int) -> float:
        slices = acc.take_indexed_slices_grad(n)
        assert list(slices.indices) == [3]
        return float(slices.values[0, 0])

    return acc, apply, take


@pytest.mark.parametrize("reduction", ["MEAN", "SUM"])
@pytest.mark.parametrize("make", [_dense, _raw_dense, _sparse], ids=["compat", "raw", "sparse"])
def test_an_exception_at_any_line_before_the_take_returns_gives_the_round_back(
    make: Callable[[str], tuple[Any, Callable[[float], None], Callable[[int], float]]],
    reduction: str,
) -> None:
    """Raise at every line of tf_accum, in turn, that a take of two gradients
    runs: it returns them, or they stay for the next take."""
    acc, apply, take = make(reduction)
    state: Any = current_table().lookup(acc.accumulator_ref)
    mean = reduction == "MEAN"
    lines = 0
    for k in range(1, 400):
        apply(1.0)
        apply(2.0)
        where: list[str] = []
        _, taken = run_traced(lambda: take(2), _inject_anywhere(k, where), _Injected)
        left = int(acc.num_accumulated())
        if taken is not None:
            assert taken == (1.5 if mean else 3.0) and left == 0
            lines = k
            break
        assert left == 2, f"line {k}: lost in {where}"
        assert lock_is_free(state) and state.num_waiting() == 0
        if left:
            assert take(2) == (1.5 if mean else 3.0), f"line {k} ({where})"
        assert int(acc.num_accumulated()) == 0
    assert lines > 20  # it really walked through the code


def test_a_delivery_keeps_what_its_call_returned_and_nested_calls_join_the_outermost() -> None:
    acc = tfa.compat.v1.ConditionalAccumulator(F32, shape=[4], reduction_type="SUM")
    acc.apply_grad(np.ones(4, np.float32), local_step=FRESH)
    taken = interrupts.open_delivery()
    with pytest.raises(KeyboardInterrupt):
        try:
            np.testing.assert_array_equal(acc.take_grad(1), np.ones(4, np.float32))
            assert len(taken) == 1  # the compat call and its raw op joined this one
            raise KeyboardInterrupt  # the outer call is interrupted after the take
        except BaseException:
            interrupts.give_back(taken)
            raise
    assert int(acc.num_accumulated()) == 1
    stats = tfa.accumulator_stats(acc.accumulator_ref)
    assert (stats["takes_served"], stats["takes_interrupted"]) == (0, 1)
    taken = interrupts.open_delivery()
    result = acc.take_grad(1)
    interrupts.close_delivery(taken)
    np.testing.assert_array_equal(result, np.ones(4, np.float32))
    assert int(acc.num_accumulated()) == 0
    assert tfa.accumulator_stats(acc.accumulator_ref)["takes_served"] == 1
    assert getattr(interrupts._local, "open", None) is None  # nothing is left open


@pytest.mark.parametrize("takes", [1, 2], ids=["sequential", "scheduled"])
def test_an_exception_at_any_line_of_a_session_run_fetching_takes_gives_the_rounds_back(
    takes: int,
) -> None:
    """A ``Session.run`` that only fetches what its takes take (one take: run in
    order; two: by the dataflow scheduler): raise at every line of tf_accum it
    runs, in turn: it returns the rounds, or they stay for the next run."""
    tf = tfa.compat.v1
    with tf.Graph().as_default() as graph:
        accs = [
            tf.ConditionalAccumulator(F32, shape=[4], reduction_type="SUM") for _ in range(takes)
        ]
        applies = [acc.apply_grad(tf.ones([4]), local_step=FRESH) for acc in accs]
        fetch = [acc.take_grad(1) for acc in accs]
        counts = [acc.num_accumulated() for acc in accs]
    with tf.Session(graph=graph) as sess:
        sess.run(counts)  # the accumulators exist before the walk
        states: list[Any] = [sess.table.lookup(h) for h in sess.table.live_handles()]
        lines = 0
        for k in range(1, 2000):
            sess.run(applies)
            where: list[str] = []
            _, taken = run_traced(lambda: sess.run(fetch), _inject_anywhere(k, where), _Injected)
            left = sess.run(counts)
            if taken is not None:
                assert [t.tolist() for t in taken] == [[1.0] * 4] * takes and left == [0] * takes
                lines = k
                break
            lost = [n for n in left if n != 1]
            assert not lost, f"line {k}: lost in {where}"
            assert all(lock_is_free(state) and state.num_waiting() == 0 for state in states)
            for acc, n in zip(accs, left, strict=True):
                if n:
                    sess.run(acc.take_grad(1))
        assert lines > 20  # it really walked through the code


def test_a_session_run_whose_take_feeds_another_op_does_not_give_the_round_back() -> None:
    """The take's value went into the variable: failing after that, the run keeps
    the round taken (giving it back would count the gradient twice)."""
    tf = tfa.compat.v1
    with tf.Graph().as_default() as graph:
        acc = tf.ConditionalAccumulator(F32, shape=[4], reduction_type="SUM")
        total = tf.Variable(tf.zeros([4]))
        apply = acc.apply_grad(tf.ones([4]), local_step=FRESH)
        update = total.assign_add(acc.take_grad(1))
        count = acc.num_accumulated()
    with tf.Session(graph=graph) as sess:
        sess.run(total.initializer)
        sess.run(apply)
        from tf_accum.graph import session as session_module

        real = session_module._result
        calls: list[int] = []

        def failing(*args: Any) -> Any:
            calls.append(1)
            raise KeyboardInterrupt

        session_module._result = failing  # type: ignore[assignment]
        try:
            with pytest.raises(KeyboardInterrupt):
                sess.run(update)
        finally:
            session_module._result = real
        assert calls and sess.run(count) == 0
        assert sess.run(total).tolist() == [1.0] * 4
