"""Session.run's fast paths behave as the general ones: single fetches, Tensor
feed keys, runs without a take, runs with one take (run on the calling thread
after everything that does not depend on it), and runs with several takes
(one thread each). Also: the flag the eager raw ops read is set only while a
graph is being built somewhere."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tf_accum as tfa
import tf_accum.compat.v1 as tf
from tests.helpers import WAIT, Background
from tf_accum.graph import mode

raw = tfa.raw_ops
ROOT = Path(__file__).resolve().parent.parent


def _waiting_takes(sess: tf.Session) -> int:
    table = sess.table
    return sum(table.lookup(h).num_waiting() for h in table.live_handles())


def _wait_until(condition: object) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.001)


# --- the flag the raw-op wrapper reads ------------------------------------------


def test_flag_is_set_only_inside_as_default() -> None:
    # in a fresh process: other tests may have left a graph default on purpose
    code = """
import tf_accum as tfa, tf_accum.compat.v1 as tf
from tf_accum.graph import mode
raw = tfa.raw_ops
assert not mode.graph_mode_used
graph = tf.Graph()
with graph.as_default():
    assert mode.graph_mode_used
    with graph.as_default():
        built = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
    assert mode.graph_mode_used  # the outer block is still open
assert isinstance(built, tf.Tensor)
assert not mode.graph_mode_used
handle = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
assert isinstance(handle, int)  # eager again: acts at once
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


def test_another_threads_graph_leaves_this_thread_eager() -> None:
    inside, leave = threading.Event(), threading.Event()

    def builder() -> None:
        with tf.Graph().as_default():
            inside.set()
            leave.wait(WAIT)

    before = mode.graph_mode_used
    thread = threading.Thread(target=builder, daemon=True)
    thread.start()
    assert inside.wait(WAIT)
    try:
        assert mode.graph_mode_used
        assert tf.executing_eagerly()
        handle = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
        assert isinstance(handle, int)
        raw.DestroyResourceOp(resource=handle)
    finally:
        leave.set()
        thread.join(WAIT)
    assert mode.graph_mode_used == before


def test_flag_follows_disable_and_enable_eager_execution() -> None:
    before = mode.graph_mode_used
    try:
        tf.disable_eager_execution()
        assert mode.graph_mode_used and not tf.executing_eagerly()
        with tf.Graph().as_default():
            pass
        assert mode.graph_mode_used  # leaving a graph does not turn eager back on
    finally:
        tf.enable_eager_execution()
    assert mode.graph_mode_used == before and tf.executing_eagerly()


# --- runs with one take ------------------------------------------------------------


@pytest.fixture
def dense() -> tuple[tf.Graph, tf.ConditionalAccumulator, tf.Tensor]:
    graph = tf.Graph()
    with graph.as_default():
        acc = tf.ConditionalAccumulator(tf.float32, shape=[2])
        grad = tf.placeholder(tf.float32, shape=[2], name="grad")
    return graph, acc, grad


def test_take_fetched_with_the_applies_it_waits_for(dense) -> None:
    graph, acc, grad = dense
    with graph.as_default():
        first = acc.apply_grad(grad)
        second = acc.apply_grad(tf.constant([3.0, 5.0]))
        take = acc.take_grad(2)
    with tf.Session(graph=graph) as sess:
        got = sess.run([take, first, second], feed_dict={grad: [1.0, 1.0]})
        assert got[1:] == [None, None]
        np.testing.assert_array_equal(got[0], np.array([2.0, 3.0], np.float32))
        assert got[0].dtype == np.float32


def test_ops_of_a_run_with_one_take_run_before_it_unless_they_depend_on_it(dense) -> None:
    graph, acc, grad = dense
    with graph.as_default():
        apply = acc.apply_grad(grad)
        take = acc.take_grad(1)
        count_beside = acc.num_accumulated()
        with tf.control_dependencies([take]):
            count_after = acc.num_accumulated()
    with tf.Session(graph=graph) as sess:
        for value in ([1.0, 2.0], [3.0, 4.0]):
            apply.run(feed_dict={grad: value}, session=sess)
        taken, beside, after = sess.run([take, count_beside, count_after])
        np.testing.assert_array_equal(taken, [2.0, 3.0])
        assert (beside, after) == (2, 0)
        assert isinstance(after, np.int32)


