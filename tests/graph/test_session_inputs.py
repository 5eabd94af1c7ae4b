"""Session inputs TensorFlow 2.21 refuses, and IndexedSlices fetches (issue 26)."""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.helpers import Background
from tf_accum.graph.fetches import IndexedSlicesValue

pytestmark = pytest.mark.usefixtures("graph")


def _incompatible(value: int, kind: str) -> str:
    return (
        rf"^Type of feed value {value} with type <class 'int'> is not compatible with Tensor "
        rf"type <class 'numpy\.{kind}_?'>\. Try explicitly setting the type of the feed tensor to "
        r"a larger type \(e\.g\. int64\)\.$"
    )


def test_python_ints_the_fed_dtype_cannot_hold() -> None:
    p32 = tf.placeholder(tf.int32)
    pu8 = tf.placeholder(tf.uint8)
    pi64 = tf.placeholder(tf.int64)
    pb = tf.placeholder(tf.bool)
    with tf.Session() as sess:
        for tensor, value, kind in [
            (p32, 2**40, "int32"),
            (pu8, -1, "uint8"),
            (pu8, 256, "uint8"),
            (pi64, 2**63, "int64"),
            (pb, 2, "bool"),
        ]:
            with pytest.raises(TypeError, match=_incompatible(value, kind)):
                sess.run(tensor, {tensor: value})
        with pytest.raises(OverflowError, match="Python int too large to convert to C long"):
            sess.run(pi64, {pi64: 2**64})
        # as TensorFlow: what fits is fed; lists and numpy values wrap around
        fed_bool = sess.run(pb, {pb: 1})  # a fed value fetches as the array fed, as TensorFlow
        assert fed_bool.dtype == np.bool_ and fed_bool.tolist() is True
        assert sess.run(pu8, {pu8: 255}) == 255
        assert sess.run(p32, {p32: [1, 2**40]}).tolist() == [1, 0]
        assert sess.run(p32, {p32: np.int64(2**40)}) == 0
        assert sess.run(p32, {p32: 2.5}) == 2


def test_python_ints_into_floats_round() -> None:
    pf = tf.placeholder(tf.float32)
    with tf.Session() as sess:
        got = sess.run(pf, {pf: 2**25 + 1})
        assert got.dtype == np.float32 and got == 2**25


def test_feed_dict_must_be_a_mapping() -> None:
    p = tf.placeholder(tf.int32, name="p")
    with tf.Session() as sess:
        for given in ([(p, 1)], ((p, 1),), 5, {p}):
            with pytest.raises(
                TypeError,
                match=rf"^FlattenDictItems: 'dict' must be a dictionary or collection\.Mapping "
                rf"type object, instead of '{type(given).__name__}'\.$",
            ):
                sess.run(p, given)
        with pytest.raises(tf.errors.InvalidArgumentError, match="You must feed a value"):
            sess.run(p, [])  # empty: nothing fed, as in TensorFlow


def test_session_graph_must_be_a_graph() -> None:
    for graph in (5, "x"):
        with pytest.raises(
            TypeError,
            match=rf'^Argument `graph` must be a tf\.Graph, but got "{type(graph).__name__}"$',
        ):
            tf.Session(graph=graph)  # type: ignore[arg-type]


def test_placeholder_dimensions_beyond_int64() -> None:
    for shape, shown in (([2**63], 2**63), (2**63, 2**63), ([2, 2**64], 2**64)):
        dims = [2, 2**64] if shown == 2**64 else [2**63]
        with pytest.raises(
            TypeError,
            match=rf"^Error converting \[{', '.join(map(str, dims))}\] \(arg name = shape\) to a "
            rf"TensorShape: Value out of range: {shown}$",
        ):
            tf.placeholder(tf.float32, shape=shape)
    assert tf.placeholder(tf.float32, shape=[2**63 - 1]).shape == (2**63 - 1,)
    with pytest.raises(TypeError, match=r"^Error converting \[9223372036854775808\] \(arg name"):
        tf.placeholder_with_default([1.0], shape=[2**63])


