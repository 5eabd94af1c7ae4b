"""Device scopes, ClusterSpec and replica_device_setter (issue 24), without Ray.

Every expected device string below is what TensorFlow 2.21 records for the
same graph (run there and copied).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tf_accum import errors


def const_device(**kwargs: Any) -> str:
    device: str = tf.constant(1, **kwargs).op.device
    return device


def test_device_strings_merge_into_enclosing_scopes(graph) -> None:
    with tf.device("/job:ps/task:1"):
        assert const_device() == "/job:ps/task:1"
        with tf.device("/task:0"):
            assert const_device() == "/job:ps/task:0"
        with tf.device("/cpu:0"):
            assert const_device() == "/job:ps/task:1/device:CPU:0"
        with tf.device("/job:worker"):
            assert const_device() == "/job:worker/task:1"
        with tf.device(None):
            assert const_device() == ""
        with tf.device(""):
            assert const_device() == "/job:ps/task:1"
    assert const_device() == ""


def test_device_functions_replace_and_strings_fill_in(graph) -> None:
    with tf.device("/job:ps/task:1"):
        with tf.device(lambda op: "/job:x"):
            assert const_device() == "/job:x/task:1"
        with tf.device(lambda op: "/task:3"):
            assert const_device() == "/job:ps/task:3"
    with tf.device(lambda op: "/job:w/task:2"):
        with tf.device("/cpu:0"):
            assert const_device() == "/job:w/task:2"
        seen = []

        def inner(op):
            seen.append((op.type, op.device))
            return "/gpu:0"

        with tf.device(inner):
            assert const_device(name="c") == "/job:w/task:2"
        assert seen == [("Const", "")]


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:0/device:CPU:0"),
        ("/CPU:0", "/device:CPU:0"),
        ("/gpu:1", "/device:GPU:1"),
        ("/job:ps/task:0/cpu:0", "/job:ps/task:0/device:CPU:0"),
        ("/device:CPU:*", "/device:CPU:*"),
        ("job:ps", "/job:ps"),
        ("/job:ps/device:cpu:0", "/job:ps/device:CPU:0"),
        ("/task:1/job:ps", "/job:ps/task:1"),
        ("/replica:2", "/replica:2"),
        ("/job:ps/task:0/task:1", "/job:ps/task:1"),
    ],
)
def test_device_strings_are_recorded_canonically(graph, given, canonical) -> None:
    with tf.device(given):
        assert const_device() == canonical
    assert tf.DeviceSpec.from_string(given).to_string() == canonical


@pytest.mark.parametrize(
    ("given", "error", "says"),
    [
        ("/job:ps/task:x", ValueError, "invalid literal for int()"),
        ("/foo:1", ValueError, "Unknown attribute 'foo'"),
        ("ps:0", ValueError, "Unknown attribute 'ps'"),
        ("/cpu:0/gpu:0", ValueError, "Multiple device types"),
        (3, TypeError, "device string"),
    ],
)
def test_bad_devices_are_refused(graph, given, error, says) -> None:
    before = len(graph.get_operations())
    with pytest.raises(error, match=says), tf.device(given):
        pass
    assert len(graph.get_operations()) == before


def test_a_device_function_must_return_a_string(graph) -> None:
    with tf.device(lambda op: None), pytest.raises(TypeError, match="string"):
        tf.constant(1)


def test_cluster_spec_as_tensorflow_has_it() -> None:
    c = tf.train.ClusterSpec({"worker": {0: "w0:1", 2: "w2:1"}, "ps": ["p0:1", "p1:1"]})
    assert c.jobs == ["worker", "ps"]
    assert c.as_dict() == {"worker": {0: "w0:1", 2: "w2:1"}, "ps": ["p0:1", "p1:1"]}
    assert c.job_tasks("worker") == ["w0:1", None, "w2:1"]
    assert c.num_tasks("worker") == 2
    assert c.task_indices("worker") == [0, 2]
    assert c.task_address("ps", 1) == "p1:1"
    assert repr(c) == "ClusterSpec({'ps': ['p0:1', 'p1:1'], 'worker': {0: 'w0:1', 2: 'w2:1'}})"
    assert bool(c) and not bool(tf.train.ClusterSpec({}))
    same = tf.train.ClusterSpec({"ps": ("p0:1", "p1:1"), "worker": {2: "w2:1", 0: "w0:1"}})
    assert same == c and tf.train.ClusterSpec(c) == c
    assert same.identity() == c.identity()
    assert tf.train.ClusterSpec({"ps": ["p0:1"]}).identity() != c.identity()


@pytest.mark.parametrize(
    ("call", "error", "says"),
    [
        (lambda c: c.task_address("worker", 1), ValueError, "No task with index 1 in job 'worker'"),
        (lambda c: c.task_address("x", 0), ValueError, "No such job in cluster: 'x'"),
        (lambda c: c.num_tasks("x"), ValueError, "No such job in cluster: 'x'"),
        (lambda c: c.job_tasks("x"), ValueError, "No such job in cluster: 'x'"),
        (lambda c: tf.train.ClusterSpec("a"), TypeError, "must be a dictionary"),
        (lambda c: tf.train.ClusterSpec({"ps": "a:1"}), TypeError, "must be a list or a dict"),
        (lambda c: tf.train.ClusterSpec({"ps": [1]}), TypeError, "Task address 1 must be"),
        (lambda c: tf.train.ClusterSpec({"ps": {"x": "a"}}), ValueError, "invalid literal"),
        (lambda c: tf.train.ClusterSpec({1: ["a"]}), TypeError, "Job name 1 must be"),
    ],
)
def test_cluster_spec_errors(call, error, says) -> None:
    c = tf.train.ClusterSpec({"worker": {0: "w0:1", 2: "w2:1"}})
    with pytest.raises(error, match=says):
        call(c)


def test_replica_device_setter_places_state_round_robin(graph) -> None:
    with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
        v = tf.Variable(1.0, name="v")
        w = tf.Variable(2.0, name="w")
        step = tf.train.get_or_create_global_step()
        dense = tf.ConditionalAccumulator(tf.float32, shape=[2], shared_name="a")
        sparse = tf.SparseConditionalAccumulator(tf.float32, shape=[2], shared_name="s")
        apply = dense.apply_grad([1.0, 2.0], local_step=0)
        c = tf.constant(1.0)
    assert [v.op.device, w.op.device, step.op.device] == [
        "/job:ps/task:0",
        "/job:ps/task:1",
        "/job:ps/task:0",
    ]
    assert dense.accumulator_ref.op.device == "/job:ps/task:1"
    # as in TensorFlow: the sparse constructor is not a ps op type
    assert sparse.accumulator_ref.op.device == "/job:worker"
    assert apply.device == "/job:worker" and c.op.device == "/job:worker"


def test_replica_device_setter_keeps_what_inner_scopes_set(graph) -> None:
    setter = tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:3")
    with tf.device(setter):
        with tf.device("/job:ps/task:1"):
            v = tf.Variable(1.0, name="v")
        w = tf.Variable(1.0, name="w")
        with tf.device("/job:other"):
            x = tf.Variable(1.0, name="x")
        with tf.device("/cpu:0"):
            y = tf.Variable(1.0, name="y")
            c = tf.constant(1)
    assert [u.op.device for u in (v, w, x, y)] == [
        "/job:ps/task:1",
        "/job:ps/task:1",
        "/job:other",
        "/job:ps/task:0/device:CPU:0",
    ]
    assert c.op.device == "/job:worker/task:3/device:CPU:0"


def test_replica_device_setter_arguments() -> None:
    assert tf.train.replica_device_setter(ps_tasks=0) is None
    assert tf.train.replica_device_setter(cluster={"worker": ["a:1"]}) is None
    assert callable(tf.train.replica_device_setter(cluster={"ps": ["a:1", "b:1", "c:1"]}))
    with pytest.raises(TypeError, match="ps_strategy must be callable"):
        tf.train.replica_device_setter(ps_tasks=2, ps_strategy=3)  # type: ignore[arg-type]
    g = tf.Graph()
    with g.as_default():
        setter = tf.train.replica_device_setter(
            cluster=tf.train.ClusterSpec({"ps": ["a:1", "b:1", "c:1"], "worker": ["w:1"]}),
            ps_ops=["VarHandleOp"],
            ps_strategy=lambda op: 2,
        )
        with tf.device(setter):
            v = tf.Variable(np.float32(1), name="v")
            acc = tf.ConditionalAccumulator(tf.float32, shape=[1])
    assert v.op.device == "/job:ps/task:2"
    assert acc.accumulator_ref.op.device == "/job:worker"


def test_server_checks_its_task_without_ray() -> None:
    cluster = tf.train.ClusterSpec({"worker": ["a:1", "b:1"], "ps": ["c:1"]})
    with pytest.raises(errors.InvalidArgumentError, match='Job "x" was not defined'):
        tf.train.Server(cluster, job_name="x", task_index=0, start=False)
    with pytest.raises(errors.InvalidArgumentError, match='Task 5 was not defined in job "worker"'):
        tf.train.Server(cluster, job_name="worker", task_index=5, start=False)
    with pytest.raises(ValueError, match="explicit `job_name`"):
        tf.train.Server(cluster, start=False)
    with pytest.raises(ValueError, match="explicit `task_index`"):
        tf.train.Server(cluster, job_name="worker", start=False)
    server = tf.train.Server({"ps": ["p-unique-7:1"]}, job_name="ps", start=False)
    assert server.target == "grpc://p-unique-7:1"
    assert (server.job_name, server.task_index) == ("ps", 0)


def test_a_session_target_needs_a_server_of_this_process(graph) -> None:
    with pytest.raises(errors.UnimplementedError, match="no tf.train.Server of this process"):
        tf.Session("grpc://nowhere-h24:1")


def test_a_one_task_cluster_runs_in_process_without_ray(graph) -> None:
    import sys

    server = tf.train.Server.create_local_server()
    assert server.target == "grpc://localhost:0"
    with tf.device("/job:localhost/task:0"):
        acc = tf.ConditionalAccumulator(tf.float32, shape=[1], shared_name="local-only")
        apply = acc.apply_grad([2.0], local_step=0)
        take = acc.take_grad(1)
    with tf.Session(server.target) as sess:
        sess.run(apply)
        assert sess.run(take).tolist() == [2.0]
    # nothing was placed on another task: no Ray cluster was joined or started
    # (the tests that start one run after this module)
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized()


def test_variables_tensors_and_ops_have_the_device_tensorflow_gives_them(graph) -> None:
    # TensorFlow 2.21: a variable's device is its op's, a tensor's its op's, in the
    # canonical spelling, whether a device string or replica_device_setter placed it
    setter = tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")
    with tf.device(setter):
        v = tf.Variable(1.0, name="v")
        w = tf.Variable(2.0, name="w")
        total = tf.constant(1.0) + v
    assert (v.device, v.op.device, w.device) == (
        "/job:ps/task:0",
        "/job:ps/task:0",
        "/job:ps/task:1",
    )
    assert total.device == total.op.device == "/job:worker/task:0"
    with tf.device("/job:worker/task:1/cpu:0"):
        x = tf.constant(1.0)
        y = tf.Variable(1.0)
    assert y.initializer is not None
    for found in (x.device, x.op.device, y.device, y.initializer.device):
        assert found == "/job:worker/task:1/device:CPU:0"
    with tf.device("/job:ps"):
        with tf.device("/task:1"):
            nested = tf.constant(2.0)
        with tf.device(None):
            cleared = tf.constant(2.0)
    assert (nested.device, cleared.device) == ("/job:ps/task:1", "")
    assert isinstance(tf.constant(0).device, str) and tf.constant(0).device == ""


def test_an_eager_variable_is_on_this_processs_cpu() -> None:
    # TensorFlow 2.21 names it so on a machine without GPUs
    assert tf.Variable(1.0).device == "/job:localhost/replica:0/task:0/device:CPU:0"
