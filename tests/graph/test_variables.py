"""Variables and the global step (issue 7): the state a TF1 program keeps
beside its accumulators, one value per Session."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.helpers import Background
from tf_accum import errors

pytestmark = pytest.mark.usefixtures("graph")


def test_variable_ops_and_attributes() -> None:
    v = tf.Variable([1.0, 2.0], name="w")
    assert (v.name, v.dtype, v.shape, v.op.name) == ("w:0", tf.float32, (2,), "w")  # type: ignore[comparison-overlap]
    assert isinstance(v.initializer, tf.Operation) and v.initializer.name == "w/Assign"
    assert v in tf.global_variables() and v in tf.trainable_variables()
    assert isinstance(v.read_value(), tf.Tensor)
    frozen = tf.Variable(0, trainable=False, dtype=tf.int64)
    assert frozen.dtype == tf.int64 and frozen not in tf.trainable_variables()
    with pytest.raises(ValueError, match="initial_value must be specified"):
        tf.Variable()


def test_reading_before_initializing_is_a_failed_precondition() -> None:
    v = tf.Variable([1.0, 2.0], name="w")
    with tf.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError, match="Could not find variable w"):
            sess.run(v)
        sess.run(tf.global_variables_initializer())
        assert sess.run(v).tolist() == [1, 2]


def test_assign_assign_add_read_value_eval() -> None:
    v = tf.Variable([1.0, 2.0])
    set_to = v.assign([3.0, 4.0])
    bumped = tf.assign_add(v, [1.0, 1.0])
    also = tf.assign(v, tf.constant([0.0, 0.5]))
    read = v.read_value()
    doubled = tf.add(v, v)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert v.eval().tolist() == [1, 2]
        assert sess.run(set_to).tolist() == [3, 4]
        assert sess.run(bumped).tolist() == [4, 5]
        assert sess.run(read).tolist() == [4, 5] and sess.run(doubled).tolist() == [8, 10]
        assert sess.run(also).tolist() == [0, 0.5]
        assert v.eval(session=sess).dtype == np.float32
    with pytest.raises(ValueError, match="incompatible"):
        v.assign([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="requested dtype float32"):
        v.assign(tf.constant([1, 2]))


def test_each_session_has_its_own_values() -> None:
    v = tf.Variable(1)
    inc = v.assign_add(1)
    with tf.Session() as s1, tf.Session() as s2:
        s1.run(v.initializer)
        s2.run(v.initializer)
        s1.run(inc)
        assert (s1.run(v), s2.run(v)) == (2, 1)


def test_variable_from_a_callable_and_a_tensor() -> None:
    base = tf.constant([2.0, 3.0])
    from_tensor = tf.Variable(base)
    from_callable = tf.Variable(lambda: np.float64(1.5))
    with tf.Session() as sess:
        sess.run(tf.variables_initializer([from_tensor, from_callable]))
        assert sess.run(from_tensor).tolist() == [2, 3]
        assert sess.run(from_callable) == 1.5 and from_callable.dtype == tf.float64


def test_assign_add_from_many_threads_loses_nothing() -> None:
    counter = tf.Variable(0, dtype=tf.int64)
    inc = counter.assign_add(1)
    with tf.Session() as sess:
        sess.run(counter.initializer)

        def bump() -> None:
            for _ in range(200):
                sess.run(inc)

        for task in [Background(bump) for _ in range(4)]:
            task.result()
        assert sess.run(counter) == 800


def test_global_step(graph) -> None:
    assert tf.train.get_global_step() is None
    step = tf.train.get_or_create_global_step()
    assert tf.train.get_or_create_global_step() is step
    assert tf.train.get_global_step() is step
    assert (step.name, step.dtype, step.shape) == ("global_step:0", tf.int64, ())
    assert step in tf.global_variables() and step not in tf.trainable_variables()
    with tf.name_scope("scoped"), tf.control_dependencies([tf.no_op()]):
        assert tf.train.get_or_create_global_step() is step
    q = tf.ConditionalAccumulator(tf.float32, shape=[1])
    apply = q.apply_grad([1.0], local_step=step)
    set_step = q.set_global_step(step)
    bump = tf.assign_add(step, 1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(step) == 0
        sess.run(bump)
        sess.run(set_step)  # the accumulator's step is now 1
        sess.run(apply)
        assert sess.run(q.num_accumulated()) == 1


def test_global_step_of_another_graph() -> None:
    other = tf.Graph()
    step = tf.train.get_or_create_global_step(other)
    assert step.graph is other and tf.train.get_global_step() is None


def test_is_variable_initialized_and_the_report_follow_each_session() -> None:
    # as TensorFlow 2.21: names as bytes, global variables then local ones, in order
    g = tf.Graph()
    with g.as_default():
        a = tf.Variable(1.0, name="a")
        b = tf.Variable([1, 2], name="scope/b")
        c = tf.Variable(3, name="c", collections=[tf.GraphKeys.LOCAL_VARIABLES])
        report = tf.report_uninitialized_variables()
        a_ready = tf.is_variable_initialized(a)
        only_b = tf.report_uninitialized_variables(var_list=[b], name="only_b")
        none = tf.report_uninitialized_variables([], name="none")
    assert (report.dtype, report.shape.as_list(), report.op.name) == (
        tf.string, [None], "report_uninitialized_variables/boolean_mask/GatherV2"
    )  # fmt: skip
    assert (a_ready.dtype, a_ready.shape.as_list(), a_ready.op.type) == (
        tf.bool, [], "VarIsInitializedOp"
    )  # fmt: skip
    assert (none.op.name, none.shape.as_list()) == ("none/Const", [0])
    with tf.Session(graph=g) as first, tf.Session(graph=g) as second:
        assert first.run(report).tolist() == [b"a", b"scope/b", b"c"]
        assert first.run(report).dtype == object
        assert first.run(a_ready) is np.False_ or first.run(a_ready) == np.False_
        first.run(a.initializer)
        assert first.run([a_ready, c.is_initialized()]) == [True, False]
        assert first.run(report).tolist() == [b"scope/b", b"c"]
        assert first.run(only_b).tolist() == [b"scope/b"]
        with g.as_default():
            first.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        assert first.run(report).shape == (0,)
        assert first.run(none).tolist() == []
        # the other session has initialized nothing
        assert second.run(report).tolist() == [b"a", b"scope/b", b"c"]


def test_variable_and_update_ops_are_tensorflows_resource_variable_ops() -> None:
    # TensorFlow 2.21 with use_resource=True (after disable_v2_behavior, too): the
    # (type, name) of each op; tf_accum makes these whatever the switch (docs/departures.md
    # T32); disable_v2_behavior() only turns the whole process to graph mode, as a Graph does
    with tf.Graph().as_default() as graph:
        v = tf.Variable([1.0, 2.0], name="v")
        assert v.initializer is not None
        made = {
            "variable": (v.op.type, v.op.name),
            "initializer": (v.initializer.type, v.initializer.name),
            "initial_value": (v.initial_value.op.type, v.initial_value.op.name),
            "value": (v.value().op.type,),
        }
        with tf.name_scope("scope"):
            read = v.read_value()
        made["read_value"] = (read.op.type, read.name, read.op.inputs[0].name)
        for name, update in [
            ("v.assign", lambda: v.assign([3.0, 4.0])),
            ("tf.assign", lambda: tf.assign(v, [3.0, 4.0])),
            ("v.assign_add", lambda: v.assign_add([1.0, 1.0])),
            ("tf.assign_add", lambda: tf.assign_add(v, [1.0, 1.0])),
            ("v.assign_sub", lambda: v.assign_sub([1.0, 1.0])),
            ("tf.assign_sub", lambda: tf.assign_sub(v, [1.0, 1.0])),
            ("tf.scatter_update", lambda: tf.scatter_update(v, [0], [9.0])),
        ]:
            result = update()
            assert isinstance(result, tf.Tensor) and result.dtype == tf.float32
            made[name] = (result.op.type, result.op.name)
        quiet = v.assign([1.0, 1.0], read_value=False)
        assert isinstance(quiet, tf.Operation)
        made["read_value=False"] = (quiet.type, quiet.name)
        kinds = {node.op for node in graph.as_graph_def().node}
    assert made == {
        "variable": ("VarHandleOp", "v"),
        "initializer": ("AssignVariableOp", "v/Assign"),
        "initial_value": ("Const", "v/Initializer/initial_value"),
        "value": ("ReadVariableOp",),
        "read_value": ("Identity", "scope/Identity:0", "scope/Read/ReadVariableOp:0"),
        "v.assign": ("AssignVariableOp", "AssignVariableOp"),
        "tf.assign": ("AssignVariableOp", "AssignVariableOp_1"),
        "v.assign_add": ("AssignAddVariableOp", "AssignAddVariableOp"),
        "tf.assign_add": ("AssignAddVariableOp", "AssignAddVariableOp_1"),
        "v.assign_sub": ("AssignSubVariableOp", "AssignSubVariableOp"),
        "tf.assign_sub": ("AssignSubVariableOp", "AssignSubVariableOp_1"),
        "tf.scatter_update": ("ResourceScatterUpdate", "ResourceScatterUpdate"),
        "read_value=False": ("AssignVariableOp", "AssignVariableOp_2"),
    }
    # TensorFlow's graph also has a VarIsInitializedOp
    assert kinds >= {
        "Identity",
        "AssignAddVariableOp",
        "AssignSubVariableOp",
        "AssignVariableOp",
        "Const",
        "ReadVariableOp",
        "ResourceScatterUpdate",
        "VarHandleOp",
    }
