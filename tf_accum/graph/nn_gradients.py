"""Gradient functions of ``tf.nn``'s ops, registered by op type.

Each builds the gradient as TensorFlow's does, from the forward op's inputs
and outputs: ``Relu`` through ``ReluGrad`` of its output, ``Sigmoid`` and
``Tanh`` through ``SigmoidGrad``/``TanhGrad`` of theirs, ``BiasAdd`` through
``BiasAddGrad``, and the cross entropies through the backprop their op
computed beside the loss (its second output).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum.graph import nn_ops
from tf_accum.graph.array_ops import expand_dims
from tf_accum.graph.gradient_registry import RegisterGradient, no_gradient
from tf_accum.graph.graph import Operation
from tf_accum.graph.math_ops import building_in, multiply, subtract
from tf_accum.graph.reduce_ops import reduce_sum


def _in_graph_of(op: Operation) -> Any:
    return building_in(op.graph)


@RegisterGradient("Relu")
def _relu_grad(op: Operation, grad: Any) -> list[Any]:
    with _in_graph_of(op):
        return [nn_ops.relu_grad(grad, op.outputs[0])]


@RegisterGradient("ReluGrad")
def _relu_grad_grad(op: Operation, grad: Any) -> list[Any]:
    from tf_accum.graph.fill_ops import zeros_like

    with _in_graph_of(op):
        x = op.inputs[1]
        return [nn_ops.relu_grad(grad, x), zeros_like(x)]


@RegisterGradient("Relu6")
def _relu6_grad(op: Operation, grad: Any) -> list[Any]:
    with _in_graph_of(op):
        return [nn_ops.relu6_grad(grad, op.inputs[0])]


@RegisterGradient("Elu")
def _elu_grad(op: Operation, grad: Any) -> list[Any]:
    with _in_graph_of(op):
        return [nn_ops.elu_grad(grad, op.outputs[0])]


@RegisterGradient("Sigmoid")
def _sigmoid_grad(op: Operation, grad: Any) -> list[Any]:
    with _in_graph_of(op):
        return [nn_ops.sigmoid_grad(op.outputs[0], grad)]


@RegisterGradient("Tanh")
def _tanh_grad(op: Operation, grad: Any) -> list[Any]:
    with _in_graph_of(op):
        return [nn_ops.tanh_grad(op.outputs[0], grad)]


@RegisterGradient("Softmax")
def _softmax_grad(op: Operation, grad: Any) -> list[Any]:
    # d softmax: (grad - sum(grad * softmax)) * softmax, along the last axis
    with _in_graph_of(op):
        probabilities = op.outputs[0]
        inner = reduce_sum(multiply(grad, probabilities), -1, keepdims=True)
        return [multiply(subtract(grad, inner), probabilities)]


@RegisterGradient("LogSoftmax")
def _log_softmax_grad(op: Operation, grad: Any) -> list[Any]:
    from tf_accum.graph.elementwise_ops import exp

    with _in_graph_of(op):
        probabilities = exp(op.outputs[0])
        return [subtract(grad, multiply(reduce_sum(grad, -1, keepdims=True), probabilities))]


@RegisterGradient("BiasAdd")
def _bias_add_grad(op: Operation, grad: Any) -> list[Any]:
    with _in_graph_of(op):
        data_format = op.get_attr("data_format")
        return [grad, nn_ops.bias_add_grad(grad, data_format=data_format)]


@RegisterGradient("BiasAddGrad")
def _bias_add_grad_grad(op: Operation, grad: Any) -> list[Any]:
    # every element of the forward input received its channel's gradient
    from tf_accum.graph.fill_ops import zeros_like

    with _in_graph_of(op):
        source = op.inputs[0]
        if op.get_attr("data_format") == "NCHW" and (source.shape.rank or 0) > 2:
            raise NotImplementedError("the gradient of BiasAddGrad for NCHW data")
        return [nn_ops.bias_add(zeros_like(source), grad)]


@RegisterGradient("SoftmaxCrossEntropyWithLogits")
def _xent_grad(op: Operation, grad_loss: Any, grad_grad: Any) -> list[Any]:
    """The logits get ``grad_loss * backprop``; the labels ``grad_loss * -log_softmax``.

    A gradient flowing into the backprop output (a second derivative) adds
    ``(grad_grad - sum(grad_grad * softmax)) * softmax`` to the logits'.
    """
    with _in_graph_of(op):
        backprop = op.outputs[1]
        logits = op.inputs[0]
        per_row = expand_dims(grad_loss, -1)
        logits_grad = multiply(per_row, backprop)
        if grad_grad is not None and not _is_zeros(grad_grad):
            probabilities = nn_ops.softmax(logits)
            inner = reduce_sum(multiply(grad_grad, probabilities), -1, keepdims=True)
            logits_grad = logits_grad + multiply(subtract(grad_grad, inner), probabilities)
        labels_grad = multiply(per_row, -nn_ops.log_softmax(logits))
        return [logits_grad, labels_grad]


@RegisterGradient("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_xent_grad(op: Operation, grad_loss: Any, grad_grad: Any) -> list[Any]:
    with _in_graph_of(op):
        return [multiply(expand_dims(grad_loss, -1), op.outputs[1]), None]


@RegisterGradient("L2Loss")
def _l2_loss_grad(op: Operation, grad: Any) -> list[Any]:
    with _in_graph_of(op):
        return [multiply(op.inputs[0], grad)]


def _is_zeros(tensor: Any) -> bool:
    """Whether a gradient is a constant of zeros, as tf.gradients fills unused outputs."""
    op = getattr(tensor, "op", None)
    if op is None or op.type not in ("Const", "ZerosLike"):
        return False
    if op.type == "ZerosLike":
        return True
    return not np.any(op.get_attr("value"))


def _unbroadcast(grad: Any, source: Any) -> Any:
    """``grad`` summed over the axes along which ``source`` was broadcast,
    found from the static shapes.

    Raises:
        NotImplementedError: shapes not known when the graph is built.
    """
    have, want = grad.shape, source.shape
    if have.rank is None or want.rank is None:
        raise NotImplementedError("the gradient of a broadcast of shapes unknown when built")
    dims, wanted = have.as_list(), want.as_list()
    lead = len(dims) - len(wanted)
    ones = [lead + i for i, d in enumerate(wanted) if d == 1 and dims[lead + i] != 1]
    unknown = [d for d in wanted if d is None]
    if unknown and (lead or any(dims[lead + i] is None for i in range(len(wanted)))):
        raise NotImplementedError("the gradient of a broadcast of shapes unknown when built")
    if ones:
        grad = reduce_sum(grad, ones, keepdims=True)
    if lead:
        grad = reduce_sum(grad, list(range(lead)))
    return grad


def _register_unless_registered(op_type: str, function: Any) -> None:
    # these math ops may get their gradients from the core math module too
    from tf_accum.graph.gradient_registry import is_registered

    if not is_registered(op_type):
        RegisterGradient(op_type)(function)


def _squared_difference_grad(op: Operation, grad: Any) -> list[Any]:
    x, y = op.inputs
    with _in_graph_of(op):
        x_grad = multiply(grad * 2.0, subtract(x, y))
        return [_unbroadcast(x_grad, x), _unbroadcast(-x_grad, y)]


def _div_no_nan_grad(op: Operation, grad: Any) -> list[Any]:
    from tf_accum.graph.elementwise_ops import div_no_nan

    x, y = op.inputs
    with _in_graph_of(op):
        x_grad = div_no_nan(grad, y)
        y_grad = multiply(grad, div_no_nan(div_no_nan(-x, y), y))
        return [_unbroadcast(x_grad, x), _unbroadcast(y_grad, y)]


_register_unless_registered("SquaredDifference", _squared_difference_grad)
_register_unless_registered("DivNoNan", _div_no_nan_grad)
no_gradient("InTopKV2")
