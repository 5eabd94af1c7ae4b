"""Raw-op value conversion against TensorFlow 2.21's eager raw ops (issue 26):
Python floats beyond float32, objects that are no values, and numpy floats as
steps and counts (truncated, as TensorFlow casts them; departure T21 for
those without an integer value)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import tf_accum as tfa
from tf_accum import errors

raw = tfa.raw_ops
OUT_OF_FLOAT32 = (
    r"^Can't convert Python sequence with a value out of range for a double-precision float\.$"
)


@pytest.fixture
def dense() -> Iterator[int]:
    handle = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
    yield handle
    raw.DestroyResourceOp(resource=handle)


def count(handle: int) -> int:
    return int(raw.ResourceAccumulatorNumAccumulated(handle=handle))


def test_python_floats_beyond_float32_are_refused(dense: int) -> None:
    for gradient in ([1e300], [-1e300], [1e39], [3.5e38], [[1.0], [1e300]], (1e300,)):
        with pytest.raises(ValueError, match=OUT_OF_FLOAT32):
            raw.ResourceAccumulatorApplyGradient(handle=dense, local_step=0, gradient=gradient)
    assert count(dense) == 0
    # rounding to float32's largest value is in range, and infinities are values
    raw.ResourceAccumulatorApplyGradient(handle=dense, local_step=0, gradient=[3.40282356e38])
    raw.ResourceAccumulatorApplyGradient(handle=dense, local_step=0, gradient=[float("inf")])
    taken = raw.ResourceAccumulatorTakeGradient(handle=dense, num_required=2, dtype=tfa.float32)
    assert taken.dtype == np.float32 and taken.tolist() == [float("inf")]


def test_python_floats_beyond_float32_in_sparse_values() -> None:
    handle = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[2, 1])
    with pytest.raises(ValueError, match=OUT_OF_FLOAT32):
        raw.SparseAccumulatorApplyGradient(
            handle=handle, local_step=0, gradient_indices=[0], gradient_values=[[1e300]],
            gradient_shape=[2, 1], has_known_shape=True,
        )  # fmt: skip
    assert int(raw.AccumulatorNumAccumulated(handle=handle)) == 0


def test_an_object_is_no_value(dense: int) -> None:
    unsupported = r"^Attempt to convert a value \(<object object at 0x[0-9a-f]+>\) with an " \
        r"unsupported type \(<class 'object'>\) to a Tensor\.$"  # fmt: skip
    with pytest.raises(ValueError, match=unsupported):
        raw.ResourceAccumulatorApplyGradient(handle=dense, local_step=object(), gradient=[1.0])
    with pytest.raises(ValueError, match=unsupported):
        raw.ResourceAccumulatorSetGlobalStep(handle=dense, new_global_step=object())
    with pytest.raises(ValueError, match=unsupported):
        raw.ResourceAccumulatorApplyGradient(handle=dense, local_step=0, gradient=object())
    with pytest.raises(ValueError, match=unsupported):
        raw.ResourceAccumulatorTakeGradient(handle=dense, num_required=object(), dtype=tfa.float32)
    # strings and Python floats stay TypeErrors, as in TensorFlow
    with pytest.raises(TypeError, match=r"^Cannot convert 'a' to EagerTensor of dtype int64$"):
        raw.ResourceAccumulatorApplyGradient(handle=dense, local_step="a", gradient=[1.0])
    with pytest.raises(TypeError, match=r"^Cannot convert 2\.5 to EagerTensor of dtype int64$"):
        raw.ResourceAccumulatorApplyGradient(handle=dense, local_step=2.5, gradient=[1.0])
    assert count(dense) == 0


def test_numpy_float_steps_truncate_toward_zero(dense: int) -> None:
    raw.ResourceAccumulatorSetGlobalStep(handle=dense, new_global_step=np.float64(2.7))
    # 1.9 truncates to 1: stale against the step 2, dropped
    raw.ResourceAccumulatorApplyGradient(handle=dense, local_step=np.float64(1.9), gradient=[1.0])
    assert count(dense) == 0
    for step in (np.float64(2.5), np.float32(2.5), np.float16(3.5), np.array(2.9)):
        raw.ResourceAccumulatorApplyGradient(handle=dense, local_step=step, gradient=[1.0])
    assert count(dense) == 4
    raw.ResourceAccumulatorSetGlobalStep(handle=dense, new_global_step=np.float32(-0.5))  # 0
    raw.ResourceAccumulatorApplyGradient(handle=dense, local_step=np.float64(-0.5), gradient=[1.0])
    assert count(dense) == 5  # -0.5 is step 0, not stale
    taken = raw.ResourceAccumulatorTakeGradient(
        handle=dense, num_required=np.float64(1.5), dtype=tfa.float32
    )
    assert taken.tolist() == [1.0]


def test_numpy_floats_without_an_integer_value_are_refused(dense: int) -> None:
    # T21: TensorFlow 2.21 casts these with no defined result (-2**63 on x86)
    for bad in (np.float64("nan"), np.float64("inf"), np.float64(-np.inf), np.float64(1e300),
                np.float64(2.0**63)):  # fmt: skip
        with pytest.raises(ValueError, match="is not a number in int64's range"):
            raw.ResourceAccumulatorApplyGradient(handle=dense, local_step=bad, gradient=[1.0])
        with pytest.raises(ValueError, match="is not a number in int64's range"):
            raw.ResourceAccumulatorSetGlobalStep(handle=dense, new_global_step=bad)
    with pytest.raises(ValueError, match="is not a number in int64's range"):
        raw.ResourceAccumulatorTakeGradient(
            handle=dense, num_required=np.float64("nan"), dtype=tfa.float32
        )
    assert count(dense) == 0
    # a count past int32 keeps its own error
    with pytest.raises(ValueError, match="out of range for int32"):
        raw.ResourceAccumulatorTakeGradient(
            handle=dense, num_required=np.float64(2**40), dtype=tfa.float32
        )


def test_a_non_scalar_numpy_float_step_is_still_refused(dense: int) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="must be scalar"):
        raw.ResourceAccumulatorApplyGradient(
            handle=dense, local_step=np.array([2.5]), gradient=[1.0]
        )


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_a_scalar_integer_array_is_the_step_its_value_says(dense: int, dtype: type) -> None:
    # a graph's constant reaches a ps task's host as a 0-d array
    raw.ResourceAccumulatorSetGlobalStep(handle=dense, new_global_step=np.array(1, dtype))
    raw.ResourceAccumulatorApplyGradient(
        handle=dense, local_step=np.array(0, dtype), gradient=[1.0]
    )  # stale at step 1: dropped
    raw.ResourceAccumulatorApplyGradient(
        handle=dense, local_step=np.array(1, dtype), gradient=[2.0]
    )
    assert count(dense) == 1
    got = raw.ResourceAccumulatorTakeGradient(
        handle=dense, num_required=np.array(1, dtype), dtype=tfa.float32
    )
    assert got.tolist() == [2.0]


def test_a_scalar_integer_array_out_of_range_is_refused(dense: int) -> None:
    with pytest.raises(ValueError, match="out of range for int64"):
        raw.ResourceAccumulatorApplyGradient(
            handle=dense, local_step=np.array(2**63, np.uint64), gradient=[1.0]
        )
    with pytest.raises(ValueError, match="out of range for int32"):
        raw.ResourceAccumulatorTakeGradient(
            handle=dense, num_required=np.array(2**40), dtype=tfa.float32
        )
    assert count(dense) == 0


def test_constants_beyond_float32_eagerly_and_in_a_graph() -> None:
    compat = tfa.compat.v1
    with pytest.raises(ValueError, match=OUT_OF_FLOAT32):
        compat.constant([1e300])  # eager, as TensorFlow 2.21's tf.constant
    with compat.Graph().as_default():
        big = compat.constant([1e300])  # TF1 graph constants overflow to inf
        with compat.Session() as sess:
            value = sess.run(big)
    assert value.dtype == np.float32 and value.tolist() == [float("inf")]


@pytest.mark.parametrize(
    ("gradient", "dtype"),
    [
        # a numpy float first sets the dtype of the whole list, as TensorFlow's
        # eager conversion infers it from the first element
        ([np.float64(1.5)], "float64"),
        ([np.float64(1.5), 2.0], "float64"),
        ([np.float64(1.5), 2], "float64"),
        ([[np.float64(1.5)], [2.0]], "float64"),
        ([np.array([1.5]), [2.0]], "float64"),
        ([np.float16(1.5), np.float64(2.5)], "float16"),
        ([np.float32(1.5), np.float64(2.5)], "float32"),
        # a Python number first: TensorFlow's default float32
        ([1.5, np.float64(2.5)], "float32"),
        ([2, np.float64(1.5)], "float32"),
        ([np.int64(2), 1.5], "float32"),
        # integers of any width are int32 in a list, complex numbers complex128
        ([np.int16(2)], "int32"),
        ([np.uint8(3), 300], "int32"),
        ([np.int64(2**40)], "int64"),
        ([np.complex64(1)], "complex128"),
        # arrays and numpy scalars keep their own dtype
        (np.array([1], np.int16), "int16"),
        (np.float64(1.5), "float64"),
    ],
    ids=repr,
)
def test_lists_of_numpy_values_take_tensorflows_eager_dtype(gradient: object, dtype: str) -> None:
    shape = list(np.shape(np.asarray(gradient, dtype=object)))
    handle = raw.ResourceConditionalAccumulator(dtype=tfa.as_dtype(dtype), shape=shape)
    raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=0, gradient=gradient)
    taken = raw.ResourceAccumulatorTakeGradient(
        handle=handle, num_required=1, dtype=tfa.as_dtype(dtype)
    )
    assert taken.dtype == np.dtype(tfa.as_dtype(dtype).numpy_dtype)
    assert np.asarray(taken).tolist() == np.asarray(gradient).astype(taken.dtype).tolist()
    raw.DestroyResourceOp(resource=handle)


def test_a_list_of_numpy_floats_on_an_accumulator_of_another_dtype_is_refused() -> None:
    # T8: TensorFlow 2.21's eager kernel aborts the process here
    handle = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
    with pytest.raises(errors.InvalidArgumentError, match="gradient has dtype float64"):
        raw.ResourceAccumulatorApplyGradient(
            handle=handle, local_step=0, gradient=[np.float64(1.5)]
        )
    assert count(handle) == 0
    with pytest.raises(ValueError, match="out-of-range integer"):
        raw.ResourceAccumulatorApplyGradient(
            handle=handle, local_step=0, gradient=[np.uint64(2**63)]
        )
    raw.DestroyResourceOp(resource=handle)


def test_graph_constants_of_numpy_floats_stay_float32() -> None:
    # TF1 graph mode makes a list of floats float32 whatever its first element
    import tf_accum.compat.v1 as tf

    with tf.Graph().as_default():
        assert tf.constant([np.float64(1.5), 2.0]).dtype == tf.float32
    assert tf.constant([np.float64(1.5), 2.0]).dtype == np.float64  # eagerly, as TensorFlow
