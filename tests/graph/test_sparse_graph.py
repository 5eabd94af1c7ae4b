"""The sparse accumulator in graph mode (behaviour.md 10; cases S01-S34):
raw ops built with placeholders and run by a Session."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum as tfa
import tf_accum.compat.v1 as tf
from tests.graph.support import BOUNDED, DenseOps, SparseOps, raw
from tf_accum import errors

pytestmark = pytest.mark.usefixtures("graph")


def check(result, indices, values, shape, dtype=np.float32) -> None:
    assert result._fields == ("indices", "values", "shape")
    assert result.indices.dtype == np.int64 and result.shape.dtype == np.int64
    assert result.values.dtype == dtype
    np.testing.assert_array_equal(result.indices, indices)
    np.testing.assert_array_equal(result.values, values)
    np.testing.assert_array_equal(result.shape, shape)


def test_take_builds_three_tensors_of_unknown_shape() -> None:  # 10.4, 11.3
    acc = SparseOps()
    assert acc.handle.dtype == tfa.dtypes.string_ref
    assert [t.dtype for t in acc.take] == [tf.int64, tf.float32, tf.int64]
    assert all(t.shape.rank is None for t in acc.take)
    assert acc.take.indices.op is acc.take.values.op is acc.take.shape.op
    assert [t.name for t in acc.take] == [f"SparseAccumulatorTakeGradient:{i}" for i in range(3)]
    assert acc.num.shape == () and acc.num.dtype == tf.int32


def test_mean_divides_each_row_by_its_own_count() -> None:  # S01, S02
    acc = SparseOps(shape=[4, 1])
    with tf.Session() as sess:
        acc.put(sess, [0, 1, 2], [[3], [3], [3]], [4, 1])
        acc.put(sess, [1, 2], [[6], [6]], [4, 1])
        acc.put(sess, [2], [[9]], [4, 1])
        assert acc.count(sess) == 3
        check(acc.get(sess, 3), [0, 1, 2], [[3], [4.5], [6]], [4, 1])
        assert acc.count(sess) == 0


@pytest.mark.parametrize(
    ("reduction", "expected"),
    [("MEAN", [[1, 1], [3, 3], [3, 3]]), ("SUM", [[1, 1], [3, 3], [6, 6]])],
)
def test_two_gradients_merge(reduction: str, expected) -> None:  # S01, S03
    acc = SparseOps(reduction_type=reduction)
    with tf.Session() as sess:
        acc.put(sess, [0, 2], [[1, 1], [2, 2]], [3, 2])
        acc.put(sess, [1, 2], [[3, 3], [4, 4]])
        check(acc.get(sess, 2), [0, 1, 2], expected, [3, 2])


def test_rank_zero_declared_shape_reports_unknown_dim_zero() -> None:  # S04
    acc = SparseOps(shape=[])
    with tf.Session() as sess:
        acc.put(sess, [0, 1], [[1, 0], [0, 2]])
        acc.put(sess, [0, 2], [[0, 1], [3, 0]], [3, 2])
        check(acc.get(sess, 1), [0, 1, 2], [[0.5, 0.5], [0, 2], [3, 0]], [-1, 2])


@pytest.mark.parametrize(
    ("gradients", "indices", "values"),
    [
        ([([3, 0, 2], [[30], [0], [20]])], [0, 2, 3], [[0], [20], [30]]),  # S05
        ([([2, 0], [[20], [1]]), ([0, 1], [[100], [10]])], [0, 1, 2], [[50.5], [10], [20]]),
        ([([0, 2], [[1], [20]]), ([2, 0], [[200], [100]])], [0, 2], [[50.5], [110]]),  # S07
        ([([1, 1], [[1], [2]])], [1], [[3]]),  # S08
        ([([1, 1], [[1], [2]]), ([1], [[10]])], [1], [[6.5]]),  # S09
    ],
)
def test_unsorted_and_duplicate_indices_merge_as_sparse_tensors(
    gradients, indices, values
) -> None:  # S05-S09, T5
    acc = SparseOps(shape=[5, 1])
    with tf.Session() as sess:
        for grad_indices, grad_values in gradients:
            acc.put(sess, grad_indices, grad_values, [5, 1])
        check(acc.get(sess, len(gradients)), indices, values, [5, 1])


def test_negative_index_is_refused() -> None:  # S10, T6
    acc = SparseOps(shape=[3, 1])
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="-1"):
            acc.put(sess, [0, -1], [[5], [1]], [3, 1])
        assert acc.count(sess) == 0


def test_index_beyond_dim_zero() -> None:  # S11
    acc = SparseOps(shape=[3, 1])
    with tf.Session() as sess:
        with pytest.raises(
            errors.InvalidArgumentError,
            match="Shape mismatch: index of slice 2 exceeded limits of shape; index is 7 "
            "exceeded 3",
        ):
            acc.put(sess, [0, 1, 7], [[5], [5], [5]], [3, 1])
        assert acc.count(sess) == 0


def test_unknown_dim_zero_has_no_range() -> None:  # S12
    acc = SparseOps(shape=[None, 1])
    with tf.Session() as sess:
        acc.put(sess, [100], [[5]], [7, 1])
        check(acc.get(sess, 1), [100], [[5]], [-1, 1])


@pytest.mark.parametrize(
    ("declared", "indices", "values", "shape", "message"),
    [
        (
            [3, 3],
            [[0, 1], [1, 0]],
            [1, 2],
            None,
            "Input indices should be vector but received shape: [2,2]",
        ),
        ([3, 3], [0], 1.0, None, "Values cannot be 0-dimensional."),  # S14
        ([3, 3], [0, 1], [[0, 1, 1]], None, "Expected 2 non-empty input values, got 1"),  # S15
        (
            [2, 2, None],
            [0],
            [[1, 2]],
            [2, 2],
            "Shape mismatch: expected shape rank at least 3, got 2",
        ),
        ([2, 2, None], [0], np.ones((1, 3, 2)), [2, 3, 2], "expected shape dim 1 to be 2, got 3"),
        ([2, 2, None], [0, 1], [[1, 2], [3, 4]], None, "expected values rank at least 3, got 2"),
        ([2, 2, None], [0], np.ones((1, 3, 2)), None, "expected values dim 1 to be 2, got 3"),
        ([3, 2], [0], [[1, 2]], [4, 2], "Shape mismatch: expected shape dim 0 to be 3, got 4"),
        ([3, 2], [0], [[1, 2]], [3], "Shape mismatch: expected shape rank at least 2, got 1"),
        ([3, 2], [0], [[1, 2]], [], "Shape mismatch: expected shape rank at least 2, got 0"),
    ],
)
def test_malformed_gradients(declared, indices, values, shape, message) -> None:  # S13-S19, S23
    acc = SparseOps(shape=declared)
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError) as caught:
            acc.put(sess, indices, values, shape)
        assert message in caught.value.message
        assert caught.value.op is (acc.apply if shape is not None else acc.apply_unknown)
        assert acc.count(sess) == 0


def test_values_against_the_rounds_first() -> None:  # S20, S21
    acc = SparseOps(shape=[2, 2, None])
    with tf.Session() as sess:
        acc.put(sess, [0], np.ones((1, 2, 2, 2)))
        with pytest.raises(errors.InvalidArgumentError, match="expected values rank 4, got 3"):
            acc.put(sess, [0], np.ones((1, 2, 2)))
        with pytest.raises(
            errors.InvalidArgumentError, match="expected values dim 3 to be 2, got 3"
        ):
            acc.put(sess, [0], np.ones((1, 2, 2, 3)))
        assert acc.count(sess) == 1
        check(acc.get(sess, 1), [0], np.ones((1, 2, 2, 2)), [2, 2, 2, 2])
        acc.put(sess, [0], np.ones((1, 2, 2, 3)), step=1)
        with pytest.raises(
            errors.InvalidArgumentError, match="expected values dim 3 to be 3, got 2"
        ):
            acc.put(sess, [0], np.ones((1, 2, 2, 2)), step=1)


def test_gradient_shape_is_not_compared_with_values() -> None:  # S22, S23
    acc = SparseOps(shape=None)
    with tf.Session() as sess:
        acc.put(sess, [0], [[1, 2]], [7, 9, 9])
        acc.put(sess, [5], [[1, 2]], [1])
        check(acc.get(sess, 2), [0, 5], [[1, 2], [1, 2]], [-1, 2])
    longer = SparseOps(shape=[3, 2])
    with tf.Session() as sess:
        longer.put(sess, [0], [[1, 2]], [3, 2, 5])
        assert longer.count(sess) == 1


def test_values_may_have_more_dims_than_declared() -> None:  # S24
    acc = SparseOps(shape=[3, 2])
    with tf.Session() as sess:
        acc.put(sess, [0], np.ones((1, 2, 4)))
        check(acc.get(sess, 1), [0], np.ones((1, 2, 4)), [3, 2, 4])


def test_empty_gradients() -> None:  # S25, S26
    acc = SparseOps()
    with tf.Session() as sess:
        acc.put(sess, np.zeros(0, np.int64), np.zeros((0, 2)), [3, 2])
        assert acc.count(sess) == 1
        result = acc.get(sess, 1)
        assert result.indices.shape == (0,) and result.values.shape == (0, 2)
        np.testing.assert_array_equal(result.shape, [3, 2])
    unknown = SparseOps(shape=None)
    with tf.Session() as sess:
        unknown.put(sess, np.zeros(0, np.int64), np.zeros((0, 2)))
        with pytest.raises(
            errors.InvalidArgumentError, match="expected values dim 1 to be 2, got 3"
        ):
            unknown.put(sess, np.zeros(0, np.int64), np.zeros((0, 3)))
        with pytest.raises(errors.InvalidArgumentError, match="expected values rank 2, got 1"):
            unknown.put(sess, np.zeros(0, np.int64), np.zeros(0))


def test_scalar_rows() -> None:  # S27
    acc = SparseOps(shape=[5])
    with tf.Session() as sess:
        acc.put(sess, [1, 3], [10, 30], [5])
        acc.put(sess, [3], [50])
        check(acc.get(sess, 2), [1, 3], [10, 40], [5])


def test_stale_gradients_are_dropped_but_still_validated() -> None:  # S28, T7
    acc = SparseOps()
    with tf.Session() as sess:
        acc.set(sess, 5)
        with pytest.raises(errors.InvalidArgumentError, match="index is 9 exceeded 3"):
            acc.put(sess, [9], np.ones((1, 2)), step=4)
        with pytest.raises(errors.InvalidArgumentError, match="should be vector"):
            acc.put(sess, [[0, 1]], np.ones((2, 2)), step=4)
        acc.put(sess, [0], np.ones((1, 2)), step=4)  # stale, well-formed: dropped
        assert acc.count(sess) == 0
        acc.put(sess, [0], np.ones((1, 2)), [3, 2], step=5)
        assert acc.count(sess) == 1
        check(acc.get(sess, 1), [0], [[1, 1]], [3, 2])


def test_unknown_shape_reports_minus_one() -> None:  # S29
    acc = SparseOps(shape=None)
    with tf.Session() as sess:
        acc.put(sess, [0], np.ones((1, 3, 4)))
        check(acc.get(sess, 1), [0], np.ones((1, 3, 4)), [-1, 3, 4])


def test_float16_mean_matches_sequential_numpy() -> None:  # S30
    acc = SparseOps(dtype=tf.float16, shape=[3, 1])
    with tf.Session() as sess:
        acc.put(sess, [0, 1], np.float16([[0.1], [1.0]]))
        acc.put(sess, [0], np.float16([[0.2]]))
        acc.put(sess, [0], np.float16([[0.3]]))
        expected = (np.float16(0.1) + np.float16(0.2) + np.float16(0.3)) / np.float16(3)
        check(acc.get(sess, 3), [0, 1], [[expected], [1.0]], [3, 1], np.float16)


def test_num_required_must_be_positive() -> None:  # S33
    acc = SparseOps(shape=[3, 1])
    with tf.Session() as sess:
        acc.put(sess, [0], [[1]])
        with pytest.raises(
            errors.InvalidArgumentError, match="Argument num_required must be positive, but was 0"
        ):
            acc.get(sess, 0)
        assert acc.count(sess) == 1


def test_values_of_another_dtype_are_a_signature_mismatch() -> None:  # X05, T8
    acc = SparseOps()
    values = tf.placeholder(tf.int32)
    apply = raw.SparseAccumulatorApplyGradient(
        handle=acc.handle,
        local_step=0,
        gradient_indices=[0],
        gradient_values=values,
        gradient_shape=[3, 2],
        has_known_shape=True,
    )
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="Signature mismatch"):
            sess.run(apply, {values: [[1, 2]]})
        assert acc.count(sess) == 0


def test_take_of_another_dtype_is_refused() -> None:  # X07, T8
    acc = SparseOps(shape=[3, 1])
    wrong = raw.SparseAccumulatorTakeGradient(handle=acc.handle, num_required=1, dtype=tf.float64)
    with tf.Session() as sess:
        acc.put(sess, [0], [[1]])
        with pytest.raises(errors.InvalidArgumentError, match="Signature mismatch"):
            sess.run(wrong, options=BOUNDED)
        assert acc.count(sess) == 1


def test_dense_and_sparse_ops_refuse_each_others_accumulators() -> None:  # S34, X06, T8, T14
    sparse = SparseOps(shape=[3, 2])
    dense_take = raw.AccumulatorTakeGradient(handle=sparse.handle, num_required=1, dtype=tf.float32)
    dense_apply = raw.AccumulatorApplyGradient(
        handle=sparse.handle, local_step=0, gradient=np.ones((3, 2), np.float32)
    )
    with tf.Session() as sess:
        sparse.put(sess, [0], [[1, 1]])
        for op in (dense_apply, dense_take):
            with pytest.raises(errors.InvalidArgumentError):
                sess.run(op)
        assert sparse.count(sess) == 1


def test_dense_and_sparse_under_one_shared_name_is_an_error() -> None:  # S34, T10
    dense = DenseOps("", shared_name="both", shape=[3, 2])
    sparse = SparseOps(shared_name="both", shape=[3, 2])
    with tf.Session() as sess:
        dense.put(sess, np.ones((3, 2)))
        with pytest.raises(errors.InvalidArgumentError, match="both"):
            sparse.count(sess)
        assert dense.count(sess) == 1


def test_destroy_resource_op_destroys_a_sparse_accumulator() -> None:  # T14
    acc = SparseOps(shared_name="s")
    destroy = raw.DestroyResourceOp(resource=acc.handle)
    with tf.Session() as sess:
        acc.put(sess, [0], [[1, 1]])
        sess.run(destroy)
        with pytest.raises(errors.NotFoundError, match="localhost/s/"):
            acc.count(sess)
