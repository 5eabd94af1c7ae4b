"""Make a function a raw op: keyword arguments only, as ``tf.raw_ops`` are."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, TypeVar

from tf_accum.graph import mode

F = TypeVar("F", bound=Callable[..., Any])


def snake_case(op_name: str) -> str:
    """``ResourceAccumulatorApplyGradient`` -> ``resource_accumulator_apply_gradient``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", op_name).lower()


def raw_op(func: F) -> F:
    """Wrap ``func`` (whose parameters are all keyword-only) as a raw op.

    A positional call raises TensorFlow's TypeError, which lists the valid keys.
    In graph mode (``tf_accum.compat.v1``) a call builds a node whose kernel is
    ``func`` instead of acting; eager calls pay one flag read for that.
    """
    op_type = func.__name__
    keys = list(inspect.signature(func).parameters)
    message = (
        f"{snake_case(func.__name__)} only takes keyword args (possible keys: {keys}). "
        "Please pass these args as kwargs instead."
    )

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if args:
            raise TypeError(message)
        if mode.graph_mode_used:
            graph = mode.building_graph()
            if graph is not None:
                from tf_accum.graph.raw_op_nodes import build

                return build(graph, op_type, func, kwargs)
        return func(**kwargs)

    return wrapper  # type: ignore[return-value]
