"""Session and InteractiveSession (issue 7): fetch structures, feeds, defaults,
lifetime, and each session's own accumulators (case D45)."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.support import DenseOps
from tests.helpers import Background
from tf_accum import errors

Pair = collections.namedtuple("Pair", "first second")


@pytest.fixture
def g(graph):
    return graph


def test_every_fetch_structure(g) -> None:
    a = tf.constant(1.0, name="a")
    b = tf.constant([2, 3], name="b")
    op = tf.no_op()
    with tf.Session() as sess:
        one = sess.run(a)
        assert one == 1.0 and type(one) is np.float32
        got = sess.run(b)
        assert got.dtype == np.int32 and got.tolist() == [2, 3]
        assert sess.run(op) is None
        assert sess.run([a, op]) == [1.0, None]
        assert sess.run((a, a)) == (1.0, 1.0) and type(sess.run((a, op))) is tuple
        assert sess.run((op, b))[0] is None and sess.run([]) == []
        pair = sess.run(Pair(a, [b, {"k": (a, op)}]))
        assert isinstance(pair, Pair) and pair.first == 1.0
        assert pair.second[0].tolist() == [2, 3] and pair.second[1] == {"k": (1.0, None)}
        ordered = sess.run(collections.OrderedDict([("z", a), ("a", op)]))
        assert isinstance(ordered, collections.OrderedDict) and list(ordered) == ["z", "a"]
        assert ordered == collections.OrderedDict([("z", 1.0), ("a", None)])
        assert sess.run("a:0") == 1.0 and sess.run("a") is None
        assert sess.run({"x": "b:0"})["x"].tolist() == [2, 3]


def test_bad_fetches(g) -> None:
    other = tf.Graph()
    with other.as_default():
        foreign = tf.constant(1.0)
    with tf.Session() as sess:
        with pytest.raises(TypeError, match="None"):
            sess.run(None)
        with pytest.raises(TypeError):
            sess.run(3)
        with pytest.raises(ValueError, match="is not an element of this graph"):
            sess.run(foreign)
        with pytest.raises(ValueError, match="is not an element of this graph"):
            sess.run([tf.constant(2.0), foreign])
        with pytest.raises(ValueError, match="missing:0 cannot be interpreted as a Tensor"):
            sess.run("missing:0")


def test_a_tensor_fetched_twice_is_computed_once_per_run(g) -> None:
    v = tf.Variable(3.0)
    inc = v.assign_add(1.0)
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run([inc, inc, {"again": inc}]) == [4.0, 4.0, {"again": 4.0}]
        assert sess.run(v) == 4.0
        acc.put(sess, [5])
        acc.put(sess, [7], 1)  # step 1, so it would survive one take and feed a second
        first, second = sess.run(
            [acc.take, acc.take], {acc.n: 1}, options=tf.RunOptions(timeout_in_ms=10_000)
        )
        assert first.tolist() == second.tolist() == [6.0]
        assert acc.count(sess) == 0


def test_feeds(g) -> None:
    x = tf.placeholder(tf.float32, [2], name="x")
    y = tf.placeholder(tf.int32, [], name="y")
    total = tf.add(x, x, name="total")
    with tf.Session() as sess:
        got = sess.run(total, {x: [1, 2]})
        assert got.dtype == np.float32 and got.tolist() == [2, 4]
        assert sess.run(total, {"x:0": np.array([1.5, 2.5], np.float64)}).tolist() == [3, 5]
        assert sess.run(y, {y: 3}) == 3 and sess.run(y, {y: 3}).dtype == np.int32
        # any tensor may be fed, not only placeholders: its producers then do not run
        assert sess.run(total, {total: [9, 9]}).tolist() == [9, 9]
        with pytest.raises(ValueError, match=r"Cannot feed value of shape \(3,\) for Tensor x:0"):
            sess.run(total, {x: [1, 2, 3]})
        # an array of the placeholder's own dtype is checked all the same
        for wrong in (np.zeros(3, np.float32), np.zeros((1, 2), np.float32)):
            with pytest.raises(ValueError, match="Cannot feed value of shape"):
                sess.run(total, {x: wrong})
        fed = np.array([1, 2], np.float32)
        assert sess.run(total, {x: fed}).tolist() == [2, 4] and fed.tolist() == [1, 2]
        with pytest.raises(ValueError):
            sess.run(total, {x: ["a", "b"]})
        with pytest.raises(TypeError, match="The value of a feed cannot be a tf.Tensor"):
            sess.run(total, {x: total})
        with pytest.raises(TypeError, match="Cannot interpret feed_dict key as Tensor"):
            sess.run(total, {total.op: [1, 2]})


def test_an_unfed_placeholder_is_named(g) -> None:
    x = tf.placeholder(tf.float32, [2], name="yy")
    unknown = tf.placeholder(tf.float32, name="ph")
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError) as caught:
            sess.run(tf.add(x, 1.0))
        assert caught.value.message == (
            "You must feed a value for placeholder tensor 'yy' with dtype float and shape [2]"
        )
        assert caught.value.op is x.op
        with pytest.raises(errors.InvalidArgumentError) as caught:
            sess.run(unknown)
        assert caught.value.message == (
            "You must feed a value for placeholder tensor 'ph' with dtype float"
        )


def test_placeholder_with_default(g) -> None:
    d = tf.placeholder_with_default(tf.constant([1, 2]), shape=[None])
    with tf.Session() as sess:
        assert sess.run(d).tolist() == [1, 2]
        assert sess.run(d, {d: [5, 6, 7]}).tolist() == [5, 6, 7]
        with pytest.raises(ValueError, match="Cannot feed value of shape"):
            sess.run(d, {d: [[5]]})


def test_context_manager_makes_session_and_graph_default_then_closes(g) -> None:
    other = tf.Graph()
    with other.as_default():
        c = tf.constant(4.0)
        op = tf.no_op()
    assert tf.get_default_session() is None
    with tf.Session(graph=other) as sess:
        assert sess.graph is other
        assert tf.get_default_session() is sess and tf.get_default_graph() is other
        assert c.eval() == 4.0
        assert op.run() is None  # type: ignore[union-attr]
    assert tf.get_default_session() is None and tf.get_default_graph() is g
    with pytest.raises(RuntimeError, match="Attempted to use a closed Session."):
        sess.run(c)
    sess.close()  # twice is harmless


def test_as_default_keeps_the_session_open(g) -> None:
    c = tf.constant(2.0)
    sess = tf.Session()
    assert sess.graph is g
    with sess.as_default():
        assert tf.get_default_session() is sess
        assert c.eval() == 2.0
    assert tf.get_default_session() is None
    assert c.eval(session=sess) == 2.0
    sess.close()


def test_default_session_is_per_thread(g) -> None:
    c = tf.constant(1.0)
    with tf.Session() as sess:
        assert Background(tf.get_default_session).result() is None
        assert Background(c.eval, session=sess).result() == 1.0

        def own() -> tuple[Any, ...]:
            with tf.Session(graph=g) as mine:
                return tf.get_default_session() is mine, c.eval()

        assert Background(own).result() == (True, 1.0)
        assert tf.get_default_session() is sess


def test_eval_and_run_without_a_session(g) -> None:
    c = tf.constant(1.0)
    with pytest.raises(ValueError, match="Cannot evaluate tensor using `eval\\(\\)`: No default"):
        c.eval()
    with pytest.raises(ValueError, match="Cannot execute operation using `run\\(\\)`: No default"):
        tf.no_op().run()  # type: ignore[union-attr]
    with tf.Graph().as_default():
        with tf.Session() as sess, pytest.raises(ValueError, match="graph is different"):
            c.eval()
        del sess


def test_interactive_session(g) -> None:
    c = tf.constant([1.0, 2.0])
    acc = DenseOps()
    sess = tf.InteractiveSession()
    try:
        assert tf.get_default_session() is sess
        acc.apply.run({acc.grad: [1, 1], acc.step: 0})
        assert acc.num.eval() == 1
        assert c.eval().tolist() == [1, 2]
    finally:
        sess.close()
    assert tf.get_default_session() is None


def test_options_and_metadata_are_accepted(g) -> None:
    c = tf.constant(1.0)
    config = tf.ConfigProto(allow_soft_placement=True, log_device_placement=False)
    config.gpu_options.allow_growth = True
    config.gpu_options.per_process_gpu_memory_fraction = 0.5
    config.graph_options.optimizer_options.global_jit_level = 1
    assert config.gpu_options.allow_growth is True and config.allow_soft_placement is True
    assert tf.RunOptions().timeout_in_ms == 0
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, timeout_in_ms=5000)
    with tf.Session(config=config) as sess:
        assert sess.run(c, options=options, run_metadata=tf.RunMetadata()) == 1.0
    with pytest.raises(errors.UnimplementedError):
        tf.Session("grpc://localhost:2222")


def test_sessions_on_one_graph_have_their_own_accumulators(g) -> None:  # D45
    acc = DenseOps(shared_name="x")
    with tf.Session() as s1, tf.Session() as s2:
        acc.put(s1, [1, 1])
        assert acc.count(s2) == 0
        assert acc.count(s1) == 1


def test_closing_frees_the_sessions_accumulators(g) -> None:
    acc = DenseOps()
    sess = tf.Session()
    acc.put(sess, [1, 1])
    assert len(sess.table.live_handles()) == 1
    sess.close()
    assert sess.table.live_handles() == []


def test_kernel_errors_carry_the_failing_op(g) -> None:
    acc = DenseOps(shape=[2])
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError) as caught:
            acc.put(sess, [1, 2, 3])
        assert caught.value.op is acc.apply
        assert isinstance(caught.value, errors.OpError)
        assert caught.value.error_code == errors.INVALID_ARGUMENT


def test_constants_and_handles_given_once_per_plan_still_obey_feeds(g) -> None:
    # a sequential run starts from the constants' and variables' handles' values
    # instead of calling their ops; a fed constant still gives the fed value
    c = tf.constant([1.0, 2.0])
    v = tf.Variable([10.0, 20.0])
    total = c + v
    p = tf.placeholder(tf.float32, [None])
    bad = tf.reshape(p, [3])  # fails when run with two values
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(total).tolist() == [11.0, 22.0]
        assert sess.run(total, {c: np.array([5.0, 6.0], np.float32)}).tolist() == [15.0, 26.0]
        assert sess.run(total).tolist() == [11.0, 22.0]
        sess.run(v.assign([0.0, 1.0]))
        assert sess.run(total).tolist() == [1.0, 3.0]
        assert sess.run(c).tolist() == [1.0, 2.0]
        with pytest.raises(errors.InvalidArgumentError) as caught:
            sess.run(bad, {p: np.zeros(2, np.float32)})
        assert caught.value.op is bad.op