@pytest.mark.parametrize("make", ["placeholder", "placeholder_with_default"])
def test_placeholder_shapes_are_refused_as_the_op_builder_refuses_them(make: str) -> None:
    # TensorFlow 2.21's messages: the shape's own error behind the op builder's prefix
    def build(shape: Any) -> Any:
        if make == "placeholder":
            return tf.placeholder(tf.float32, shape=shape)
        return tf.placeholder_with_default([1.0], shape=shape)

    prefix = "^Error converting shape to a TensorShape: "
    for shape, dim in (([-2], -2), ([None, -5], -5), ([np.int64(-3)], -3)):
        with pytest.raises(ValueError, match=rf"{prefix}Dimension {dim} must be >= 0\.$"):
            build(shape)
    for shape, shown in (([2.5], "'2.5' with type '<class 'float'>'"), ([[2]], "'[2]' with type")):
        with pytest.raises(
            TypeError,
            match=rf"{prefix}Dimension value must be integer or None or have an __index__ "
            rf"method, got value {re.escape(shown)}",
        ):
            build(shape)


def test_indexed_slices_fetch_to_indexed_slices_value() -> None:
    sl = tf.IndexedSlices(tf.constant([[1.0, 2.0]]), tf.constant([1]), tf.constant([3, 2]))
    no_shape = tf.IndexedSlices(tf.constant([[1.0, 2.0]]), tf.constant([1]))
    with tf.Session() as sess:
        got = sess.run(sl)
        assert type(got) is IndexedSlicesValue and got._fields == (
            "values",
            "indices",
            "dense_shape",
        )
        assert got.values.dtype == np.float32 and got.values.tolist() == [[1, 2]]
        assert got.indices.dtype == np.int32 and got.indices.tolist() == [1]
        assert got.dense_shape.tolist() == [3, 2]
        assert sess.run(no_shape).dense_shape is None
        nested = sess.run([sl, {"a": sl}])
        assert type(nested[0]) is IndexedSlicesValue and type(nested[1]["a"]) is IndexedSlicesValue


def test_a_sparse_take_fetches_as_indexed_slices_value() -> None:
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[3, 2])
    apply = acc.apply_grad([0], [[1.0, 1.0]], [3, 2], local_step=0)
    taken = acc.take_indexed_slices_grad(1)
    with tf.Session() as sess:
        sess.run(apply)
        got = sess.run(taken)
        assert type(got) is IndexedSlicesValue
        assert got.indices.dtype == np.int64 and got.indices.tolist() == [0]
        assert got.values.tolist() == [[1, 1]] and got.dense_shape.tolist() == [3, 2]


def test_interactive_session_closed_on_another_thread() -> None:
    # TensorFlow 2.21: the session closes, and stays the default session (its
    # graph the default graph) of the thread that made it
    g = tf.Graph()
    sess = tf.InteractiveSession(graph=g)
    try:
        assert tf.get_default_session() is sess and tf.get_default_graph() is g
        Background(sess.close).result()
        assert tf.get_default_session() is sess and tf.get_default_graph() is g
        with pytest.raises(RuntimeError, match="Attempted to use a closed Session"):
            tf.constant(2.0).eval()
    finally:
        sess.close()  # on this thread: it stops being the default
    assert tf.get_default_session() is None and tf.get_default_graph() is not g


def test_interactive_session_closed_on_its_own_thread_elsewhere() -> None:
    done = threading.Event()
    seen: list[object] = []

    def own() -> None:
        with contextlib.ExitStack():
            sess = tf.InteractiveSession(graph=tf.Graph())
            sess.close()
            seen.append(tf.get_default_session())
            done.set()

    Background(own).result()
    assert done.is_set() and seen == [None]
