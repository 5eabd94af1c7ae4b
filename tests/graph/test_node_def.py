"""``Operation.node_def`` and ``Graph.as_graph_def()`` give what TensorFlow 2.21 gives.

The expected texts are what TensorFlow printed for the same graphs (its own
kernel tests compare ``node_def`` with such text through
``assertProtoEquals``, which parses the text into the message's own class:
done here the same way).
"""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import text_format

import tf_accum.compat.v1 as tf

pytestmark = pytest.mark.usefixtures("graph")

_ACCUMULATOR_ATTRS = """
    attr { key: 'container' value { s: '' } }
    attr { key: 'shared_name' value { s: '' } }
    attr { key: 'reduction_type' value { s: 'MEAN' } }
    attr { key: 'dtype' value { type: DT_FLOAT } }
"""


def assert_proto_equals(text: str, message: Any) -> None:
    expected = text_format.Parse(text, type(message)())
    assert message == expected, f"{message}\n!=\n{expected}"


def test_an_accumulators_node_def_is_tensorflows() -> None:
    q = tf.ConditionalAccumulator(tf.float32, name="Q")
    assert_proto_equals(
        "name: 'Q' op: 'ResourceConditionalAccumulator'"
        " attr { key: 'shape' value { shape { unknown_rank: true } } }" + _ACCUMULATOR_ATTRS,
        q.accumulator_ref.op.node_def,
    )
    shaped = tf.ConditionalAccumulator(tf.float32, name="Q", shape=(1, 5, 2, 8))
    assert_proto_equals(
        "name: 'Q_1' op: 'ResourceConditionalAccumulator' attr { key: 'shape' value { shape {"
        " dim { size: 1 } dim { size: 5 } dim { size: 2 } dim { size: 8 } } } }"
        + _ACCUMULATOR_ATTRS,
        shaped.accumulator_ref.op.node_def,
    )
    sparse = tf.SparseConditionalAccumulator(tf.float32, name="S", shape=[None, 2])
    assert_proto_equals(
        "name: 'S' op: 'SparseConditionalAccumulator' attr { key: 'shape' value { shape {"
        " dim { size: -1 } dim { size: 2 } } } }" + _ACCUMULATOR_ATTRS,
        sparse.accumulator_ref.op.node_def,
    )


def test_inputs_name_outputs_and_control_inputs_as_tensorflow_does() -> None:
    q = tf.ConditionalAccumulator(tf.float32, name="Q", shape=[2])
    x = tf.placeholder(tf.float32, [2], name="x")
    ready = tf.no_op(name="ready")
    with tf.control_dependencies([q.accumulator_ref.op, ready]):
        apply = q.apply_grad(x, local_step=3)
    node = apply.node_def
    # the dtype is inferred from the gradient; a control input that is also a
    # data input (the handle) is not repeated
    assert (node.name, node.op) == ("ResourceAccumulatorApplyGradient", apply.type)
    assert list(node.input)[0] == "Q" and list(node.input)[2:] == ["x", "^ready"]
    assert node.attr["dtype"].type == 1  # DT_FLOAT
    sparse = tf.SparseConditionalAccumulator(tf.float32, name="S", shape=[3])
    taken: Any = sparse.take_grad(1)
    values = tf.identity(taken.values, name="values")
    assert list(values.op.node_def.input) == [f"{taken.values.op.name}:1"]


def test_a_constant_and_a_device_are_in_the_node() -> None:
    with tf.device("/job:ps/task:0"):
        c = tf.constant([1.5, 2.0], name="c")
    assert_proto_equals(
        "name: 'c' op: 'Const' device: '/job:ps/task:0'"
        " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } }"
        r" tensor_content: '\000\000\300?\000\000\000@' } } }"
        " attr { key: 'dtype' value { type: DT_FLOAT } }",
        c.op.node_def,
    )


def test_a_queues_nodes_are_tensorflows() -> None:
    q = tf.FIFOQueue(3, [tf.float32, tf.int32], shapes=[[2], []])
    assert_proto_equals(
        "name: 'fifo_queue' op: 'FIFOQueueV2'"
        " attr { key: 'component_types' value { list { type: DT_FLOAT type: DT_INT32 } } }"
        " attr { key: 'shapes' value { list { shape { dim { size: 2 } } shape { } } } }"
        " attr { key: 'capacity' value { i: 3 } }"
        " attr { key: 'container' value { s: '' } }"
        " attr { key: 'shared_name' value { s: '' } }",
        q.queue_ref.op.node_def,
    )
    x = tf.placeholder(tf.float32, [2], name="x")
    y = tf.placeholder(tf.int32, [], name="y")
    assert_proto_equals(
        "name: 'fifo_queue_enqueue' op: 'QueueEnqueueV2'"
        " input: 'fifo_queue' input: 'x' input: 'y'"
        " attr { key: 'Tcomponents' value { list { type: DT_FLOAT type: DT_INT32 } } }"
        " attr { key: 'timeout_ms' value { i: -1 } }",
        q.enqueue((x, y)).node_def,
    )


def test_the_graph_def_lists_every_node_in_order(graph: tf.Graph) -> None:
    a = tf.constant(1.0, name="a")
    b = tf.add(a, a, name="b")
    nodes = graph.as_graph_def().node
    assert [(n.name, n.op, list(n.input)) for n in nodes] == [
        ("a", "Const", []),
        ("b", b.op.type, ["a", "a"]),
    ]
    assert nodes[1].attr["T"].type == 1


@pytest.mark.parametrize(
    ("shape", "text"),
    [
        (None, "shape { unknown_rank: true }"),
        (tf.TensorShape([1, 5, 2, 8]), "shape { dim { size: 1 } dim { size: 5 } dim { size: 2 } "),
    ],
)
def test_what_tensorflows_sparse_accumulator_kernel_tests_compare(shape: Any, text: str) -> None:
    # the constructor checks of TensorFlow's own sparse accumulator tests
    q = tf.SparseConditionalAccumulator(tf.float32, name="Q", shape=shape)
    shape_text = text if shape is None else text + "dim { size: 8 } }"
    assert_proto_equals(
        "name: 'Q' op: 'SparseConditionalAccumulator'"
        f" attr {{ key: 'shape' value {{ {shape_text} }} }}" + _ACCUMULATOR_ATTRS,
        q.accumulator_ref.op.node_def,
    )
