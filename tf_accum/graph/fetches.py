"""Session.run's fetches: any nesting of lists, tuples, dicts and named tuples
of Tensors, Operations, Variables and names, flattened for the run and rebuilt
with values."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from tf_accum.graph.graph import Graph, Operation, Tensor
from tf_accum.indexed_slices import IndexedSlices


class IndexedSlicesValue(NamedTuple):
    """What ``Session.run`` returns for an IndexedSlices fetch: its values,
    indices and dense shape as numpy arrays (``dense_shape`` None when the
    IndexedSlices has none), as TensorFlow's IndexedSlicesValue."""

    values: Any
    indices: Any
    dense_shape: Any


def flatten(
    graph: Graph, fetches: Any
) -> tuple[list[Tensor | Operation], Callable[[list[Any]], Any]]:
    """The graph elements to run, and a function that puts their values back in shape.

    The function takes the elements' values (each as :func:`fetched_value` or
    a fed value) and returns them in the structure of ``fetches``.

    Raises:
        TypeError: a fetch that is not a graph element or a structure of them.
        ValueError: an element of another graph, or a name that names nothing.
    """
    kind = type(fetches)
    if (kind is Tensor or kind is Operation) and fetches.graph is graph:
        # the common case, with nothing to rebuild
        return [fetches], _no_value if kind is Operation else _first_value
    if kind is list or kind is tuple:
        # a flat list of this graph's elements (one take per variable, say): a run
        # per step makes the walk below worth skipping
        elements: list[Tensor | Operation] = list(fetches)
        if all((type(e) is Tensor or type(e) is Operation) and e.graph is graph for e in elements):
            skip = [type(e) is Operation for e in elements]
            return elements, functools.partial(_flat_values, kind, skip)
    elements = []

    def visit(fetch: Any) -> Callable[[list[Any]], Any]:
        if fetch is None:
            raise TypeError('Argument `fetch` = None has invalid type "NoneType". Cannot be None')
        if isinstance(fetch, (str, Tensor, Operation)) or hasattr(fetch, "graph_element"):
            try:
                element = graph.as_graph_element(fetch)
            except TypeError as error:
                raise _invalid_type(fetch, error) from None
            except (KeyError, ValueError) as error:
                raise ValueError(
                    f"Argument `fetch` = {fetch} cannot be interpreted as a Tensor. ({error})"
                ) from None
            position = len(elements)
            elements.append(element)
            if isinstance(element, Operation):
                return _no_value
            return lambda values: values[position]
        if isinstance(fetch, tuple) and hasattr(fetch, "_fields"):
            parts = [
                None if v is None and f == "dense_shape" else visit(v)
                for f, v in zip(fetch._fields, fetch, strict=True)
            ]
            kind: Any = IndexedSlicesValue if isinstance(fetch, IndexedSlices) else type(fetch)
            return lambda values: kind(*[None if p is None else p(values) for p in parts])
        if isinstance(fetch, (list, tuple)):
            parts_seq = [visit(v) for v in fetch]
            kind_seq = type(fetch)
            return lambda values: kind_seq([p(values) for p in parts_seq])
        if isinstance(fetch, Mapping):
            keyed = [(k, visit(v)) for k, v in fetch.items()]
            kind_map: Any = type(fetch)
            return lambda values: kind_map([(k, p(values)) for k, p in keyed])
        raise _invalid_type(
            fetch, f"Can not convert a {type(fetch).__name__} into a Tensor or Operation."
        )

    rebuild = visit(fetches)
    return elements, rebuild


def _flat_values(kind: type, skip: list[bool], values: list[Any]) -> Any:
    return kind([None if s else v for s, v in zip(skip, values, strict=True)])


def _no_value(values: list[Any]) -> None:
    return None


def _first_value(values: list[Any]) -> Any:
    return values[0]


def _invalid_type(fetch: Any, reason: object) -> TypeError:
    return TypeError(
        f'Argument `fetch` = {fetch} has invalid type "{type(fetch).__name__}" must be a string '
        f"or Tensor. ({reason})"
    )


def fetched_value(value: Any) -> Any:
    """What a run hands back: numpy scalars for scalars, and arrays the caller owns."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return value[()]
        if not value.flags.writeable:
            return value.copy()
    return value
