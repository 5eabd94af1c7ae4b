"""Learning-rate schedules of a global step: ``exponential_decay``, ``piecewise_constant``,
``polynomial_decay``.

In graph mode each returns a scalar Tensor computed with the ordinary math ops
(``Cast``, ``RealDiv``, ``Pow``, ``Mul``, ...) under a name scope of the
schedule's name, its last op taking that name, so that its value follows the
global step each time a session runs it; give it to an optimizer as its
learning rate. Eagerly each returns a function of no arguments giving the
value now, as TensorFlow's do. The arithmetic is TensorFlow's, in the
learning rate's dtype (float32 for a Python float).

Differs from TensorFlow: ``piecewise_constant`` chooses its value with
``SelectV2`` ops instead of a ``case`` of conditionals (docs/departures.md T31).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from tf_accum.dtypes import DType, as_dtype, int32, int64
from tf_accum.graph import mode
from tf_accum.graph.array_ops import where_v2
from tf_accum.graph.elementwise_ops import ceil, equal, floor, greater, less_equal, logical_and
from tf_accum.graph.elementwise_ops import minimum as _minimum
from tf_accum.graph.elementwise_ops import pow as _pow
from tf_accum.graph.graph import is_symbolic
from tf_accum.graph.math_ops import add, divide, multiply, subtract
from tf_accum.graph.ops import as_tensor, cast, constant, infer_array

Array = np.ndarray[Any, Any]


def _schedule(compute: Callable[..., Any], inputs: Sequence[Any]) -> Any:
    """``compute(*inputs)`` built into the graph; eagerly, a function of no
    arguments computing it from the inputs' values now."""
    if mode.building_graph() is not None:
        return compute(*inputs)

    def value_now() -> Array:
        return np.asarray(compute(*(_eager_value(v) for v in inputs)))

    return value_now


@contextlib.contextmanager
def _scope(name: str) -> Iterator[str | None]:
    """The schedule's name scope while building (its full name, ending in "/")."""
    graph = mode.building_graph()
    if graph is None:
        yield None
        return
    with graph.name_scope(name) as full:
        yield full


def _eager_value(value: Any) -> Array:
    numpy_value = getattr(value, "numpy", None)
    if callable(numpy_value):
        return np.asarray(numpy_value())
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    return infer_array(value)


def _require_step(global_step: Any, function: str) -> None:
    if global_step is None:
        raise ValueError(f"global_step is required for {function}.")


def _initial_rate(learning_rate: Any) -> Any:
    """The learning rate as a tensor (eagerly an array): its own dtype, float32
    for a Python number."""
    if is_symbolic(learning_rate):
        return as_tensor(learning_rate)
    array = np.asarray(learning_rate)
    if not isinstance(learning_rate, (np.ndarray, np.generic)):
        array = infer_array(learning_rate)
    if mode.building_graph() is None:
        return array
    return constant(array, name="initial_learning_rate")


def _dtype(value: Any) -> DType:
    if is_symbolic(value):
        return as_tensor(value).dtype
    return as_dtype(np.asarray(value).dtype)


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

    def compute(rate0: Any, step: Any, steps: Any, decay: Any) -> Any:
        with _scope(name or "ExponentialDecay") as scope:
            initial = _initial_rate(rate0)
            dtype = _dtype(initial)
            p = divide(cast(step, dtype), cast(steps, dtype))
            if staircase:
                p = floor(p)
            return multiply(initial, _pow(cast(decay, dtype), p), name=scope)

    return _schedule(compute, [learning_rate, global_step, decay_steps, decay_rate])


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

    def compute(rate0: Any, step: Any, steps: Any, end: Any, exponent: Any) -> Any:
        with _scope(name or "PolynomialDecay") as scope:
            initial = _initial_rate(rate0)
            dtype = _dtype(initial)
            final = cast(end, dtype)
            at = cast(step, dtype)
            span = cast(steps, dtype)
            if cycle:
                zero = np.zeros((), dtype.numpy_dtype)
                one = np.ones((), dtype.numpy_dtype)
                multiplier = where_v2(equal(at, zero), one, ceil(divide(at, cast(steps, dtype))))
                span = multiply(span, multiplier)
            else:
                at = _minimum(at, span)
            p = divide(at, span)
            one_minus_p = subtract(np.ones((), dtype.numpy_dtype), p)
            decayed = multiply(subtract(initial, final), _pow(one_minus_p, cast(exponent, dtype)))
            return add(decayed, final, name=scope)

    return _schedule(compute, [learning_rate, global_step, decay_steps, end_learning_rate, power])


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

    def compute(step: Any, *rest: Any) -> Any:
        with _scope(name or "PiecewiseConstant") as scope:
            edges = [cast(_as_value(b), step_dtype) for b in rest[: len(bounds)]]
            choices = [_as_value(v) for v in rest[len(bounds) :]]
            # the first interval holding the step gives the value: built from the last back
            chosen = choices[-1]
            pairs = [less_equal(step, edges[0])]
            pairs += [
                logical_and(greater(step, low), less_equal(step, high))
                for low, high in zip(edges[:-1], edges[1:], strict=True)
            ]
            for i in range(len(pairs) - 1, -1, -1):
                last = i == 0
                chosen = where_v2(pairs[i], choices[i], chosen, name=scope if last else None)
            return chosen

    return _schedule(compute, [x, *bounds, *levels])


def _as_value(value: Any) -> Any:
    """A boundary or value as an op input: a tensor as it is, else an array of
    the dtype TensorFlow converts it to."""
    if is_symbolic(value):
        return as_tensor(value)
    return _eager_value(value)


def _dtype_of(value: Any) -> DType:
    if is_symbolic(value):
        return as_tensor(value).dtype
    found = getattr(value, "dtype", None)
    if found is not None:
        return as_dtype(found)
    return as_dtype(infer_array(value).dtype)


__all__ = ["exponential_decay", "piecewise_constant", "polynomial_decay"]
