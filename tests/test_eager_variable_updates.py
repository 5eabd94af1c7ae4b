"""Eager Variables (issue 26): assign_sub and the scatter ops act at once, with
TensorFlow 2.21's eager errors."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tf_accum import errors


def test_assign_sub_and_scatter_eagerly() -> None:
    v = tf.Variable([1.0, 2.0])
    assert v.assign_sub([1.0, 1.0]).tolist() == [0, 1] and v.numpy().tolist() == [0, 1]
    with pytest.raises(
        errors.InvalidArgumentError,
        match=r"^Cannot update variable with shape \[2\] using a Tensor with shape \[1\], "
        r"shapes must be equal\.$",
    ):
        v.assign_sub([1.0])
    e = tf.Variable(np.zeros((3, 2), np.float32))
    assert tf.scatter_add(e, [0, 0], [[1.0, 1.0], [2.0, 2.0]]).tolist()[0] == [3, 3]
    assert tf.scatter_sub(e, [1], [[1.0, 1.0]]).tolist()[1] == [-1, -1]
    with pytest.raises(errors.InvalidArgumentError, match=r"^indices\[0\] = 5 is not in \[0, 3\)$"):
        tf.scatter_update(e, [5], [[1.0, 1.0]])
    rows = tf.IndexedSlices(np.array([[9.0, 9.0]], np.float32), np.array([2]))
    assert e.scatter_update(rows).tolist() == [[3, 3], [-1, -1], [9, 9]]
    assert e.numpy().dtype == np.float32


def test_load_initialized_value_and_global_step_eagerly() -> None:
    v = tf.Variable([1.0, 2.0])
    v.load([5.0, 6.0])
    assert v.numpy().tolist() == [5, 6] and v.initialized_value().tolist() == [5, 6]
    assert tf.train.global_step(None, tf.Variable(np.int64(3))) == 3


def test_is_variable_initialized_wants_a_variable_and_is_true_eagerly() -> None:
    with pytest.raises(AttributeError, match="expects a Variable"):
        tf.is_variable_initialized(5)
    eager = tf.Variable(1.0)
    assert eager.is_initialized() is np.True_
    assert tf.report_uninitialized_variables().tolist() == []
