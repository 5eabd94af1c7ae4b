"""Graph-mode arithmetic (issue 26): Tensor operators and the math functions a
synchronous-SGD chief uses, against TensorFlow 2.21.

The table (tests/graph/math_table.py) holds one case per operator and dtype
pair, Python and numpy operands on either side, the functions, broadcasting
and static shapes, with the errors; math_tensorflow.json holds TensorFlow's
outcomes of every case, and a test checks that record against a live
TensorFlow when one is installed.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.math_table import (
    CASES,
    EAGER_CASES,
    RECORD,
    eager_outcome,
    outcome,
)
from tests.helpers import Background
from tests.live_tensorflow import last_json_line, live_job, live_result
from tf_accum.graph.operators import TensorOperators

RECORDED: dict[str, dict[str, Any]] = json.loads(RECORD.read_text())


@pytest.mark.parametrize("case", CASES)
def test_graph_case_gives_what_tensorflow_gives(case: str) -> None:
    assert outcome(tf, case) == RECORDED["graph"][case]


@pytest.mark.parametrize("case", EAGER_CASES)
def test_eager_case_gives_what_tensorflow_gives(case: str) -> None:
    assert eager_outcome(tf, case) == RECORDED["eager"][case]


def test_the_record_holds_every_case_and_covers_the_grid() -> None:
    assert set(RECORDED["graph"]) == set(CASES)
    assert set(RECORDED["eager"]) == set(EAGER_CASES)
    # every operator meets every dtype pair, and the errors are among them
    outcomes = RECORDED["graph"].values()
    assert sum("error" in o for o in outcomes) > 300
    assert sum("run_error" in o for o in outcomes) >= 10


# TensorFlow's outcomes today, found in a child process
_LIVE_JOB = live_job("math table: TensorFlow's outcomes", "tests.graph.math_table")


@pytest.mark.background(_LIVE_JOB)
def test_the_record_is_what_tensorflow_gives_today() -> None:
    live = last_json_line(live_result(_LIVE_JOB))
    for part in ("graph", "eager"):
        differing = [case for case in RECORDED[part] if live[part][case] != RECORDED[part][case]]
        assert differing == [], part


# --- on what a take gives ------------------------------------------------------


@pytest.mark.usefixtures("graph")
def test_the_chief_scales_and_subtracts_the_taken_mean() -> None:
    acc = tf.ConditionalAccumulator(tf.float32, shape=[2])
    grad, local_step = tf.placeholder(tf.float32, [2]), tf.placeholder(tf.int64, [])
    apply = acc.apply_grad(grad, local_step=local_step)
    w = tf.Variable([1.0, 1.0])
    taken = acc.take_grad(2)
    step = 0.5 * taken
    assert (step.dtype, step.shape.as_list()) == (tf.float32, [2])
    update = w.assign(w - step)
    negated, difference = -taken, taken - taken
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for g in ([1.0, 2.0], [3.0, 4.0]):
            sess.run(apply, {grad: g, local_step: 0})
        assert sess.run(update).tolist() == [0.0, -0.5]  # mean [2, 3], halved
        for g in ([2.0, 2.0], [4.0, 0.0]):
            sess.run(apply, {grad: g, local_step: 1})  # the take moved the global step on
        both = sess.run([negated, difference, -tf.reduce_mean(taken)])
    assert both[0].tolist() == [-3.0, -1.0] and both[1].tolist() == [0.0, 0.0]
    assert both[2] == np.float32(-2.0) and both[2].dtype == np.float32


@pytest.mark.usefixtures("graph")
def test_an_integer_learning_rate_scales_a_float_take_and_a_float_refuses_an_int_take() -> None:
    floats = tf.ConditionalAccumulator(tf.float32, shape=[2])
    assert (2 * floats.take_grad(1)).dtype == tf.float32
    ints = tf.ConditionalAccumulator(tf.int32, shape=[2])
    with pytest.raises(TypeError, match=r"^Expected int32, but got 0.1 of type 'float'.$"):
        _ = 0.1 * ints.take_grad(1)


@pytest.mark.usefixtures("graph")
def test_a_take_of_unknown_shape_gives_unknown_shapes() -> None:
    acc = tf.ConditionalAccumulator(tf.float32, shape=None)
    scaled = 0.1 * acc.take_grad(1)
    assert scaled.shape.rank is None and tf.reduce_sum(scaled, axis=0).shape.rank is None
    partial = tf.ConditionalAccumulator(tf.float32, shape=[None, 3])
    assert (partial.take_grad(1) * [1.0, 2.0, 3.0]).shape.as_list() == [None, 3]
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 2"):
        _ = partial.take_grad(1) * [1.0, 2.0]


@pytest.mark.usefixtures("graph")
def test_zeros_like_of_a_take_of_known_shape_does_not_wait_for_the_take() -> None:
    acc = tf.ConditionalAccumulator(tf.float32, shape=[2])
    zeros, ones = tf.zeros_like(acc.take_grad(1)), tf.ones_like(acc.take_grad(1))
    with tf.Session() as sess:
        done = Background(lambda: sess.run([zeros, ones]))
        values = done.result(timeout=10)
    assert values[0].tolist() == [0.0, 0.0] and values[1].tolist() == [1.0, 1.0]


@pytest.mark.usefixtures("graph")
def test_a_run_time_shape_mismatch_is_an_invalid_argument_and_changes_nothing() -> None:
    w = tf.Variable([1.0, 2.0])
    delta = tf.placeholder(tf.float32, [None])
    update = w.assign(w - delta)
    with tf.Session() as sess:
        sess.run(w.initializer)
        with pytest.raises(
            tf.errors.InvalidArgumentError, match=r"Incompatible shapes: \[2\] vs\. \[3\]"
        ):
            sess.run(update, {delta: [1.0, 1.0, 1.0]})
        assert sess.run(w).tolist() == [1.0, 2.0]


@pytest.mark.usefixtures("graph")
@pytest.mark.parametrize("op", [tf.math.floordiv, tf.math.floormod, tf.add, tf.maximum])
def test_shapes_that_do_not_broadcast_are_refused_before_a_zero_divisor(op: Any) -> None:
    # as TensorFlow 2.21: the shapes are checked before any value
    a = tf.placeholder(tf.int32, [None])
    b = tf.placeholder(tf.int32, [None])
    with (
        tf.Session() as sess,
        pytest.raises(
            tf.errors.InvalidArgumentError, match=r"Incompatible shapes: \[2\] vs\. \[3\]"
        ),
    ):
        sess.run(op(a, b), {a: [1, 2], b: [0, 0, 0]})


def test_an_operator_builds_in_its_tensors_graph() -> None:
    g = tf.Graph()
    with g.as_default():
        t = tf.constant([1.0, 2.0])
    scaled = t * 2.0  # outside the block, as TensorFlow allows
    assert scaled.graph is g and scaled.op.name == "mul"
    other = tf.Graph()
    with other.as_default(), pytest.raises(ValueError, match="must be from the same graph"):
        _ = t + tf.constant([1.0, 2.0])
    with tf.Session(graph=g) as sess:
        assert sess.run(scaled).tolist() == [2.0, 4.0]


class Holder(TensorOperators):
    """Holds a graph tensor (or, eagerly, a value), as a Variable does."""

    def __init__(self, value: Any) -> None:
        self.value = value

    @property
    def graph_element(self) -> Any:
        if not isinstance(self.value, tf.Tensor):
            raise AttributeError("an eager holder has no graph tensor")
        return self.value

    def numpy(self) -> Any:
        return np.asarray(self.value)


def test_a_class_holding_a_tensor_gets_the_operators_by_inheriting_them() -> None:
    with tf.Graph().as_default():
        held = Holder(tf.constant([1.0, -2.0]))
        built = [held * 2, 2 - held, -held, abs(held), held / held]
        with tf.Session() as sess:
            values = sess.run(built)
        with pytest.raises(TypeError, match="Expected float32, but got 0.5j"):
            _ = 0.5j * held
    assert [v.tolist() for v in values] == [[2, -4], [1, 4], [-1, 2], [1, 2], [1, 1]]
    eager = Holder(np.array([1, 2], np.int32))  # eagerly: its value, with TF's dtype rules
    assert (eager * 3).tolist() == [3, 6] and (eager * 3).dtype == np.int32
    assert (-eager).tolist() == [-1, -2] and (eager / 2).dtype == np.float64
    assert (eager + eager).tolist() == [2, 4] and (3 - eager).tolist() == [2, 1]
    with pytest.raises(TypeError, match=r"^Expected int32, but got 0.5 of type 'float'.$"):
        _ = 0.5 * eager


def test_eager_results_are_numpy_arrays() -> None:
    assert tf.executing_eagerly()
    result = tf.multiply(np.array([1.0, 2.0], np.float32), 0.5)
    assert isinstance(result, np.ndarray) and result.dtype == np.float32
    assert tf.reduce_mean(np.array([1, 2, 4], np.int32)).dtype == np.int32


# --- names tf_accum does not have ------------------------------------------------


@pytest.mark.parametrize("name", ["while_loop", "layers", "py_func"])
def test_a_missing_tf1_name_says_what_graph_mode_covers(name: str) -> None:
    with pytest.raises(AttributeError) as raised:
        getattr(tf, name)
    message = str(raised.value)
    assert f"has no attribute '{name}'" in message
    assert "tf_accum's graph mode covers accumulator programs" in message
    assert "__all__" in message and "README" in message
    assert not hasattr(tf, name) and hasattr(tf, "multiply")


def test_a_missing_dunder_gets_the_plain_message() -> None:
    dunder = "__wrapped__"  # looked up by tools (inspect, doctest): no advice for them
    with pytest.raises(AttributeError, match="no attribute '__wrapped__'$"):
        getattr(tf, dunder)


def test_the_math_names_are_exported() -> None:
    names = {"multiply", "subtract", "divide", "negative", "square", "reduce_sum",
             "reduce_mean", "zeros", "ones", "zeros_like", "ones_like"}  # fmt: skip
    assert names <= set(tf.__all__)


@pytest.mark.usefixtures("graph")
def test_kernels_give_infinities_and_nans_under_a_callers_raising_float_state() -> None:
    # TensorFlow's kernels give IEEE results; numpy's error state of the caller
    # (here: raise on everything) neither changes them nor is changed by the run
    big = np.float32(3e38)
    x = tf.placeholder(tf.float32, [None, 2])
    fetches = [
        x + x,
        x / tf.zeros_like(x),
        tf.matmul(x, tf.transpose(x)),
        tf.reduce_sum(x, axis=1),
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.ones_like(x), logits=x * x),
    ]
    with tf.Session() as sess, np.errstate(all="raise"):
        total, quotient, product, summed, loss = sess.run(fetches, {x: [[big, big]]})
        assert np.geterr()["over"] == "raise"
    assert np.isinf(total).all() and np.isinf(quotient).all() and np.isinf(product).all()
    assert np.isinf(summed).all() and np.isnan(loss).all()
