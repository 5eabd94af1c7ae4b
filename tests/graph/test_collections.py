"""Collections, local variables and the global step (issue 26), as TensorFlow 2.21 has them."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import tf_accum.compat.v1 as tf

pytestmark = pytest.mark.usefixtures("graph")


def test_graph_keys_are_tensorflows_strings() -> None:
    keys = tf.GraphKeys
    assert (keys.GLOBAL_VARIABLES, keys.LOCAL_VARIABLES, keys.TRAINABLE_VARIABLES) == (
        "variables",
        "local_variables",
        "trainable_variables",
    )
    assert (keys.GLOBAL_STEP, keys.VARIABLES, keys.MODEL_VARIABLES) == (
        "global_step",
        "variables",
        "model_variables",
    )


def test_variables_go_to_their_collections() -> None:
    plain = tf.Variable(1.0, name="plain")
    local = tf.Variable(3, collections=[tf.GraphKeys.LOCAL_VARIABLES], name="local")
    mine = tf.Variable(3.0, collections=("mine",), name="mine")
    frozen = tf.Variable(3.0, collections=["mine"], trainable=False, name="frozen")
    assert tf.global_variables() == [plain]
    assert tf.local_variables() == [local] == tf.get_collection(tf.GraphKeys.LOCAL_VARIABLES)
    # as TensorFlow: trainable variables are listed whatever collections were given
    assert tf.trainable_variables() == [plain, local, mine]
    assert tf.get_collection("mine") == [mine, frozen]
    with pytest.raises(
        ValueError,
        match=r"^collections argument to Variable constructor must "
        r"be a list, tuple, or set\. Got mine of type <class 'str'>$",
    ):
        tf.Variable(3.0, collections="mine")


def test_local_variables_initializer() -> None:
    local = tf.Variable(3, collections=[tf.GraphKeys.LOCAL_VARIABLES], name="local")
    glob = tf.Variable(1.0, name="glob")
    init = tf.local_variables_initializer()
    assert init is not None
    assert init.type == "NoOp" and init.name == "init"
    assert init.control_inputs == (local.initializer,)
    with tf.Session() as sess:
        assert sess.run(init) is None
        assert sess.run(local) == 3
        with pytest.raises(tf.errors.FailedPreconditionError):
            sess.run(glob)


def test_get_and_add_to_collection() -> None:
    tf.add_to_collection("things", 5)
    tf.add_to_collection("things", "a")
    assert tf.get_collection("things") == [5, "a"]
    assert tf.get_collection("nothing") == [] and tf.get_collection(5) == []
    copy = tf.get_collection("things")
    copy.append(6)
    assert tf.get_collection("things") == [5, "a"]
    tf.get_collection_ref("things").append(6)
    assert tf.get_collection("things") == [5, "a", 6]
    tf.add_to_collections(["p", "q"], 1)
    assert tf.get_collection("p") == tf.get_collection("q") == [1]
    with pytest.raises(TypeError, match="unhashable"):
        tf.add_to_collection(["x", "y"], 1)  # type: ignore[arg-type]


def test_get_collection_scope_is_a_regular_expression_on_names() -> None:
    rv = tf.Variable([1.0], name="rv")
    other = tf.Variable([1.0], name="other")
    tf.add_to_collection(tf.GraphKeys.GLOBAL_VARIABLES, 7)  # no name: never in a scope
    assert tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES, scope="rv") == [rv]
    assert tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES, scope="r.*") == [rv]
    assert tf.global_variables(scope="o") == [other]
    assert tf.get_default_graph().get_collection("variables", "x") == []


def test_global_step_functions() -> None:
    assert tf.train.get_global_step() is None
    step = tf.train.create_global_step()
    assert (step.name, step.dtype, step.shape, step.trainable) == (  # type: ignore[comparison-overlap]
        "global_step:0",
        tf.int64,
        (),
        False,
    )
    assert tf.get_collection(tf.GraphKeys.GLOBAL_STEP) == [step]
    assert step in tf.global_variables()
    assert tf.train.get_global_step() is step
    with pytest.raises(ValueError, match=r'^"global_step" already exists\.$'):
        tf.train.create_global_step()
    with tf.Session() as sess:
        sess.run(step.initializer)
        sess.run(tf.assign_add(step, 3))
        value = tf.train.global_step(sess, step)
        assert type(value) is int and value == 3
        assert tf.train.global_step(sess, step.read_value()) == 3


def test_a_variable_called_global_step_is_found_by_name() -> None:
    # a TF1 program's own step: TensorFlow 2.21 after disable_v2_behavior()
    # (reference variables) returns it; tf_accum returns the variable
    # (docs/departures.md T27: TensorFlow's resource variables are refused)
    step = tf.Variable(0, name="global_step", trainable=False)
    assert tf.train.get_global_step() is step
    assert tf.train.get_or_create_global_step() is step
    with pytest.raises(ValueError, match=r'^"global_step" already exists\.$'):
        tf.train.create_global_step()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(step.assign_add(2))
        assert tf.train.global_step(sess, tf.train.get_global_step()) == 2


def test_a_global_step_found_by_name_must_be_an_integer_scalar() -> None:
    # as TensorFlow 2.21 with reference variables: float32 and a vector refused
    tf.Variable(0.0, name="global_step", trainable=False)
    with pytest.raises(TypeError, match=r'^Existing "global_step" does not have integer type: '):
        tf.train.get_global_step()
    with pytest.raises(TypeError, match="does not have integer type"):
        tf.train.create_global_step()
    with tf.Graph().as_default():
        tf.Variable([0, 1], name="global_step")
        with pytest.raises(TypeError, match=r'^Existing "global_step" is not scalar: \(2,\)$'):
            tf.train.get_global_step()
    with tf.Graph().as_default():
        constant = tf.constant(3, name="global_step")
        assert tf.train.get_global_step() is constant


def test_several_global_steps_log_an_error(caplog: pytest.LogCaptureFixture) -> None:
    v = tf.Variable(np.int64(0), trainable=False)
    tf.add_to_collection(tf.GraphKeys.GLOBAL_STEP, v)
    tf.add_to_collection(tf.GraphKeys.GLOBAL_STEP, v)
    with caplog.at_level(logging.ERROR):
        assert tf.train.get_global_step() is None
    assert "Multiple tensors in global_step collection." in caplog.text


def test_create_global_step_in_another_graph() -> None:
    other = tf.Graph()
    step = tf.train.create_global_step(graph=other)
    assert step.graph is other and step.name == "global_step:0"
    assert tf.train.get_global_step() is None