def test_lone_take_times_out_and_consumes_nothing(dense) -> None:
    graph, acc, grad = dense
    with graph.as_default():
        apply = acc.apply_grad(grad)
        take = acc.take_grad(2)
    with tf.Session(graph=graph) as sess:
        sess.run(apply, feed_dict={grad: [4.0, 4.0]})
        with pytest.raises(tf.errors.DeadlineExceededError, match="Timed out waiting"):
            sess.run(take, options=tf.RunOptions(timeout_in_ms=30))
        sess.run(apply, feed_dict={grad: [2.0, 0.0]})
        np.testing.assert_array_equal(sess.run(take), [3.0, 2.0])


def test_close_cancels_a_lone_take_waiting_in_another_thread(dense) -> None:
    graph, acc, _ = dense
    with graph.as_default():
        take = acc.take_grad(1)
    sess = tf.Session(graph=graph)
    waiting = Background(sess.run, take)
    _wait_until(lambda: _waiting_takes(sess) == 1)
    sess.close()
    with pytest.raises(tf.errors.CancelledError, match="TakeGrad operation was cancelled"):
        waiting.result()


def test_two_takes_in_one_run_wait_on_threads_of_their_own() -> None:
    graph = tf.Graph()
    with graph.as_default():
        a = tf.ConditionalAccumulator(tf.float32, shape=[1])
        b = tf.ConditionalAccumulator(tf.float64, shape=[1])
        fetches = {
            "a": a.take_grad(1),
            "b": b.take_grad(1),
            "applies": [a.apply_grad([1.5]), b.apply_grad([2.5])],
        }
    with tf.Session(graph=graph) as sess:
        got = sess.run(fetches)
    assert got["applies"] == [None, None]
    assert got["a"].dtype == np.float32 and got["b"].dtype == np.float64
    np.testing.assert_array_equal(got["a"], [1.5])
    np.testing.assert_array_equal(got["b"], [2.5])


# --- single fetches and Tensor feed keys --------------------------------------------


def test_single_fetches_give_what_the_structured_ones_give() -> None:
    graph = tf.Graph()
    with graph.as_default():
        scalar = tf.constant(3, tf.int64)
        vector = tf.constant([1.0, 2.0])
        nothing = tf.no_op()
    with tf.Session(graph=graph) as sess:
        assert sess.run(nothing) is None
        value = sess.run(scalar)
        assert type(value) is np.int64 and value == 3
        assert type(sess.run([scalar])[0]) is np.int64
        mine = sess.run(vector)
        mine[0] = 9.0  # a run hands out arrays the caller owns
        np.testing.assert_array_equal(sess.run(vector), [1.0, 2.0])
    with tf.Graph().as_default():
        stranger = tf.constant(1.0)
    with tf.Session(graph=graph) as sess, pytest.raises(ValueError, match="not an element"):
        sess.run(stranger)


def test_tensor_feed_keys_are_checked_as_named_ones() -> None:
    graph = tf.Graph()
    with graph.as_default():
        rows = tf.placeholder(tf.float32, shape=[None, 2], name="rows")
        doubled = rows + rows
    with tf.Graph().as_default():
        stranger = tf.placeholder(tf.float32, shape=[None, 2])
    with tf.Session(graph=graph) as sess:
        for key in (rows, "rows:0"):
            got = sess.run(doubled, feed_dict={key: np.ones((3, 2))})
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, np.full((3, 2), 2.0, np.float32))
        with pytest.raises(ValueError, match=r"Cannot feed value of shape \(3, 3\) for Tensor"):
            sess.run(doubled, feed_dict={rows: np.ones((3, 3))})
        with pytest.raises(TypeError, match="Cannot interpret feed_dict key as Tensor"):
            sess.run(doubled, feed_dict={stranger: np.ones((1, 2))})


# --- TensorFlow's fetch errors, and fed tensors fetched --------------------------------


@pytest.fixture
def small() -> tuple[tf.Graph, tf.Tensor, tf.Tensor]:
    graph = tf.Graph()
    with graph.as_default():
        const = tf.constant(2.0, name="Const")
        scalar = tf.placeholder(tf.int64, shape=[], name="scalar")
    return graph, const, scalar


