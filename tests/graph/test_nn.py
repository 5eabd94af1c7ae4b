"""``tf.nn`` and the clip ops in graph mode, against TensorFlow 2.21: values
in float16/32/64, static shapes, errors, and the gradients their registered
gradient functions build (tests/graph/nn_table.py holds the cases,
nn_tensorflow.json TensorFlow's outcomes). The gradients are checked a
second time against finite differences.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.nn_record import LIVE_JOB, RECORDED, cases_of, check_case
from tests.graph.nn_table import CASES, SIGNATURES, inputs_of, outcome, signature_of
from tests.live_tensorflow import live_result
from tf_accum import errors
from tf_accum.graph.gradient_registry import get_gradient_function


def gradient_function(op: Any) -> Any:
    found = get_gradient_function(op)
    assert found is not None, op.type
    return found


@pytest.mark.parametrize("name", cases_of("nn"))
def test_nn_case_gives_what_tensorflow_gives(name: str) -> None:
    check_case(name)


@pytest.mark.parametrize("name", cases_of("clip"))
def test_clip_case_gives_what_tensorflow_gives(name: str) -> None:
    check_case(name)


def test_the_record_covers_values_gradients_and_errors() -> None:
    graph = RECORDED["graph"]
    assert set(graph) == set(CASES)
    nn = [graph[n] for n in cases_of("nn")]
    assert sum("gradients" in o for o in nn) >= 40
    assert sum("error" in o for o in nn) >= 4
    assert sum("run_error" in o for o in nn) >= 1


@pytest.mark.parametrize("name", SIGNATURES)
def test_arguments_are_tensorflows(name: str) -> None:
    assert signature_of(tf, name) == RECORDED["signatures"][name]


@pytest.mark.background(LIVE_JOB)
def test_the_record_is_what_tensorflow_gives_today() -> None:
    live_result(LIVE_JOB)


# --- gradients against finite differences ---------------------------------------

_FLOAT64_GRADIENTS = [
    n for n in cases_of("nn") if CASES[n].gradients and "float64" in n and "large" not in n
]


def _objective(case: Any, arrays: list[Any], upstream: Any) -> float:
    space = {"tf": tf, "np": np, **{f"x{i}": a for i, a in enumerate(arrays)}}
    result = eval(case.expression, space)  # noqa: S307 - the table's own expressions
    return float(np.sum(np.asarray(result, np.float64) * upstream))


@pytest.mark.parametrize("name", _FLOAT64_GRADIENTS)
def test_gradient_matches_finite_differences(name: str) -> None:
    case = CASES[name]
    arrays = inputs_of(case)
    found = outcome(tf, name)
    shape = found["shapes"][0]
    from tests.graph.nn_table import _array

    upstream = _array(99, "float64", tuple(shape), "normal")
    step = 1e-6
    for index, gradient in zip(case.gradients, found["gradients"], strict=True):
        if gradient is None:  # the labels of the TF1 cross entropy: no gradient flows there
            assert "labels=x1" in case.expression and index == 1
            continue
        numeric = np.zeros_like(arrays[index])
        for position in np.ndindex(arrays[index].shape):
            up = [a.copy() for a in arrays]
            down = [a.copy() for a in arrays]
            up[index][position] += step
            down[index][position] -= step
            numeric[position] = (
                _objective(case, up, upstream) - _objective(case, down, upstream)
            ) / (2 * step)
        assert np.allclose(gradient["value"], numeric, rtol=1e-5, atol=1e-6), (index, numeric)


# --- behaviours the table does not show ----------------------------------------


def test_ops_have_tensorflows_types_and_eager_results_are_arrays(graph: tf.Graph) -> None:
    x = tf.placeholder(tf.float32, [None, 3])
    assert tf.nn.relu(x).op.type == "Relu"
    assert tf.nn.softmax(x).op.type == "Softmax"
    assert tf.nn.softmax(x).shape.as_list() == [None, 3]
    xent = tf.nn.softmax_cross_entropy_with_logits_v2(labels=x, logits=x)
    assert xent.op.type == "SoftmaxCrossEntropyWithLogits"
    assert xent.shape.as_list() == [None]
    assert len(xent.op.outputs) == 2
    layer = tf.nn.xw_plus_b(x, tf.ones([3, 2]), tf.zeros([2]))
    assert (layer.op.type, layer.op.inputs[0].op.type) == ("BiasAdd", "MatMul")
    with graph.as_default(), tf.Session() as session:
        fed = session.run(layer, {x: np.ones((4, 3), np.float32)})
    assert fed.shape == (4, 2)


def test_eager_results_are_numpy_arrays() -> None:
    logits = np.asarray([[1.0, 2.0, 3.0]], np.float32)
    assert isinstance(tf.nn.relu(logits), np.ndarray)
    probabilities = tf.nn.softmax(logits)
    assert probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities.sum(), 1.0, rtol=1e-6)
    loss = tf.nn.softmax_cross_entropy_with_logits(labels=[[0.0, 0.0, 1.0]], logits=logits)
    np.testing.assert_allclose(loss, -np.log(probabilities[0, 2]), rtol=1e-6)
    sparse = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[2], logits=logits)
    np.testing.assert_allclose(sparse, loss, rtol=1e-6)


def test_softmax_does_not_overflow() -> None:
    big = np.asarray([[1000.0, 1000.0, -1000.0]], np.float32)
    np.testing.assert_allclose(tf.nn.softmax(big), [[0.5, 0.5, 0.0]])
    loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=[[1.0, 0.0, 0.0]], logits=big)
    np.testing.assert_allclose(loss, [np.log(2.0)], rtol=1e-6)


def test_xent_gradient_flows_into_labels_only_for_v2(graph: tf.Graph) -> None:
    logits, labels = tf.constant([[1.0, 2.0]]), tf.constant([[0.3, 0.7]])
    v1 = tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    v2 = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
    assert v1.op.inputs[1].op.type == "StopGradient"
    assert v2.op.inputs[1] is labels
    grads = gradient_function(v2.op)(v2.op, tf.ones([1]), None)
    with tf.Session() as session:
        logits_grad, labels_grad = session.run(grads)
    probabilities = np.exp([1.0, 2.0]) / np.exp([1.0, 2.0]).sum()
    np.testing.assert_allclose(logits_grad, [probabilities - [0.3, 0.7]], rtol=1e-6)
    np.testing.assert_allclose(labels_grad, [-np.log(probabilities)], rtol=1e-6)


def test_in_top_k_has_no_gradient_and_sparse_labels_none(graph: tf.Graph) -> None:
    found = tf.nn.in_top_k(tf.constant([[0.1, 0.9]]), tf.constant([1]), 1)
    assert get_gradient_function(found.op) is None
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.constant([1]), logits=tf.constant([[0.1, 0.9]])
    )
    grads = gradient_function(loss.op)(loss.op, tf.ones([1]), None)
    assert grads[1] is None


def test_embedding_lookup_gathers_rows_of_the_variable(graph: tf.Graph) -> None:
    # as TensorFlow: ResourceGather on the variable's handle, named as the lookup's scope
    table = tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3))
    rows = tf.nn.embedding_lookup(table, tf.constant([3, 1, 3]))
    gather = rows.op.inputs[0].op
    assert (gather.type, gather.name, gather.inputs[0].op.type) == (
        "ResourceGather",
        "embedding_lookup",
        "VarHandleOp",
    )
    assert (rows.op.type, rows.op.name) == ("Identity", "embedding_lookup/Identity")
    assert rows.shape.as_list() == [3, 3]
    (grad,) = tf.gradients(tf.reduce_sum(rows), [table])
    assert isinstance(grad, tf.IndexedSlices)
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        assert session.run(rows)[:, 0].tolist() == [9.0, 3.0, 9.0]
        assert session.run(grad.indices).tolist() == [3, 1, 3]
        assert session.run(grad.values).tolist() == [[1.0] * 3] * 3
        with pytest.raises(errors.InvalidArgumentError, match="not in"):
            session.run(tf.nn.embedding_lookup(table, tf.constant([4])))


def test_dropout_refuses_bad_rates_and_integer_input() -> None:
    x = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="range"):
        tf.nn.dropout(x, rate=1.0)
    with pytest.raises(ValueError, match="both"):
        tf.nn.dropout(x, keep_prob=0.5, rate=0.5)
    with pytest.raises(ValueError, match="floating point"):
        tf.nn.dropout(np.ones(2, np.int32), rate=0.5)
    assert tf.nn.dropout(x, rate=0.0) is x or np.array_equal(tf.nn.dropout(x, rate=0.0), x)


def test_clip_by_global_norm_keeps_none_and_refuses_a_tensor(graph: tf.Graph) -> None:
    clipped, norm = tf.clip_by_global_norm([None, tf.constant([3.0, 4.0])], 1.0)
    assert clipped[0] is None
    with tf.Session() as session:
        values, found = session.run([clipped[1], norm])
    np.testing.assert_allclose(values, [0.6, 0.8], rtol=1e-6)
    assert found == pytest.approx(5.0)
    with pytest.raises(TypeError, match="sequence"):
        tf.clip_by_global_norm(tf.constant([1.0]), 1.0)


def test_clip_by_global_norm_of_an_infinite_norm_is_nan() -> None:
    clipped, norm = tf.clip_by_global_norm([np.asarray([np.inf, 1.0], np.float32)], 1.0)
    assert np.isinf(norm)
    assert np.all(np.isnan(clipped[0]))


def test_dropout_of_a_shape_known_only_when_run(graph: tf.Graph) -> None:
    x = tf.placeholder(tf.float32, [None, 4])
    dropped = tf.nn.dropout(x, rate=0.5, seed=1)
    assert dropped.shape.as_list() == [None, 4]
    with tf.Session() as session:
        values = session.run(dropped, {x: np.ones((3, 4), np.float32)})
    assert values.shape == (3, 4)
    assert set(np.unique(values).tolist()) <= {0.0, 2.0}
