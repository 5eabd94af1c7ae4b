"""Gradient functions by op type: ``tf.RegisterGradient`` and ``tf.no_gradient``.

A gradient function takes the forward ``Operation`` and one gradient per
output (``None`` where no gradient flows into that output) and returns one
gradient per input of the op: a ``Tensor``, an ``IndexedSlices`` of tensors,
or ``None`` for an input that gets no gradient. ``tf.gradients`` looks the
function up by ``op.type`` when it walks the graph backwards.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tf_accum.graph.graph import Operation

GradientFunction = Callable[..., Any]

_lock = threading.Lock()
_functions: dict[str, GradientFunction | None] = {}


class RegisterGradient:
    """Decorator: ``@RegisterGradient("MatMul")`` registers a gradient function.

    Raises:
        TypeError: the op type is not a string.
        KeyError: the op type already has a gradient function (or is marked as
            having none).
    """

    def __init__(self, op_type: str) -> None:
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._op_type = op_type

    def __call__(self, function: GradientFunction) -> GradientFunction:
        _register(self._op_type, function)
        return function


def no_gradient(op_type: str) -> None:
    """Mark ``op_type`` as having no gradient: its inputs get ``None``.

    Raises:
        TypeError: the op type is not a string.
        KeyError: the op type is already registered.
    """
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")
    _register(op_type, None)


NoGradient = no_gradient
NotDifferentiable = no_gradient


def _register(op_type: str, function: GradientFunction | None) -> None:
    with _lock:
        if op_type in _functions:
            raise KeyError(f"Registering two gradient with name '{op_type}'!")
        _functions[op_type] = function


def is_registered(op_type: str) -> bool:
    """Whether ``op_type`` has a gradient function or is marked as having none."""
    return op_type in _functions


def get_gradient_function(op: Operation) -> GradientFunction | None:
    """The gradient function of ``op``'s type; ``None`` for a type marked as having none.

    Raises:
        LookupError: the type was never registered (TensorFlow's message).
    """
    op_type = op.get_attr("_gradient_op_type") if _has_override(op) else op.type
    try:
        return _functions[op_type]
    except KeyError:
        raise LookupError(
            f"No gradient defined for operation '{op.name}' (op type: {op.type})"
        ) from None


def _has_override(op: Operation) -> bool:
    try:
        op.get_attr("_gradient_op_type")
    except (KeyError, ValueError):
        return False
    return True
