"""The gradients of ``pad``, ``reverse`` and ``cumsum``, registered by op type at import."""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum.graph.array_ops import reshape, shape, slice
from tf_accum.graph.gradient_registry import RegisterGradient, no_gradient
from tf_accum.graph.graph import Operation
from tf_accum.graph.indexing import strided_slice
from tf_accum.graph.op_building import constant_value
from tf_accum.graph.padding_ops import cumsum, mirror_pad_grad, reverse


def _unpadded(op: Operation, grad: Any) -> Any:
    """The block of ``grad`` where the padded tensor's input sits."""
    source, paddings = op.inputs[0], op.inputs[1]
    known = constant_value(paddings)
    if known is not None:
        begin: Any = [int(a) for a in np.asarray(known).reshape(-1, 2)[:, 0]]
    else:
        column = strided_slice(paddings, [0, 0], [0, 1], [1, 1], end_mask=1)
        begin = reshape(column, [-1])
    if source.shape.is_fully_defined():
        size: Any = [int(d) for d in source.shape.as_list()]  # type: ignore[arg-type]
    else:
        size = shape(source)
    return slice(grad, begin, size)


@RegisterGradient("Pad")
def _pad_grad(op: Operation, grad: Any) -> list[Any]:
    return [_unpadded(op, grad), None]


@RegisterGradient("PadV2")
def _pad_v2_grad(op: Operation, grad: Any) -> list[Any]:
    return [_unpadded(op, grad), None, None]


@RegisterGradient("MirrorPad")
def _mirror_pad_grad(op: Operation, grad: Any) -> list[Any]:
    found = mirror_pad_grad(grad, op.inputs[1], op.get_attr("mode"))
    found.set_shape(op.inputs[0].shape)
    return [found, None]


@RegisterGradient("ReverseV2")
def _reverse_grad(op: Operation, grad: Any) -> list[Any]:
    return [reverse(grad, op.inputs[1]), None]


@RegisterGradient("Cumsum")
def _cumsum_grad(op: Operation, grad: Any) -> list[Any]:
    exclusive, backwards = op.get_attr("exclusive"), op.get_attr("reverse")
    return [cumsum(grad, op.inputs[1], exclusive=exclusive, reverse=not backwards), None]


no_gradient("MirrorPadGrad")
