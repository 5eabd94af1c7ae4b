"""Steps and counts given as numpy values in graph mode, as TensorFlow 2.21's
graph builder takes them: a numpy float (or bool) is cast to the input's
integer dtype, a float truncating toward zero, as the eager raw ops do
(tests/test_raw_op_values.py); a Python float is still refused. A numpy float
without an integer value is refused when the op is built (docs/departures.md
T21: TensorFlow's cast has no defined result for it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.support import BOUNDED, raw

pytestmark = pytest.mark.usefixtures("graph")

NO_INTEGER = (np.float64("nan"), np.float64("inf"), np.float64(-np.inf), np.float64(1e300))


def _count_after(steps: list[Any], global_step: Any) -> int:
    """How many of ``steps`` a dense accumulator at ``global_step`` accepts."""
    handle = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1])
    done = raw.ResourceAccumulatorSetGlobalStep(handle=handle, new_global_step=global_step)
    for step in steps:
        with tf.control_dependencies([done]):
            done = raw.ResourceAccumulatorApplyGradient(
                handle=handle, local_step=step, gradient=[1.0]
            )
    with tf.control_dependencies([done]):
        count = raw.ResourceAccumulatorNumAccumulated(handle=handle)
    with tf.Session() as sess:
        return int(sess.run(count))


def test_numpy_float_steps_truncate_toward_zero() -> None:
    # global step 2.7 is 2; 1.9 is 1, stale; the others are 2 or 3
    assert _count_after([np.float64(1.9)], np.float64(2.7)) == 0
    steps = [np.float64(2.5), np.float32(2.5), np.float16(3.7), np.array(2.9)]
    assert _count_after(steps, np.float32(2.7)) == 4
    # a numpy bool is 0 or 1, as TensorFlow casts it
    assert _count_after([np.bool_(True)], 2) == 0
    assert _count_after([np.bool_(True)], np.bool_(True)) == 1


def test_numpy_float_counts_truncate_toward_zero() -> None:
    handle = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1])
    applies = [
        raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=0, gradient=[float(v)])
        for v in (1, 3)
    ]
    with tf.control_dependencies(applies):
        # 2.9 is 2: both gradients are taken
        mean = raw.ResourceAccumulatorTakeGradient(
            handle=handle, num_required=np.float64(2.9), dtype=tf.float32
        )
    negative = raw.ResourceAccumulatorTakeGradient(
        handle=handle, num_required=np.float64(-1.5), dtype=tf.float32
    )
    with tf.Session() as sess:
        assert sess.run(mean, options=BOUNDED).tolist() == [2.0]
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be positive, but was -1"):
            sess.run(negative, options=BOUNDED)


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_compat_take_grad_truncates_a_numpy_float(kind: str) -> None:
    if kind == "dense":
        acc: Any = tf.ConditionalAccumulator(tf.float32, shape=[1])
        applies = [acc.apply_grad([1.0], local_step=np.float32(0.5)) for _ in range(2)]
    else:
        acc = tf.SparseConditionalAccumulator(tf.float32, shape=[2])
        applies = [acc.apply_grad([0], [[1.0]], local_step=np.float32(0.5)) for _ in range(2)]
    with tf.control_dependencies(applies):
        taken = acc.take_grad(np.float64(1.9))
    with tf.Session() as sess:
        got = sess.run(taken if kind == "dense" else taken.values, options=BOUNDED)
        assert got.tolist() == ([1.0] if kind == "dense" else [[1.0]])


def test_python_floats_are_still_refused_when_built() -> None:
    handle = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1])
    with pytest.raises(TypeError, match="Expected int64 passed to parameter 'local_step'"):
        raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=2.5, gradient=[1.0])
    with pytest.raises(TypeError, match="Expected int32 passed to parameter 'num_required'"):
        raw.ResourceAccumulatorTakeGradient(handle=handle, num_required=2.0, dtype=tf.float32)
    acc = tf.ConditionalAccumulator(tf.float32, shape=[1])
    with pytest.raises(TypeError, match="Expected int32 passed to parameter 'num_required'"):
        acc.take_grad(2.0)


@pytest.mark.parametrize("bad", NO_INTEGER, ids=repr)
def test_numpy_floats_without_an_integer_value_are_refused_when_built(bad: Any) -> None:
    handle = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1])
    message = "is not a number in int64's range, so it has no integer value"
    with pytest.raises(ValueError, match=f"Argument local_step=.*{message}"):
        raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=bad, gradient=[1.0])
    with pytest.raises(ValueError, match=f"Argument new_global_step=.*{message}"):
        raw.ResourceAccumulatorSetGlobalStep(handle=handle, new_global_step=bad)
    with pytest.raises(ValueError, match=f"Argument num_required=.*{message}"):
        raw.ResourceAccumulatorTakeGradient(handle=handle, num_required=bad, dtype=tf.float32)
    with pytest.raises(ValueError, match=f"Argument num_required=.*{message}"):
        tf.ConditionalAccumulator(tf.float32, shape=[1]).take_grad(bad)


def test_a_count_beyond_int32_is_refused_when_built() -> None:
    handle = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1])
    with pytest.raises(ValueError, match=r"num_required=.* is out of range for int32"):
        raw.ResourceAccumulatorTakeGradient(
            handle=handle, num_required=np.float64(2.0**40), dtype=tf.float32
        )
    # within int64, a step is kept whole
    assert _count_after([np.float64(2.0**40)], np.float64(2.0**40)) == 1


def test_fed_or_computed_steps_keep_their_dtype_rules() -> None:
    # only values given at build time are cast: a float tensor is still refused
    handle = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1])
    with pytest.raises(TypeError, match="Input 'local_step' .* has type float64"):
        raw.ResourceAccumulatorApplyGradient(
            handle=handle, local_step=tf.constant(np.float64(2.5)), gradient=[1.0]
        )
