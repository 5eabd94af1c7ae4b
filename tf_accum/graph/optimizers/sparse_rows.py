"""Summing the rows of a sparse gradient that name the same index, before a sparse update.

TensorFlow's sparse training ops update a row named twice twice; an optimizer
wants one update by the sum, so it sums first: the unique indices in the order
they first appear (``Unique``), and per unique index the sum of its rows
(``UnsortedSegmentSum``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum.dtypes import as_dtype
from tf_accum.graph import mode
from tf_accum.graph.ops import graph_input
from tf_accum.graph.tensor_shape import TensorShape

Array = np.ndarray[Any, Any]


def unique_positions(indices: Array) -> tuple[Array, Array]:
    """(the unique indices in order of first appearance, each position's place among them)."""
    flat = np.asarray(indices).reshape(-1)
    unique, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return unique[order].astype(flat.dtype), rank[inverse.reshape(-1)].astype(np.int32)


def segment_sums(values: Array, positions: Array, count: int) -> Array:
    """Per segment ``0..count-1``, the sum of the rows of ``values`` at its positions."""
    found = np.zeros((count, *values.shape[1:]), values.dtype)
    np.add.at(found, positions, values)
    return found


def summed_rows(values: Any, indices: Any) -> tuple[Any, Any]:
    """(rows summed per index, the unique indices): tensors in graph mode, arrays eagerly."""
    graph = mode.building_graph()
    if graph is None:
        array = np.asarray(values)
        unique, positions = unique_positions(np.asarray(indices))
        return segment_sums(array, positions, unique.size), unique
    given = graph_input(graph, values)
    index = graph_input(graph, indices)
    unique_op = graph.create_op(
        "Unique",
        [index],
        [(index.dtype, TensorShape([None])), (as_dtype("int32"), index.shape)],
        lambda context, inputs: unique_positions(inputs[0]),
        name="Unique",
        attrs={"T": index.dtype, "out_idx": as_dtype("int32")},
    )
    unique_tensor, position_tensor = unique_op.outputs
    tail = given.shape.as_list() if given.shape.rank is not None else None
    rows = TensorShape(None if tail is None else [None, *tail[1:]])
    sum_op = graph.create_op(
        "UnsortedSegmentSum",
        [given, position_tensor, unique_tensor],
        [(given.dtype, rows)],
        lambda context, inputs: (
            segment_sums(np.asarray(inputs[0]), inputs[1], int(np.asarray(inputs[2]).size)),
        ),
        name="UnsortedSegmentSum",
        attrs={"T": given.dtype, "Tindices": as_dtype("int32")},
    )
    return sum_op.outputs[0], unique_tensor


__all__ = ["segment_sums", "summed_rows", "unique_positions"]
