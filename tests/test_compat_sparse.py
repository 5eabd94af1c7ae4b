"""compat.v1.SparseConditionalAccumulator (conformance cases P11-P15)."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import Background, wait_for_waiting
from tf_accum import errors

SCA = tfa.compat.v1.SparseConditionalAccumulator


def test_the_three_names_are_one_class() -> None:
    assert SCA is tfa.compat.v1.sparse.SparseConditionalAccumulator
    assert SCA is tfa.sparse.SparseConditionalAccumulator


def test_works_eagerly_and_returns_a_named_tuple() -> None:  # P11; docs/departures.md T11
    acc = SCA(tfa.float32, shape=[3, 2], name="S")
    assert acc.name == "S" and acc.dtype == tfa.float32
    assert acc.apply_grad([0, 2], [[1, 1], [2, 2]], [3, 2]) is None
    acc.apply_indexed_slices_grad(tfa.IndexedSlices(values=[[3, 3]], indices=[1]))
    result = acc.take_grad(1)
    assert result._fields == ("indices", "values", "shape")
    indices, values, shape = result
    np.testing.assert_array_equal(indices, [0, 1, 2])
    assert values.dtype == np.float32
    np.testing.assert_array_equal(values, [[1, 1], [3, 3], [2, 2]])
    np.testing.assert_array_equal(shape, [3, 2])


def test_take_indexed_slices_grad() -> None:  # P12
    acc = SCA(tfa.float32, shape=[3, 2])
    acc.apply_grad([1], [[3, 3]], [3, 2])
    slices = acc.take_indexed_slices_grad(1)
    assert isinstance(slices, tfa.IndexedSlices)
    np.testing.assert_array_equal(slices.values, [[3.0, 3.0]])
    np.testing.assert_array_equal(slices.indices, [1])
    np.testing.assert_array_equal(slices.dense_shape, [3, 2])


def test_grad_shape_none_is_unknown_and_empty_is_rank_zero() -> None:  # P13, P14
    acc = SCA(tfa.float32, shape=[3, 2])
    acc.apply_grad([0], [[1.0, 1.0]], grad_shape=None)
    acc.apply_indexed_slices_grad(tfa.IndexedSlices(values=[[1.0, 1.0]], indices=[1]))
    with pytest.raises(
        errors.InvalidArgumentError, match="Shape mismatch: expected shape rank at least 2, got 0"
    ):
        acc.apply_grad([0], [[1.0, 1.0]], grad_shape=[])
    assert acc.num_accumulated() == 2


def test_indices_and_shape_are_cast() -> None:  # P15
    acc = SCA(tfa.float32, shape=[3, 2])
    acc.apply_grad(np.array([0, 2], np.int32), [[1, 1], [2, 2]], np.array([3, 2], np.int32))
    acc.apply_grad([1.7], [[5, 5]], [3, 2])
    indices, values, shape = acc.take_grad(1)
    np.testing.assert_array_equal(indices, [0, 1, 2])
    np.testing.assert_array_equal(values, [[1, 1], [5, 5], [2, 2]])
    np.testing.assert_array_equal(shape, [3, 2])


def test_values_are_converted_to_the_dtype() -> None:  # X05; docs/departures.md T12
    acc = SCA(tfa.float32, shape=[3, 2])
    acc.apply_grad([0], [[1, 2]])
    acc.apply_grad([0], np.array([[3.0, 4.0]]))
    _, values, _ = acc.take_grad(2)
    assert values.dtype == np.float32
    np.testing.assert_array_equal(values, [[2, 3]])


def test_values_that_do_not_convert() -> None:
    acc = SCA(tfa.float32, shape=[3, 2])
    with pytest.raises(TypeError, match="Expected float32"):
        acc.apply_grad([0], [["a", "b"]])
    assert acc.num_accumulated() == 0


def test_steps_and_global_step() -> None:
    acc = SCA(tfa.float32, shape=[3, 1])
    assert acc.set_global_step(2.9) is None
    acc.apply_grad([0], [[1.0]], local_step=1.9)
    assert acc.num_accumulated() == 0
    acc.apply_grad([0], [[1.0]], local_step=2)
    n = acc.num_accumulated()
    assert n == 1 and isinstance(n, np.int32)


def test_blocking_timeout_and_close() -> None:  # S31, S32; docs/departures.md T2, T3
    acc = SCA(tfa.float32, shape=[3, 1])
    acc.apply_grad([0], [[1.0]])
    bg = Background(acc.take_grad, 2)
    wait_for_waiting(acc.accumulator_ref, 1)
    assert not bg.done()
    acc.apply_grad([2], [[4.0]])
    indices, values, shape = bg.result()
    np.testing.assert_array_equal(indices, [0, 2])
    np.testing.assert_array_equal(values, [[1.0], [4.0]])
    with pytest.raises(errors.DeadlineExceededError):
        acc.take_indexed_slices_grad(1, timeout=0.01)
    waiting = Background(acc.take_grad, 1)
    wait_for_waiting(acc.accumulator_ref, 1)
    acc.close()
    assert isinstance(waiting.error(), errors.CancelledError)


def test_private_accumulator_dies_with_its_object() -> None:
    acc = SCA(tfa.float32, shape=[3, 1])
    h = acc.accumulator_ref
    del acc
    gc.collect()
    with pytest.raises(errors.NotFoundError):
        tfa.raw_ops.AccumulatorNumAccumulated(handle=h)


def test_accepts_tensorflow_style_indexed_slices() -> None:
    acc = SCA(tfa.float64, shape=[4, 2])
    foreign = SimpleNamespace(values=np.ones((2, 2)), indices=np.array([3, 1]), dense_shape=None)
    acc.apply_indexed_slices_grad(foreign)
    indices, values, _ = acc.take_grad(1)
    np.testing.assert_array_equal(indices, [1, 3])
    assert values.dtype == np.float64


def test_bad_reduction_type() -> None:
    with pytest.raises(ValueError, match="'SparseConditionalAccumulator' Op passed string 'mean'"):
        SCA(tfa.float32, shape=[3, 1], reduction_type="mean")
