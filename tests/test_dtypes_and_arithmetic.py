"""DType conversion, and arithmetic in every accumulator dtype (docs/departures.md T1)."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

import tf_accum as tfa
from tf_accum.dtypes import ACCUMULATOR_DTYPES

raw = tfa.raw_ops


def run(dtype, grads, reduction="MEAN", shape=None):
    h = raw.ResourceConditionalAccumulator(dtype=dtype, shape=shape, reduction_type=reduction)
    for g in grads:
        raw.ResourceAccumulatorApplyGradient(
            handle=h, local_step=0, gradient=np.asarray(g, tfa.as_dtype(dtype).numpy_dtype)
        )
    return raw.ResourceAccumulatorTakeGradient(handle=h, num_required=len(grads), dtype=dtype)


def test_nineteen_accumulator_dtypes_in_tensorflow_order() -> None:
    assert [t.name for t in ACCUMULATOR_DTYPES] == [
        "float32", "float64", "int32", "uint8", "int16", "int8", "complex64", "int64", "qint8",
        "quint8", "qint32", "bfloat16", "qint16", "quint16", "uint16", "complex128", "float16",
        "uint32", "uint64",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("given", "name"),
    [
        ("float32", "float32"), ("half", "float16"), ("double", "float64"),
        (np.float16, "float16"), (np.dtype("int8"), "int8"), (ml_dtypes.bfloat16, "bfloat16"),
        (np.complex64, "complex64"), ("qint8", "qint8"), (SimpleNamespace(name="quint16"), "quint16"),
        (np.uint64, "uint64"), (tfa.qint32, "qint32"),
    ],
)  # fmt: skip
def test_as_dtype(given, name) -> None:
    dtype = tfa.as_dtype(given)
    assert dtype.name == name
    assert dtype == given


def test_tensorflow_enum_numbers_are_dtypes() -> None:
    # tf.as_dtype takes its DataType enum numbers too
    assert tfa.as_dtype(1) is tfa.float32
    assert tfa.as_dtype(3) is tfa.int32
    assert tfa.as_dtype(19) is tfa.float16
    assert tfa.as_dtype(14) is tfa.bfloat16


def test_numpy_integers_are_never_quantized() -> None:
    assert tfa.as_dtype(np.int8) is tfa.int8
    assert tfa.qint8.numpy_dtype == np.int8 and tfa.qint8 != tfa.int8


@pytest.mark.parametrize("bad", ["floaty", object(), 0, 24, 2.5, SimpleNamespace(name="nope")])
def test_as_dtype_rejects(bad) -> None:
    with pytest.raises(TypeError, match="to a TensorFlow DType"):
        tfa.as_dtype(bad)


def test_dtype_equality_hash_and_pickle() -> None:
    assert tfa.float32 == tfa.compat.v1.float32 == tfa.dtypes.float32
    assert tfa.float32 != tfa.float64 and tfa.float32 != "not a dtype"
    assert len({tfa.float32, tfa.as_dtype("float32"), tfa.half, tfa.float16}) == 2
    assert pickle.loads(pickle.dumps(tfa.bfloat16)) is tfa.bfloat16


@pytest.mark.parametrize("dtype", ACCUMULATOR_DTYPES, ids=lambda t: t.name)
def test_every_accumulator_dtype_works(dtype) -> None:  # docs/departures.md T1
    wide = np.complex128 if dtype.is_complex else np.float64
    got = run(dtype, [[1, 2], [3, 4]], shape=[2])
    assert got.dtype == dtype.numpy_dtype
    np.testing.assert_array_equal(got.astype(wide), [2, 3])
    got = run(dtype, [[1, 2], [3, 4]], reduction="SUM", shape=[2])
    np.testing.assert_array_equal(got.astype(wide), [4, 6])


def test_integer_mean_truncates_toward_zero() -> None:  # docs/departures.md T1
    np.testing.assert_array_equal(run(tfa.int32, [[7, -7, 1], [0, 0, 0]]), [3, -3, 0])
    np.testing.assert_array_equal(run(tfa.int64, [[-5], [0], [0]]), [-1])
    np.testing.assert_array_equal(run(tfa.uint8, [[255], [255]], reduction="SUM"), [254])


def test_integer_sums_wrap_and_mean_divides_the_wrapped_sum() -> None:  # docs/departures.md T1
    got = run(tfa.int8, [[100], [100]], reduction="SUM")
    assert got.dtype == np.int8 and got[0] == -56
    assert run(tfa.int8, [[100], [100]])[0] == -28  # -56 / 2


def test_integer_mean_with_more_gradients_than_the_dtype_can_count() -> None:
    # 200 does not fit int8: dividing by int8(200) == -56 would give -1, not 0
    got = run(tfa.int8, [[100]] + [[0]] * 199)
    assert got.dtype == np.int8 and got[0] == 0


def test_complex_mean() -> None:
    got = run(tfa.complex64, [[1 + 2j], [3 - 4j]])
    assert got.dtype == np.complex64 and got[0] == 2 - 1j


def test_bfloat16_mean() -> None:
    got = run(tfa.bfloat16, [[1.0, 3.0], [2.0, 3.0]])
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), [1.5, 3.0])


def test_float16_rounds_after_every_add() -> None:  # D31, D32
    got = run(tfa.float16, [[0.1, 60000, 1e-7]] * 3)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(
        got.astype(np.float64), [0.09991455078125, np.inf, 1.1920928955078125e-07]
    )
    assert run(tfa.float16, [[60000], [60000]], reduction="SUM")[0] == np.inf


def _float16_mean(count: int) -> np.ndarray:
    gradient = np.array([1, 2, -np.inf], np.float16)
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float16, shape=[3])
    for _ in range(count):
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=gradient)
    got = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=count, dtype=tfa.float16)
    assert got.dtype == np.float16
    return got.view(np.uint16)


def test_a_float16_mean_divides_by_the_count_in_float16() -> None:
    # As TensorFlow's kernel does: 2049 is the first count float16 cannot hold.
    # It rounds to 2048, so the sums, stopped at 2048 and 4096 where adding 1
    # and 2 no longer changes a float16, divide to exactly 1 and 2.
    np.testing.assert_array_equal(_float16_mean(2049), [0x3C00, 0x4000, 0xFC00])


def test_float16_mean_of_more_gradients_than_float16_can_count() -> None:
    # The count, converted to float16 as TensorFlow's kernel does, is infinite
    # from 65520 on: the quotient is 0 (NaN for an infinite sum), as TensorFlow
    # 2.21 gives, with no warning. Until 65519 it is a division (2050, held
    # exactly, divides 2048 and 4096 to just under 1 and 2).
    np.testing.assert_array_equal(_float16_mean(2050), [0x3BFE, 0x3FFE, 0xFC00])
    np.testing.assert_array_equal(_float16_mean(65519), [10241, 11265, 64512])
    np.testing.assert_array_equal(_float16_mean(65520), [0, 0, 0xFE00])


def test_float64_and_float32_means_divide_in_their_dtype() -> None:  # D33, D34
    assert run(tfa.float64, [[1], [1], [2]])[0] == 1.3333333333333333
    assert run(tfa.float32, [[1], [0], [0]])[0] == np.float32(1) / np.float32(3)


def test_nan_and_inf_propagate() -> None:  # D35
    got = run(tfa.float32, [[np.nan, np.inf], [1, -np.inf]])
    assert np.isnan(got).all()


def test_take_result_does_not_alias_the_accumulator() -> None:
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[2])
    g = np.array([1.0, 2.0], np.float32)
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=g)
    g[:] = 100  # the caller's buffer is not the accumulator's
    first = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float32)
    np.testing.assert_array_equal(first, [1.0, 2.0])
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=1, gradient=np.ones(2, np.float32))
    first[:] = -1
    second = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float32)
    np.testing.assert_array_equal(second, [1.0, 1.0])
