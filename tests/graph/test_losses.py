"""``tf.losses`` against TensorFlow 2.21 (cases in tests/graph/nn_table.py):
values with weights and every reduction, the losses collection, errors."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.nn_record import cases_of, check_case
from tf_accum.graph.gradient_registry import get_gradient_function


@pytest.mark.parametrize("name", cases_of("losses"))
def test_loss_case_gives_what_tensorflow_gives(name: str) -> None:
    check_case(name)


def test_losses_join_the_losses_collection_and_the_total(graph: tf.Graph) -> None:
    labels = tf.constant([[1.0, 0.0]])
    first = tf.losses.mean_squared_error(labels, tf.constant([[0.5, 0.5]]))
    second = tf.losses.softmax_cross_entropy(labels, tf.constant([[2.0, 1.0]]))
    unlisted = tf.losses.mean_squared_error(labels, labels, loss_collection=None)
    assert tf.get_collection(tf.GraphKeys.LOSSES) == [first, second]
    assert tf.losses.get_losses() == [first, second]
    assert unlisted not in tf.losses.get_losses()
    total = tf.losses.get_total_loss()
    with tf.Session() as session:
        values = session.run([first, second, total])
    assert values[0] == pytest.approx(0.25)
    assert values[2] == pytest.approx(values[0] + values[1])


def test_the_default_reduction_divides_by_nonzero_weights(graph: tf.Graph) -> None:
    loss = tf.losses.mean_squared_error(
        tf.constant([1.0, 1.0, 1.0]), tf.constant([0.0, 2.0, 4.0]), weights=[1.0, 0.0, 1.0]
    )
    all_zero = tf.losses.mean_squared_error(
        tf.constant([1.0]), tf.constant([3.0]), weights=tf.constant([0.0])
    )
    with tf.Session() as session:
        assert session.run(loss) == pytest.approx((1.0 + 9.0) / 2)
        assert session.run(all_zero) == 0.0


def test_losses_eagerly_are_arrays_and_join_no_collection() -> None:
    loss = tf.losses.mean_squared_error([[1.0, 2.0]], [[2.0, 4.0]])
    assert isinstance(loss, np.ndarray)
    assert loss == pytest.approx(2.5)
    sparse = tf.losses.sparse_softmax_cross_entropy([0], [[0.0, 0.0]])
    assert sparse == pytest.approx(np.log(2.0), rel=1e-6)


def test_loss_errors() -> None:
    with pytest.raises(ValueError, match="labels"):
        tf.losses.mean_squared_error(None, [1.0])
    with pytest.raises(ValueError, match="Reduction"):
        tf.losses.mean_squared_error([1.0], [1.0], reduction="mean-ish")
    with tf.Graph().as_default(), pytest.raises(ValueError, match="incompatible"):
        tf.losses.mean_squared_error(tf.constant([1.0, 2.0]), tf.constant([1.0, 2.0, 3.0]))


def test_squared_difference_gradient_undoes_broadcasting(graph: tf.Graph) -> None:
    from tf_accum.graph.elementwise_ops import squared_difference

    loss = tf.losses.mean_squared_error(tf.constant([1.0]), tf.constant([2.0]))
    assert "SquaredDifference" in [op.type for op in graph.get_operations()]
    assert loss.dtype == tf.float32
    predictions = tf.constant([[1.0, 2.0], [3.0, 5.0]])
    labels = tf.constant([[0.0, 2.0]])
    op = squared_difference(predictions, labels).op
    gradient = get_gradient_function(op)
    assert gradient is not None
    x_grad, y_grad = gradient(op, tf.ones([2, 2]))
    with tf.Session() as session:
        x_value, y_value = session.run([x_grad, y_grad])
    np.testing.assert_allclose(x_value, [[2.0, 0.0], [6.0, 6.0]])
    np.testing.assert_allclose(y_value, [[-8.0, -6.0]])
