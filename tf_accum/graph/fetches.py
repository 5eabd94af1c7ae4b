"""Session.run's fetches: any nesting of lists, tuples, dicts and named tuples
of Tensors, Operations, Variables and names, flattened for the run and rebuilt
with values."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tf_accum.graph.graph import Graph, Operation, Tensor


def flatten(
    graph: Graph, fetches: Any
) -> tuple[list[Tensor | Operation], Callable[[list[Any]], Any]]:
    """The graph elements to run, and a function that puts their values back in shape.

    Raises:
        TypeError: a fetch that is not a graph element or a structure of them.
        ValueError: an element of another graph.
        KeyError: a name that names nothing.
    """
    elements: list[Tensor | Operation] = []

    def visit(fetch: Any) -> Callable[[list[Any]], Any]:
        if fetch is None:
            raise TypeError(f"Fetch argument None has invalid type {type(None)}")
        if isinstance(fetch, (str, Tensor, Operation)) or hasattr(fetch, "graph_element"):
            try:
                element = graph.as_graph_element(fetch)
            except TypeError as error:
                raise TypeError(
                    f"Fetch argument {fetch!r} has invalid type {type(fetch)}, must be a string "
                    f"or Tensor. ({error})"
                ) from None
            position = len(elements)
            elements.append(element)
            if isinstance(element, Operation):
                return lambda values: None
            return lambda values: _fetched(values[position])
        if isinstance(fetch, tuple) and hasattr(fetch, "_fields"):
            parts = [
                None if v is None and f == "dense_shape" else visit(v)
                for f, v in zip(fetch._fields, fetch, strict=True)
            ]
            kind: Any = type(fetch)
            return lambda values: kind(*[None if p is None else p(values) for p in parts])
        if isinstance(fetch, (list, tuple)):
            parts_seq = [visit(v) for v in fetch]
            kind_seq = type(fetch)
            return lambda values: kind_seq([p(values) for p in parts_seq])
        if isinstance(fetch, Mapping):
            keyed = [(k, visit(v)) for k, v in fetch.items()]
            kind_map: Any = type(fetch)
            return lambda values: kind_map([(k, p(values)) for k, p in keyed])
        raise TypeError(
            f"Fetch argument {fetch!r} has invalid type {type(fetch)}, must be a string or Tensor. "
            f"(Can not convert a {type(fetch).__name__} into a Tensor or Operation.)"
        )

    rebuild = visit(fetches)
    return elements, rebuild


def _fetched(value: Any) -> Any:
    """What a run hands back: numpy scalars for scalars, and arrays the caller owns."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return value[()]
        if not value.flags.writeable:
            return value.copy()
    return value
