"""A Variable takes part in arithmetic as its value does (TensorFlow's Variables have the
Tensor operators); the expected values and dtypes were recorded from TensorFlow 2.21."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum.compat.v1 as tf


def test_variable_operators_read_the_value() -> None:
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0])
        outs = [v * 2, v - 0.5, 3.0 - v, -v, abs(v), v / 2, v + v, v**2]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got = sess.run(outs)
    expected = [[2, 4], [0.5, 1.5], [2, 1], [-1, -2], [1, 2], [0.5, 1], [2, 4], [1, 4]]
    for value, want in zip(got, expected, strict=True):
        assert value.dtype == np.float32
        np.testing.assert_array_equal(value, np.array(want, np.float32))


def test_variable_operators_keep_the_dtype_rules() -> None:
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0])
        with pytest.raises(TypeError):
            v * tf.constant(1, tf.int32)


def test_a_sgd_update_reads_the_variable_after_the_take() -> None:
    with tf.Graph().as_default():
        w = tf.Variable([1.0, 1.0])
        acc = tf.ConditionalAccumulator(tf.float32, shape=[2])
        grad = tf.placeholder(tf.float32, shape=[2])
        apply = acc.apply_grad(grad, local_step=0)
        update = w.assign(w - 0.5 * acc.take_grad(2))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(apply, feed_dict={grad: [2.0, 4.0]})
            sess.run(apply, feed_dict={grad: [4.0, 8.0]})
            np.testing.assert_array_equal(sess.run(update), np.array([-0.5, -2.0], np.float32))
