"""``tf.gradients`` over tf_accum graphs: against TensorFlow 2.21's recorded
gradients (tests/graph/model_table.py, the ``G(...)`` cases and every float
case's gradients), against finite differences, and the walk's own rules
(names, eager refusal, registration, control dependencies, variables).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.model_table import CASES, PROGRAMS, RECORD, outcome, same_outcome
from tf_accum.indexed_slices import IndexedSlices

RECORDED: dict[str, dict[str, Any]] = json.loads(RECORD.read_text())
GRADIENT_CASES = [case for case in CASES if case.startswith("G(")]
# float64 cases whose every input is a fed placeholder: checked by finite differences
NUMERIC_CASES = [
    case
    for case in CASES
    if "float64" in case
    and "P(" in case
    and not any(kind in case for kind in ("U(", "V(", "C(", "G(", "float32", "float16"))
    and "grads" in RECORDED["graph"][case]
]


@pytest.mark.parametrize("case", GRADIENT_CASES)
def test_gradients_are_tensorflows(case: str) -> None:
    found = outcome(tf, case)
    assert same_outcome(RECORDED["graph"][case], found), (RECORDED["graph"][case], found)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_training_program_follows_tensorflows_losses(name: str) -> None:
    assert set(RECORDED["programs"]) == set(PROGRAMS)
    losses = PROGRAMS[name](tf)
    expected = RECORDED["programs"][name]
    assert len(losses) == len(expected) == 5 and expected[-1] < expected[0] / 2
    np.testing.assert_allclose(losses, expected, rtol=1e-5)


def test_the_numeric_check_covers_the_float64_ops() -> None:
    assert len(NUMERIC_CASES) >= 40
    for name in ("matmul", "reduce_prod", "pow", "gather", "concat", "transpose", "[:, 1:3]"):
        assert any(name in case for case in NUMERIC_CASES), name


def _build(expression: str) -> tuple[tf.Graph, Any, list[Any], dict[Any, Any]]:
    """The case built with its placeholders fed values moved off ties and kinks."""
    graph = tf.Graph()
    inputs: list[Any] = []
    feeds: dict[Any, Any] = {}
    shift = np.random.default_rng(len(expression))
    with graph.as_default():

        def placeholder(dtype: str, values: Any) -> Any:
            array = np.array(values, dtype=dtype)
            array = np.asarray(array + shift.uniform(0.01, 0.02, array.shape).astype(dtype))
            made = tf.placeholder(tf.as_dtype(dtype), shape=array.shape)
            feeds[made] = array
            inputs.append(made)
            return made

        result = eval(expression, {"tf": tf, "np": np, "P": placeholder})
    return graph, result, inputs, feeds


@pytest.mark.parametrize("case", NUMERIC_CASES)
def test_gradients_match_finite_differences(case: str) -> None:
    graph, result, inputs, feeds = _build(case)
    rng = np.random.default_rng(7)
    with graph.as_default(), tf.Session(graph=graph) as sess:
        weights = rng.uniform(0.5, 1.5, sess.run(result, feeds).shape)
        analytic = tf.gradients(result, inputs, grad_ys=tf.constant(weights))
        fetched = sess.run([g for g in analytic if g is not None], feeds)
        step = 1e-6
        for x, grad in zip(inputs, analytic, strict=True):
            if grad is None:
                continue
            value = fetched.pop(0)
            if isinstance(grad, IndexedSlices):
                rows_values, rows, _ = value
                value = np.zeros_like(feeds[x])
                np.add.at(value, rows, rows_values)
            numeric = np.zeros_like(feeds[x])
            for index in np.ndindex(*feeds[x].shape):
                moved = dict(feeds)
                for sign in (1.0, -1.0):
                    copy = feeds[x].copy()
                    copy[index] += sign * step
                    moved[x] = copy
                    numeric[index] += sign * np.sum(weights * sess.run(result, moved))
            numeric /= 2 * step
            np.testing.assert_allclose(value, numeric, rtol=1e-5, atol=1e-6)


def test_gradients_are_refused_eagerly() -> None:
    assert tf.executing_eagerly()
    with pytest.raises(RuntimeError, match="tf.gradients is not supported when eager"):
        tf.gradients(np.ones(2), np.ones(2))
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [2])
        y = x * 2.0
    with pytest.raises(RuntimeError, match="Use tf.GradientTape instead"):
        tf.gradients(y, x)  # a graph's tensors, but called outside it


def test_backward_ops_are_named_under_gradients(graph: tf.Graph) -> None:
    x = tf.placeholder(tf.float32, [2, 3], name="x")
    w = tf.placeholder(tf.float32, [3, 1], name="w")
    loss = tf.reduce_sum(tf.matmul(x, w, name="product"), name="loss")
    (first,) = tf.gradients(loss, [w])
    (second,) = tf.gradients(loss, [w])
    assert first.name.startswith("gradients/product_grad/")
    assert second.name.startswith("gradients_1/product_grad/")
    assert any(op.name.startswith("gradients/loss_grad/") for op in graph.get_operations())
    custom = tf.gradients(loss, w, name="backprop")[0]
    assert custom.name.startswith("backprop/")


def test_an_op_without_a_registered_gradient_is_a_lookup_error(graph: tf.Graph) -> None:
    op_type = f"Custom{uuid.uuid4().hex}"
    x = tf.placeholder(tf.float32, [2])
    custom = graph.create_op(
        op_type, [x], [(tf.float32, x.shape)], lambda context, inputs: (inputs[0] * 3,)
    ).outputs[0]
    with pytest.raises(LookupError, match=f"No gradient defined for operation.*{op_type}"):
        tf.gradients(custom, x)

    @tf.RegisterGradient(op_type)
    def _times_three(op: Any, grad: Any) -> Any:
        return grad * 3.0

    (grad,) = tf.gradients(custom * 2.0, x)
    with tf.Session() as sess:
        assert sess.run(grad, {x: [1.0, 1.0]}).tolist() == [6.0, 6.0]
    with pytest.raises(KeyError):
        tf.RegisterGradient(op_type)(_times_three)


def test_no_gradient_gives_none_to_the_inputs(graph: tf.Graph) -> None:
    op_type = f"Opaque{uuid.uuid4().hex}"
    tf.no_gradient(op_type)
    x = tf.placeholder(tf.float32, [2])
    opaque = graph.create_op(
        op_type, [x], [(tf.float32, x.shape)], lambda context, inputs: (inputs[0],)
    ).outputs[0]
    assert tf.gradients(opaque + x, x)[0] is not None
    assert tf.gradients(opaque * 2.0, x) == [None]
    assert tf.NotDifferentiable is tf.no_gradient


def test_control_dependencies_carry_no_gradient(graph: tf.Graph) -> None:
    x = tf.placeholder(tf.float32, [2])
    z = tf.placeholder(tf.float32, [2])
    side = tf.square(z)
    with tf.control_dependencies([side]):
        y = tf.identity(x) * 2.0
    gx, gz = tf.gradients(y, [x, z])
    assert gz is None
    with tf.Session() as sess:
        # the constant 2.0, built in the block, waits for `side` (as in TensorFlow)
        assert sess.run(gx, {x: [1.0, 2.0], z: [0.0, 0.0]}).tolist() == [2.0, 2.0]


def test_a_variable_collects_the_gradient_of_every_read(graph: tf.Graph) -> None:
    v = tf.Variable([1.0, 2.0])
    loss = tf.reduce_sum(v * v) + tf.reduce_sum(v.read_value() * 3.0)
    (grad,) = tf.gradients(loss, v)
    (through_value,) = tf.gradients(loss, v.value())
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(grad).tolist() == [5.0, 7.0]
        assert sess.run(through_value).tolist() == [2.0, 4.0]


def test_grad_ys_of_another_length_is_a_value_error(graph: tf.Graph) -> None:
    x = tf.placeholder(tf.float32, [2])
    with pytest.raises(ValueError, match="Passed 2 grad_ys for 1 ys"):
        tf.gradients(x * 2.0, x, grad_ys=[x, x])


def test_sparse_and_dense_paths_sum_to_a_dense_gradient(graph: tf.Graph) -> None:
    params = tf.placeholder(tf.float32, [3, 2])
    loss = tf.reduce_sum(tf.gather(params, [0, 0])) + tf.reduce_sum(params * 2.0)
    (grad,) = tf.gradients(loss, params)
    assert isinstance(grad, tf.Tensor) and grad.op.type == "AddN"
    only_sparse = tf.reduce_sum(tf.gather(params, [2])) + tf.reduce_sum(tf.gather(params, [2]))
    (rows,) = tf.gradients(only_sparse, params)
    assert isinstance(rows, IndexedSlices)
    with tf.Session() as sess:
        feed = {params: np.zeros((3, 2), np.float32)}
        assert sess.run(grad, feed).tolist() == [[4.0, 4.0], [2.0, 2.0], [2.0, 2.0]]
        assert sess.run(rows.indices, feed).tolist() == [2, 2]


def test_complex_valued_ops_are_refused_not_differentiated_wrongly(graph: tf.Graph) -> None:
    # docs/departures.md T26: TensorFlow conjugates; tf_accum refuses
    z = tf.placeholder(tf.complex64, [2])
    y = z * tf.constant([1 + 2j, 3j], tf.complex64)
    with pytest.raises(NotImplementedError, match=r"complex-valued ops \(op 'mul'"):
        tf.gradients(y, z, grad_ys=tf.constant([1 + 0j, 1 + 0j], tf.complex64))


def test_a_sparse_gradient_converts_to_its_dense_tensor(graph: tf.Graph) -> None:
    params = tf.placeholder(tf.float32, [3, 2])
    (rows,) = tf.gradients(tf.reduce_sum(tf.gather(params, [2, 2, 0])), params)
    assert isinstance(rows, IndexedSlices)
    dense = tf.convert_to_tensor(rows)
    assert dense.op.type == "UnsortedSegmentSum" and dense.shape.as_list() == [3, 2]
    doubled = tf.multiply(rows, 2.0)  # an op on it makes it dense too, as in TensorFlow
    with tf.Session() as sess:
        feed = {params: np.ones((3, 2), np.float32)}
        assert sess.run(dense, feed).tolist() == [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]
        assert sess.run(tf.identity(rows), feed).tolist() == [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]
        assert sess.run(doubled, feed).tolist() == [[2.0, 2.0], [0.0, 0.0], [4.0, 4.0]]


def test_gradient_override_map_swaps_an_ops_gradient(graph: tf.Graph) -> None:
    name = f"StraightThrough{uuid.uuid4().hex}"

    @tf.RegisterGradient(name)
    def _straight_through(op: Any, grad: Any) -> Any:
        return grad

    x = tf.placeholder(tf.float32, [3])
    with graph.gradient_override_map({"Sign": name}):
        passed = tf.sign(x)
    plain = tf.sign(x)
    assert passed.op.get_attr("_gradient_op_type") == name
    (through,) = tf.gradients(tf.reduce_sum(passed * 2.0), x)
    (zero,) = tf.gradients(tf.reduce_sum(plain * 2.0), x)
    with tf.Session() as sess:
        feed = {x: [-1.0, 0.5, 2.0]}
        assert sess.run(through, feed).tolist() == [2.0, 2.0, 2.0]
        assert sess.run(zero, feed).tolist() == [0.0, 0.0, 0.0]


def test_the_value_an_assignment_returns_is_a_read_of_the_variable(graph: tf.Graph) -> None:
    v = tf.Variable([1.0, 2.0])
    delta = tf.placeholder(tf.float32, [2])
    g_v, g_delta = tf.gradients(v.assign_add(delta) * 3.0, [v, delta])
    assert g_delta is None  # as TensorFlow: the delta reaches the read only through the update
    (g_assigned,) = tf.gradients(v.assign(delta) * 2.0, v)
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(g_v, {delta: [1.0, 1.0]}).tolist() == [3.0, 3.0]
        assert sess.run(g_assigned, {delta: [1.0, 1.0]}).tolist() == [2.0, 2.0]
