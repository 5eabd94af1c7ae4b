"""A Variable takes part in arithmetic as its value does (TensorFlow's Variables have the
Tensor operators); the expected values and dtypes were recorded from TensorFlow 2.21."""

from __future__ import annotations

from typing import Any

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


# ``numpy array <op> x`` and ``x <op> numpy array`` for x = [3, 4] (a constant) and
# x = [1, 2] (a variable), the array [2, 3] (float32): TensorFlow 2.21 gives a float32
# (bool for comparisons) Tensor with these values, never a numpy array of tensors.
_ARRAY = np.array([2.0, 3.0], np.float32)
_OPERATORS: dict[str, tuple[Any, list[Any], list[Any]]] = {
    "+": (lambda x, y: x + y, [5, 7], [3, 5]),
    "-": (lambda x, y: x - y, [-1, -1], [1, 1]),
    "*": (lambda x, y: x * y, [6, 12], [2, 6]),
    "/": (lambda x, y: x / y, [2 / 3, 0.75], [2, 1.5]),
    "//": (lambda x, y: x // y, [0, 0], [2, 1]),
    "%": (lambda x, y: x % y, [2, 3], [0, 1]),
    "**": (lambda x, y: x**y, [8, 81], [2, 9]),
    "<": (lambda x, y: x < y, [True, True], [False, False]),
    "<=": (lambda x, y: x <= y, [True, True], [False, False]),
    ">": (lambda x, y: x > y, [False, False], [True, True]),
    ">=": (lambda x, y: x >= y, [False, False], [True, True]),
}


@pytest.mark.parametrize("symbol", sorted(_OPERATORS))
def test_a_numpy_array_on_either_side_of_a_tensor_or_variable_makes_a_tensor(
    symbol: str,
) -> None:
    operator, on_tensor, on_variable = _OPERATORS[symbol]
    with tf.Graph().as_default():
        tensor = tf.constant([3.0, 4.0])
        variable = tf.Variable(np.array([1.0, 2.0], np.float32))
        left = [operator(_ARRAY, tensor), operator(_ARRAY, variable)]
        right = [operator(tensor, _ARRAY), operator(variable, _ARRAY)]
        for result in left + right:
            assert isinstance(result, tf.Tensor), type(result)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            found_left, found_right = sess.run(left), sess.run(right)
    # x <op> array is array <op'> x with the operands swapped: compute it by hand
    swapped_tensor = operator(np.array([3.0, 4.0], np.float32), _ARRAY)
    swapped_variable = operator(np.array([1.0, 2.0], np.float32), _ARRAY)
    expected_dtype = np.bool_ if isinstance(on_tensor[0], bool) else np.float32
    for value, want in zip(
        found_left + found_right,
        [on_tensor, on_variable, swapped_tensor, swapped_variable],
        strict=True,
    ):
        assert value.dtype == expected_dtype
        np.testing.assert_allclose(value, np.asarray(want, expected_dtype), rtol=1e-6)


def test_numpy_on_the_left_of_matmul_logic_and_equality_is_tensorflows() -> None:
    with tf.Graph().as_default():
        ones = np.ones((2, 2), np.float32)
        matrix = tf.constant(ones)
        flags = tf.constant([True, False])
        variable = tf.Variable(np.array([1.0, 2.0], np.float32))
        products = [ones @ matrix, matrix @ ones]
        logic = [
            np.array([True, True]) & flags,
            np.array([True, True]) | flags,
            np.array([True, True]) ^ flags,
        ]
        for result in products + logic:
            assert isinstance(result, tf.Tensor)
        # graph tensors and variables compare by identity, as in TensorFlow: a bool
        assert _ARRAY.__eq__(variable) is NotImplemented  # numpy defers to the variable
        assert (_ARRAY == variable) is False  # noqa: SIM300  (the array on the left is the case)
        assert (_ARRAY != variable) is True  # noqa: SIM300
        assert (_ARRAY == matrix) is False  # noqa: SIM300
        with tf.Session() as sess:
            found_products, found_logic = sess.run(products), sess.run(logic)
    for value in found_products:
        np.testing.assert_array_equal(value, np.full((2, 2), 2.0, np.float32))
    assert [v.tolist() for v in found_logic] == [[True, False], [True, True], [False, True]]