def test_fetches_that_are_not_elements_are_tensorflows_errors(small) -> None:
    graph, const, _ = small
    with tf.Graph().as_default():
        stranger = tf.constant(1.0, name="c")
    with tf.Session(graph=graph) as sess:
        with pytest.raises(TypeError) as none:
            sess.run({"a": None})
        assert (
            str(none.value) == 'Argument `fetch` = None has invalid type "NoneType". Cannot be None'
        )
        with pytest.raises(TypeError) as number:
            sess.run([const, 1.5])
        assert str(number.value) == (
            'Argument `fetch` = 1.5 has invalid type "float" must be a string or Tensor. '
            "(Can not convert a float into a Tensor or Operation.)"
        )
        with pytest.raises(ValueError) as missing:
            sess.run("Const:3")
        assert str(missing.value) == (
            'Argument `fetch` = Const:3 cannot be interpreted as a Tensor. ("The name '
            "'Const:3' refers to a Tensor which does not exist. The operation, 'Const', exists "
            'but only has 1 outputs.")'
        )
        with pytest.raises(ValueError, match=r"^Argument `fetch` = nope cannot be interpreted"):
            sess.run("nope")
        with pytest.raises(ValueError) as foreign:
            sess.run([const, stranger])
        shown = 'Tensor("c:0", shape=(), dtype=float32)'
        assert str(foreign.value) == (
            f"Argument `fetch` = {shown} cannot be interpreted as a Tensor. (Tensor {shown} is "
            "not an element of this graph.)"
        )
        with pytest.raises(TypeError) as feed:
            sess.run(const, feed_dict={stranger: 1.0})
        assert str(feed.value) == (
            f"Cannot interpret feed_dict key as Tensor: Tensor {shown} is not an element of this "
            "graph."
        )


def test_a_fed_tensor_fetches_as_the_value_fed(small) -> None:
    graph, const, scalar = small
    with graph.as_default():
        vector = tf.placeholder(tf.float32, shape=[2])
    frozen = np.ones(2, np.float32)
    frozen.setflags(write=False)
    with tf.Session(graph=graph) as sess:
        got = sess.run(scalar, feed_dict={scalar: 3})
        assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.int64
        assert got == 3
        assert type(sess.run(const)) is np.float32  # computed scalars stay numpy scalars
        assert sess.run([vector], feed_dict={vector: frozen})[0] is frozen
        fed_const = sess.run(const, feed_dict={const: 5})
        assert fed_const.dtype == np.float32 and fed_const == 5.0


def test_a_value_passed_through_comes_back_as_a_new_array() -> None:
    graph = tf.Graph()
    with graph.as_default():
        vector = tf.placeholder(tf.float32, shape=[2])
        passed = tf.identity(vector)
        defaulted = tf.placeholder_with_default(vector, shape=[2])
    given = np.array([1.0, 2.0], np.float32)
    with tf.Session(graph=graph) as sess:
        got = sess.run([passed, defaulted, vector], feed_dict={vector: given})
    assert got[2] is given
    for value in got[:2]:
        assert value is not given and value.flags.writeable
        value[0] = 7.0
    np.testing.assert_array_equal(given, [1.0, 2.0])


def test_unfed_placeholder_names_its_shape_only_when_it_has_dimensions() -> None:
    graph = tf.Graph()
    with graph.as_default():
        shapes = {"s": [], "v": [2], "m": [None, 3], "u": None}
        holders = {k: tf.placeholder(tf.float32, shape=s, name=k) for k, s in shapes.items()}
    expected = {
        "s": "You must feed a value for placeholder tensor 's' with dtype float",
        "v": "You must feed a value for placeholder tensor 'v' with dtype float and shape [2]",
        "m": "You must feed a value for placeholder tensor 'm' with dtype float and shape [?,3]",
        "u": "You must feed a value for placeholder tensor 'u' with dtype float",
    }
    with tf.Session(graph=graph) as sess:
        for key, holder in holders.items():
            with pytest.raises(tf.errors.InvalidArgumentError) as unfed:
                sess.run(holder)
            assert unfed.value.message == expected[key]
