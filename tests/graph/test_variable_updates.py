"""assign_sub, the scatter ops, load and initialized_value (issue 26): the
updates a synchronous-SGD chief makes with what it took, checked against the
values, dtypes and errors TensorFlow 2.21 gave for the same programs."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tf_accum import errors

pytestmark = pytest.mark.usefixtures("graph")


def test_assign_sub_method_and_function() -> None:
    v = tf.Variable([1.0, 2.0, 3.0], name="v")
    once = v.assign_sub([1.0, 1.0, 1.0])
    twice = tf.assign_sub(v, np.array([0.5, 0.5, 0.5]))  # float64 values convert
    from_ints = v.assign_sub([1, 1, 1])
    assert once.op.type == "AssignSubVariableOp" and once.dtype == tf.float32
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(once).tolist() == [0, 1, 2]
        got = sess.run(twice)
        assert got.dtype == np.float32 and got.tolist() == [-0.5, 0.5, 1.5]
        assert sess.run(from_ints).tolist() == [-1.5, -0.5, 0.5]
        assert sess.run(v).tolist() == [-1.5, -0.5, 0.5]


def test_assign_sub_shape_and_dtype_errors_at_build_time() -> None:
    v = tf.Variable([1.0, 2.0, 3.0])
    # TensorFlow 2.21's shape inference: no broadcasting, even of a scalar
    with pytest.raises(
        ValueError,
        match=r"^Dimension 0 in both shapes must be equal, but are 3 "
        r"and 2\. Shapes are \[3\] and \[2\]\.$",
    ):
        v.assign_sub([1.0, 2.0])
    with pytest.raises(ValueError, match=r"^Shapes must be equal rank, but are 1 and 0$"):
        tf.assign_sub(v, 1.0)
    with pytest.raises(ValueError, match="requested dtype float32 for Tensor with dtype float64"):
        v.assign_sub(tf.constant(np.zeros(3)))
    with pytest.raises(TypeError, match="Expected float32"):
        v.assign_sub("a")


def test_assign_sub_of_a_fed_value_of_another_shape_fails_when_run() -> None:
    v = tf.Variable(np.zeros((4, 2), np.float32))
    fed = tf.placeholder(tf.float32)
    sub = v.assign_sub(fed)
    assert sub.shape == (4, 2)
    with tf.Session() as sess:
        sess.run(v.initializer)
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"^Cannot update variable with shape \[4,2\] using a Tensor with shape \[3\], "
            r"shapes must be equal\.$",
        ):
            sess.run(sub, {fed: np.ones(3)})
        assert sess.run(v).tolist() == [[0, 0]] * 4  # unchanged
        assert sess.run(sub, {fed: np.ones((4, 2))}).tolist() == [[-1, -1]] * 4


def test_scatter_add_sub_update_values() -> None:
    emb = tf.Variable(np.zeros((4, 2), np.float32), name="emb")
    add = tf.scatter_add(emb, [0, 0], [[1.0, 1.0], [2.0, 2.0]])  # repeated rows add up
    update = tf.scatter_update(emb, [1, 1], [[1.0, 1.0], [2.0, 2.0]])  # the last one stays
    sub = tf.scatter_sub(emb, tf.constant([0, 3]), tf.constant([[1.0, 1.0], [2.0, 2.0]]))
    scalar = tf.scatter_add(emb, [2], 5.0)  # a scalar update goes to every row named
    nested = tf.scatter_update(emb, [[0, 1], [2, 3]], np.full((2, 2, 2), 7.0))
    assert [t.op.type for t in (add, sub, update)] == [
        "ResourceScatterAdd",
        "ResourceScatterSub",
        "ResourceScatterUpdate",
    ]
    assert add.dtype == tf.float32 and add.shape == (4, 2)
    with tf.Session() as sess:
        sess.run(emb.initializer)
        assert sess.run(add).tolist() == [[3, 3], [0, 0], [0, 0], [0, 0]]
        assert sess.run(update).tolist() == [[3, 3], [2, 2], [0, 0], [0, 0]]
        got = sess.run(sub)
        assert got.dtype == np.float32
        assert got.tolist() == [[2, 2], [2, 2], [0, 0], [-2, -2]]
        assert sess.run(scalar).tolist() == [[2, 2], [2, 2], [5, 5], [-2, -2]]
        assert sess.run(nested).tolist() == [[7, 7]] * 4
        assert sess.run(emb).tolist() == [[7, 7]] * 4


def test_scatter_sub_of_a_sparse_take() -> None:
    """The sparse sync-SGD step: subtract the taken rows from an embedding."""
    emb = tf.Variable(np.ones((3, 2), np.float32), name="emb")
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[3, 2])
    rows = tf.placeholder(tf.int64, [None])
    values = tf.placeholder(tf.float32, [None, 2])
    apply = acc.apply_grad(rows, values, local_step=0)
    taken = acc.take_indexed_slices_grad(1)
    step = tf.scatter_sub(emb, taken.indices, taken.values)
    with tf.Session() as sess:
        sess.run(emb.initializer)
        sess.run(apply, {rows: [2, 0], values: [[0.5, 0.5], [0.25, 0.25]]})
        assert sess.run(step).tolist() == [[0.75, 0.75], [1, 1], [0.5, 0.5]]


def test_scatter_errors_at_build_time() -> None:
    emb = tf.Variable(np.zeros((4, 2), np.float32))
    with pytest.raises(
        ValueError,
        match=r"^Dimension 0 in both shapes must be equal, but are 1 "
        r"and 2\. Shapes are \[1,2\] and \[2,2\]\.$",
    ):
        tf.scatter_add(emb, [0, 2], [[1.0, 1.0]])
    with pytest.raises(
        ValueError,
        match=r"^Dimension 1 in both shapes must be equal, but are 3 "
        r"and 2\. Shapes are \[1,3\] and \[1,2\]\.$",
    ):
        tf.scatter_sub(emb, [0], [[1.0, 1.0, 1.0]])
    with pytest.raises(ValueError, match=r"^Shapes must be equal rank, but are 1 and 2$"):
        tf.scatter_update(emb, [0], [1.0, 2.0])
    with pytest.raises(
        TypeError,
        match=r"^Value passed to parameter 'indices' has DataType "
        r"float32 not in list of allowed values: int32, int64$",
    ):
        tf.scatter_add(emb, [0.0], [[1.0, 1.0]])
    with pytest.raises(TypeError, match="DataType uint8 not in list"):
        tf.scatter_add(emb, np.array([0], np.uint8), [[1.0, 1.0]])
    with pytest.raises(ValueError, match="requested dtype float32 for Tensor with dtype float64"):
        tf.scatter_add(emb, [0], tf.constant([[1.0, 1.0]], tf.float64))
    with pytest.raises(TypeError, match="Expected float32, but got a of type 'str'"):
        tf.scatter_add(emb, [0], "a")
    with pytest.raises(AttributeError, match="changes a Variable"):
        tf.scatter_add(tf.constant([1.0]), [0], [1.0])


def test_scatter_errors_at_run_time_change_nothing() -> None:
    emb = tf.Variable(np.zeros((4, 2), np.float32))
    where = tf.placeholder(tf.int32)
    rows = tf.placeholder(tf.float32)
    add = tf.scatter_add(emb, where, rows)
    with tf.Session() as sess:
        sess.run(emb.initializer)
        cases = [
            ([7], [[1, 1]], r"^indices\[0\] = 7 is not in \[0, 4\)$"),
            ([-1], [[1, 1]], r"^indices\[0\] = -1 is not in \[0, 4\)$"),
            ([[0, 1], [2, 9]], np.ones((2, 2, 2)), r"^indices\[1,1\] = 9 is not in \[0, 4\)$"),
            (
                [0, 3],
                [[1, 1]],
                r"^The shape of indices \(\[2\]\) must be a prefix of the shape "
                r"of updates \(\[1,2\]\)$",
            ),
            (
                [0, 1],
                np.ones(3),
                r"^Must have updates\.shape = indices\.shape \+ "
                r"params\.shape\[1:\] or updates\.shape = \[\], got updates\.shape \[3\], "
                r"indices\.shape \[2\], params\.shape \[4,2\]$",
            ),
            (  # T21: TensorFlow 2.21 reads past such rows; refused here
                [0, 1],
                np.ones((2, 3)),
                r"^Must have updates\.shape = indices\.shape \+ "
                r"params\.shape\[1:\] or updates\.shape = \[\], got updates\.shape \[2,3\], "
                r"indices\.shape \[2\], params\.shape \[4,2\]$",
            ),
        ]
        for indices, updates, message in cases:
            with pytest.raises(errors.InvalidArgumentError, match=message):
                sess.run(add, {where: indices, rows: updates})
        assert sess.run(emb).tolist() == [[0, 0]] * 4
        assert sess.run(add, {where: 1, rows: [1.0, 2.0]}).tolist()[1] == [1, 2]
    other = tf.Variable(np.zeros((2, 1), np.float32))
    with (
        tf.Session() as sess,
        pytest.raises(errors.FailedPreconditionError, match="Could not find variable"),
    ):
        sess.run(tf.scatter_add(other, [0], [[1.0]]))


def test_scatter_on_an_integer_variable() -> None:
    v = tf.Variable([1, 2, 3])
    first = tf.scatter_update(v, [0], 5)
    wide = tf.scatter_add(v, np.array([2], np.int64), [10])
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(first).tolist() == [5, 2, 3]
        got = sess.run(wide)
        assert got.dtype == np.int32 and got.tolist() == [5, 2, 13]


def test_load_sets_the_value_through_the_initializer() -> None:
    v = tf.Variable([1.0, 2.0, 3.0], name="v")
    with tf.Session() as sess:
        assert v.load([7.0, 8.0, 9.0], sess) is None
        assert sess.run(v).tolist() == [7, 8, 9]
        v.load([1, 2, 3], sess)  # integers convert to the variable's dtype
        assert sess.run(v).dtype == np.float32
        with pytest.raises(
            ValueError,
            match=r"^Cannot feed value of shape \(2,\) for Tensor "
            r"v/Initializer/initial_value:0, which has shape \(3,\)$",
        ):
            v.load([7.0, 8.0], sess)
        v.load([4.0, 4.0, 4.0])  # the default session (the with block's)
        assert sess.run(v).tolist() == [4, 4, 4]
    with pytest.raises(ValueError, match="Either session argument should be provided"):
        v.load([1.0, 1.0, 1.0])


def test_initialized_value() -> None:
    v = tf.Variable([1.0, 2.0], name="v")
    doubled = tf.Variable(tf.add(v.initialized_value(), v.initialized_value()))
    with tf.Session() as sess:
        assert sess.run(v.initialized_value()).tolist() == [
            1,
            2,
        ]  # not initialized: the initial value
        sess.run(doubled.initializer)
        assert sess.run(doubled).tolist() == [2, 4]
        sess.run(v.assign([5.0, 5.0]))
        assert sess.run(v.initialized_value()).tolist() == [5, 5]


def test_read_value_false_returns_the_op() -> None:
    v = tf.Variable([1.0, 2.0])
    ops = [
        v.assign([5.0, 5.0], read_value=False),
        v.assign_add([1.0, 1.0], read_value=False),
        v.assign_sub([2.0, 2.0], read_value=False),
    ]
    assert [op.type for op in ops] == [
        "AssignVariableOp",
        "AssignAddVariableOp",
        "AssignSubVariableOp",
    ]
    with tf.Session() as sess:
        assert [sess.run(op) for op in ops] == [None, None, None]
        assert sess.run(v).tolist() == [4, 4]


def test_scatter_methods_take_indexed_slices() -> None:
    v = tf.Variable(np.zeros((3, 2), np.float32))
    rows = tf.IndexedSlices(tf.constant([[1.0, 2.0]]), tf.constant([2]))
    add, sub, update = v.scatter_add(rows), v.scatter_sub(rows), v.scatter_update(rows)
    with pytest.raises(
        TypeError,
        match=r"^Argument `sparse_delta` must be a `tf\.IndexedSlices`\. "
        r"Received arg: \[1\.0\]$",
    ):
        v.scatter_sub([1.0])
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(add).tolist()[2] == [1, 2]
        assert sess.run(add).tolist()[2] == [2, 4]
        assert sess.run(sub).tolist()[2] == [1, 2]
        sess.run(v.assign(np.ones((3, 2), np.float32)))
        assert sess.run(update).tolist() == [[1, 1], [1, 1], [1, 2]]
