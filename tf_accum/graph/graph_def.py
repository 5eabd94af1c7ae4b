"""A Graph as a ``GraphDef`` message: its ops' names, types, inputs and devices.

What TensorBoard's graph view draws. The ops' attributes and kernels are not
in it (tf_accum's kernels are Python functions), so TensorFlow cannot import
it as a graph to run (docs/departures.md T25).
"""

from __future__ import annotations

from tf_accum.graph.graph import Graph, Tensor
from tf_accum.graph.proto_messages import message_class

# the GraphDef version TensorFlow 2.21 writes
GRAPH_DEF_PRODUCER = 1994


def _input_name(tensor: Tensor) -> str:
    # as TensorFlow writes inputs: an op's first output by the op's name alone
    return tensor.op.name if tensor.value_index == 0 else tensor.name


def graph_def_bytes(graph: Graph) -> bytes:
    """``graph`` as a serialized GraphDef (nodes in the order they were built)."""
    definition = message_class("GraphDef")()
    definition.versions.producer = GRAPH_DEF_PRODUCER
    for op in graph.get_operations():
        inputs = [_input_name(t) for t in op.inputs]
        inputs += [f"^{control.name}" for control in op.control_inputs]
        definition.node.add(name=op.name, op=op.type, input=inputs, device=op.device)
    data: bytes = definition.SerializeToString()
    return data


__all__ = ["graph_def_bytes"]
