"""Make a function a raw op: keyword arguments only, as ``tf.raw_ops`` are."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, TypeVar

from tf_accum.accumulators.interrupts import delivered

F = TypeVar("F", bound=Callable[..., Any])
GraphBuilder = Callable[[str, Callable[..., Any], dict[str, Any]], Any]

# What a graph builder returns when the calling thread builds no graph.
NOT_BUILT: Any = object()

# Set by graph mode while ops may build into a graph (see
# tf_accum/graph/raw_op_nodes.py): ``builder(op_type, func, kwargs)`` makes
# the op's node, or returns NOT_BUILT. The op layer knows nothing else of
# graphs; None (no graph in use) costs an eager call one global read.
_graph_builder: GraphBuilder | None = None


def set_graph_builder(builder: GraphBuilder | None) -> None:
    """Install (or, with None, remove) the graph builder raw ops consult."""
    global _graph_builder
    _graph_builder = builder


def snake_case(op_name: str) -> str:
    """``ResourceAccumulatorApplyGradient`` -> ``resource_accumulator_apply_gradient``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", op_name).lower()


def raw_op(func: F) -> F:
    """Wrap ``func`` (whose parameters are all keyword-only) as a raw op.

    A positional call raises TensorFlow's TypeError, which lists the valid keys.
    In graph mode (``tf_accum.compat.v1``) a call builds a node whose kernel is
    ``func`` instead of acting (through the builder graph mode installs with
    :func:`set_graph_builder`); eager calls pay one global read for that.
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
        builder = _graph_builder
        if builder is not None:
            node = builder(op_type, func, kwargs)
            if node is not NOT_BUILT:
                return node
        return func(**kwargs)

    return wrapper  # type: ignore[return-value]


def raw_take_op(func: F) -> F:
    """As :func:`raw_op`, for a take: the call is a delivery (see
    tf_accum/accumulators/interrupts.py), so that a round it took goes back if
    an exception leaves the call before it returned (or the outermost public
    call it runs in)."""
    op = raw_op(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return delivered(op, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
