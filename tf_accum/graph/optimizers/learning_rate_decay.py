"""Learning-rate schedules of a global step: ``exponential_decay``, ``piecewise_constant``,
``polynomial_decay``.

In graph mode each returns a scalar Tensor (one op) whose value follows the
global step each time a session runs it; give it to an optimizer as its
learning rate. Eagerly each returns a function of no arguments giving the
value now, as TensorFlow's do. The arithmetic is TensorFlow's, in the
learning rate's dtype (float32 for a Python float).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tf_accum.dtypes import DType, as_dtype, int32, int64
from tf_accum.graph import mode
from tf_accum.graph.graph import Graph, Tensor, is_symbolic
from tf_accum.graph.ops import as_tensor, constant, infer_array
from tf_accum.graph.tensor_shape import TensorShape

Array = np.ndarray[Any, Any]


def _scalar(graph: Graph, value: Any, name: str, dtype: Any = None) -> Tensor:
    if is_symbolic(value):
        return as_tensor(value)
    made: Tensor = constant(value, dtype, name=name)
    return made


def _schedule(
    op_type: str,
    name: str | None,
    inputs: Sequence[Any],
    output: DType | None,
    compute: Callable[..., Array],
) -> Any:
    """One op of type ``op_type`` computing ``compute(*input values)``; eagerly, a
    function of no arguments that computes it from the inputs' values now."""
    graph = mode.building_graph()
    if graph is None:

        def value_now() -> Array:
            return compute(*(_eager_value(v) for v in inputs))

        return value_now
    with graph.name_scope(name or op_type) as scope:
        tensors = [_scalar(graph, v, f"input_{i}") for i, v in enumerate(inputs)]
        dtype = output or tensors[0].dtype
        op = graph.create_op(
            op_type,
            tensors,
            [(dtype, TensorShape([]))],
            lambda context, values: (compute(*(np.asarray(v) for v in values)),),
            name=scope,  # ends in "/": the schedule's op takes the scope's name
        )
    return op.outputs[0]


def _eager_value(value: Any) -> Array:
    numpy_value = getattr(value, "numpy", None)
    if callable(numpy_value):
        return np.asarray(numpy_value())
    return infer_array(value)


def _require_step(global_step: Any, function: str) -> None:
    if global_step is None:
        raise ValueError(f"global_step is required for {function}.")


def _float_kind(value: Any) -> np.dtype[Any]:
    """The dtype a learning rate computes in: its own, float32 for Python numbers."""
    if is_symbolic(value):
        return as_tensor(value).dtype.numpy_dtype
    array = np.asarray(getattr(value, "numpy", lambda: value)())
    if isinstance(value, (np.ndarray, np.generic)) or hasattr(value, "numpy"):
        return array.dtype
    return np.dtype(np.float32)


def exponential_decay(
    learning_rate: Any,
    global_step: Any,
    decay_steps: Any,
    decay_rate: Any,
    staircase: bool = False,
    name: str | None = None,
) -> Any:
    """``learning_rate * decay_rate ** (global_step / decay_steps)``; with
    ``staircase`` the exponent is floored (the rate drops every ``decay_steps``).

    Raises:
        ValueError: no global step.
    """
    _require_step(global_step, "exponential_decay")
    kind = _float_kind(learning_rate)

    def compute(lr: Array, step: Array, steps: Array, rate: Array) -> Array:
        p = step.astype(kind) / steps.astype(kind)
        if staircase:
            p = np.floor(p)
        found: Array = np.asarray(lr, kind) * np.power(rate.astype(kind), p)
        return found

    inputs = [
        np.asarray(learning_rate, kind) if not is_symbolic(learning_rate) else learning_rate,
        global_step,
        decay_steps,
        decay_rate,
    ]
    return _schedule("ExponentialDecay", name, inputs, as_dtype(kind), compute)


def polynomial_decay(
    learning_rate: Any,
    global_step: Any,
    decay_steps: Any,
    end_learning_rate: Any = 0.0001,
    power: Any = 1.0,
    cycle: bool = False,
    name: str | None = None,
) -> Any:
    """``(learning_rate - end) * (1 - step / decay_steps) ** power + end``, with
    ``step = min(global_step, decay_steps)``; with ``cycle``, ``decay_steps`` is
    stretched to the next multiple of itself instead of the step stopping.

    Raises:
        ValueError: no global step.
    """
    _require_step(global_step, "polynomial_decay")
    kind = _float_kind(learning_rate)

    def compute(lr: Array, step: Array, steps: Array, end: Array, exponent: Array) -> Array:
        one = np.ones((), kind)
        at = step.astype(kind)
        span = steps.astype(kind)
        if cycle:
            multiplier = one if at == 0 else np.ceil(at / span)
            span = span * multiplier
        else:
            at = np.minimum(at, span)
        p = at / span
        start = np.asarray(lr, kind)
        final = end.astype(kind)
        found: Array = (start - final) * np.power(one - p, exponent.astype(kind)) + final
        return found

    inputs = [
        np.asarray(learning_rate, kind) if not is_symbolic(learning_rate) else learning_rate,
        global_step,
        decay_steps,
        end_learning_rate,
        power,
    ]
    return _schedule("PolynomialDecay", name, inputs, as_dtype(kind), compute)


def piecewise_constant(x: Any, boundaries: Any, values: Any, name: str | None = None) -> Any:
    """``values[0]`` while ``x <= boundaries[0]``, ``values[i]`` while
    ``boundaries[i-1] < x <= boundaries[i]``, ``values[-1]`` beyond the last boundary.

    Raises:
        ValueError: not one more value than boundaries; boundaries of another
            type than ``x`` (int32 boundaries for an int64 ``x`` are cast);
            values of different types.
    """
    bounds = list(boundaries)
    levels = list(values)
    if len(bounds) != len(levels) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    step_dtype = _dtype_of(x)
    for b in bounds:
        found = _dtype_of(b)
        if found != step_dtype and not (found == int32 and step_dtype == int64):
            raise ValueError(
                f"Boundaries ({found.name}) must have the same dtype as x ({step_dtype.name})."
            )
    value_dtype = _dtype_of(levels[0])
    for v in levels[1:]:
        if _dtype_of(v) != value_dtype:
            raise ValueError(
                "Values must have elements all with the same dtype "
                f"({value_dtype.name} vs {_dtype_of(v).name})."
            )

    def compute(step: Array, *rest: Array) -> Array:
        edges = rest[: len(bounds)]
        choices = rest[len(bounds) :]
        for edge, choice in zip(edges, choices, strict=False):
            if step <= edge.astype(step.dtype):
                return np.asarray(choice, value_dtype.numpy_dtype)
        return np.asarray(choices[-1], value_dtype.numpy_dtype)

    return _schedule("PiecewiseConstant", name, [x, *bounds, *levels], value_dtype, compute)


def _dtype_of(value: Any) -> DType:
    if is_symbolic(value):
        return as_tensor(value).dtype
    found = getattr(value, "dtype", None)
    if found is not None:
        return as_dtype(found)
    return as_dtype(infer_array(value).dtype)


__all__ = ["exponential_decay", "piecewise_constant", "polynomial_decay"]
