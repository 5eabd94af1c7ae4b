"""``get_variable``, ``variable_scope`` and the initializers against TensorFlow
2.21: initial values bit for bit (the recorded ``variables`` cases of
tests/graph/nn_table.py), and the names, sharing rules and errors below,
each as TensorFlow 2.21's graph mode gives them."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.nn_record import cases_of, check_case


@pytest.mark.parametrize("name", cases_of("variables"))
def test_variable_case_gives_what_tensorflow_gives(name: str) -> None:
    check_case(name)


def test_names_follow_variable_scopes_and_ops_follow_name_scopes(graph: tf.Graph) -> None:
    with tf.variable_scope("a") as first:
        c1 = tf.constant(1.0)
        v = tf.get_variable("v", [2])
    with tf.variable_scope("a"):
        c2 = tf.constant(1.0)
    with tf.variable_scope(first, reuse=True) as again:
        c3 = tf.constant(1.0)
        assert tf.get_variable("v") is v
    assert (again.name, again.original_name_scope) == ("a", "a/")
    with tf.name_scope("ns"):
        w = tf.get_variable("w", [1])
        with tf.variable_scope("inner"):
            c4 = tf.constant(2.0)
            w2 = tf.get_variable("w", [1])
    assert [t.name for t in (c1, c2, c3, c4)] == [
        "a/Const:0",
        "a_1/Const:0",
        "a_2/Const:0",
        "ns/inner/Const:0",
    ]
    assert [x.name for x in (v, w, w2)] == ["a/v:0", "w:0", "inner/w:0"]
    assert tf.get_variable_scope().name == ""


def test_default_names_are_made_unique(graph: tf.Graph) -> None:
    with tf.variable_scope(None, default_name="dense"):
        first = tf.get_variable("kernel", [1])
    with tf.variable_scope(None, default_name="dense"):
        second = tf.get_variable("kernel", [1])
    assert (first.name, second.name) == ("dense/kernel:0", "dense_1/kernel:0")


def test_reuse_rules_and_errors(graph: tf.Graph) -> None:
    with tf.variable_scope("a"):
        v = tf.get_variable("v", [2])
    with tf.variable_scope("a"), pytest.raises(ValueError) as exists:
        tf.get_variable("v", [2])
    assert str(exists.value).startswith(
        "Variable a/v already exists, disallowed. Did you mean to set reuse=True or "
        "reuse=tf.AUTO_REUSE in VarScope?"
    )
    with tf.variable_scope("a", reuse=True):
        with pytest.raises(ValueError, match=r"specified shape \(3,\) and found shape \(2,\)"):
            tf.get_variable("v", [3])
        with pytest.raises(ValueError, match="specified dtype float64 and found dtype float32"):
            tf.get_variable("v", [2], dtype=tf.float64)
        with pytest.raises(ValueError, match="Variable a/nope does not exist"):
            tf.get_variable("nope", [1])
        with tf.variable_scope("deep", reuse=False):  # reuse is inherited
            assert tf.get_variable_scope().reuse is True
    with tf.variable_scope("a", reuse=tf.AUTO_REUSE):
        assert tf.get_variable("v", [2]) is v
        made = tf.get_variable("new", [1])
        assert tf.get_variable("new", [1]) is made
    with tf.variable_scope("r") as scope:
        tf.get_variable("x", [1])
        scope.reuse_variables()
        assert tf.get_variable("x").name == "r/x:0"
    assert len(tf.global_variables()) == 3


def test_shape_and_initializer_errors(graph: tf.Graph) -> None:
    with pytest.raises(ValueError, match="If initializer is a constant, do not specify shape."):
        tf.get_variable("k", [2], initializer=tf.constant([1.0, 2.0]))
    with pytest.raises(ValueError, match="The initializer passed is not valid"):
        tf.get_variable("k", [None, 2])
    with pytest.raises(ValueError, match="did not get an initializer"):
        tf.get_variable("k")
    with pytest.raises(TypeError, match="name_or_scope is required"):
        tf.variable_scope(None)
    assert tf.get_variable("k", initializer=[1, 2, 3]).dtype == tf.int32
    assert tf.global_variables()[0].name == "k:0"


def test_trainable_collections_and_scope_defaults(graph: tf.Graph) -> None:
    kept = tf.get_variable("t", [1], trainable=False)
    mine = tf.get_variable("c", [1], collections=["mine"])
    with tf.variable_scope("init", initializer=tf.constant_initializer(3.0), dtype=tf.float64):
        q = tf.get_variable("q", [2])
    assert kept not in tf.trainable_variables()
    assert mine in tf.trainable_variables() and mine not in tf.global_variables()
    assert tf.get_collection("mine") == [mine]
    assert q.dtype == tf.float64
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(session.run(q), [3.0, 3.0])


def test_initial_value_ops_live_under_the_variable(graph: tf.Graph) -> None:
    with tf.control_dependencies([tf.no_op(name="before")]):
        v = tf.get_variable("w", [2, 2])
    names = [op.name for op in graph.get_operations()]
    assert "w/Initializer/random_uniform/RandomUniform" in names
    assert not graph.get_operation_by_name("w/Initializer/random_uniform").control_inputs
    assert v.op.name == "w"


def test_eager_get_variable_makes_a_variable_each_time() -> None:
    first = tf.get_variable("e", [2], initializer=tf.ones_initializer())
    second = tf.get_variable("e", [2])
    assert first is not second
    np.testing.assert_array_equal(first.numpy(), [1.0, 1.0])


def test_initializer_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="positive"):
        tf.variance_scaling_initializer(scale=0.0)
    with pytest.raises(ValueError, match="mode"):
        tf.variance_scaling_initializer(mode="fan_sideways")
    with pytest.raises(ValueError, match="floating point"):
        tf.random_normal_initializer(dtype=tf.int32)
    assert tf.glorot_uniform_initializer(seed=1).get_config() == {"seed": 1, "dtype": "float32"}


def test_a_regularizer_adds_its_loss(graph: tf.Graph) -> None:
    with tf.variable_scope("layer"):
        w = tf.get_variable(
            "w", [2], initializer=tf.constant_initializer(3.0), regularizer=tf.nn.l2_loss
        )
    (loss,) = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert loss.op.name.startswith("layer/w/Regularizer/")
    assert tf.losses.get_regularization_losses() == [loss]
    with tf.Session() as session:
        session.run(w.initializer)
        assert session.run(loss) == pytest.approx(9.0)


def test_unsupported_arguments_are_refused_not_ignored(graph: tf.Graph) -> None:
    with pytest.raises(NotImplementedError, match="partitioner"):
        tf.get_variable("p", [4], partitioner=lambda shape, dtype: [2])
    with pytest.raises(NotImplementedError, match="custom_getter"):
        tf.variable_scope("s", custom_getter=lambda getter, *a, **k: getter(*a, **k))
    assert tf.global_variables() == []
