"""``scatter_add``, ``scatter_sub``, ``scatter_update``: changing some rows of a variable.

A sparse gradient taken from a SparseConditionalAccumulator is rows
(``indices``, ``values``): ``scatter_sub(embedding, taken.indices,
taken.values)`` subtracts them from those rows of the variable, atomically,
as TensorFlow's ResourceScatterSub does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import int32, int64
from tf_accum.graph import mode
from tf_accum.graph.graph import is_symbolic
from tf_accum.graph.ops import graph_input, infer_array
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.graph.variable_store import check_merge
from tf_accum.graph.variables import Variable, store_of
from tf_accum.shapes import kernel_text

Array = np.ndarray[Any, Any]
# rows of the variable's (copied) value, the indices, the updates -> None
Change = Callable[[Array, Array, Array], None]


def _add(value: Array, indices: Array, updates: Array) -> None:
    np.add.at(value, indices, updates)  # repeated indices add up


def _subtract(value: Array, indices: Array, updates: Array) -> None:
    np.subtract.at(value, indices, updates)


def _replace(value: Array, indices: Array, updates: Array) -> None:
    value[indices] = updates  # of repeated indices, the last one's row stays


# what each scatter op's rows do, by the name a ps task's host knows them by
CHANGES: dict[str, Change] = {
    "scatter_add": _add,
    "scatter_sub": _subtract,
    "scatter_update": _replace,
}
METHODS = {
    "ResourceScatterAdd": "scatter_add",
    "ResourceScatterSub": "scatter_sub",
    "ResourceScatterUpdate": "scatter_update",
}


def changed_rows(value: Array, indices: Any, updates: Any, method: str) -> Array:
    """A copy of ``value`` with scatter ``method`` ("scatter_add", ...) applied; as the ops do.

    Raises:
        InvalidArgumentError: what TensorFlow's scatter kernels refuse.
    """
    return _changed(value, indices, updates, CHANGES[method])


def scatter_add(
    ref: Variable, indices: Any, updates: Any, use_locking: Any = False, name: str | None = None
) -> Any:
    """Add ``updates`` to the rows ``indices`` of ``ref``; returns the new value.

    ``updates`` has the shape ``indices.shape + ref.shape[1:]``, or is a scalar
    added to every row named. A row named twice gets both.

    Raises:
        AttributeError: ``ref`` is not a Variable.
        TypeError: indices that are not int32 or int64; updates that do not
            convert to the variable's dtype.
        ValueError: shapes that cannot fit (when the op is built), or a Tensor
            of another dtype as ``updates``.
        InvalidArgumentError: an index outside ``[0, ref.shape[0])``, or
            shapes that do not fit (when it runs).
        FailedPreconditionError: the variable is not initialized (when it runs).
    """
    return _scatter(ref, indices, updates, name, "ResourceScatterAdd", _add)


def scatter_sub(
    ref: Variable, indices: Any, updates: Any, use_locking: Any = False, name: str | None = None
) -> Any:
    """Subtract ``updates`` from the rows ``indices`` of ``ref``; as :func:`scatter_add`."""
    return _scatter(ref, indices, updates, name, "ResourceScatterSub", _subtract)


def scatter_update(
    ref: Variable, indices: Any, updates: Any, use_locking: Any = True, name: str | None = None
) -> Any:
    """Set the rows ``indices`` of ``ref`` to ``updates``; as :func:`scatter_add`.
    Of a row named twice, the later update is kept."""
    return _scatter(ref, indices, updates, name, "ResourceScatterUpdate", _replace)


def _scatter(
    ref: Any, indices: Any, updates: Any, name: str | None, op_type: str, change: Change
) -> Any:
    if not isinstance(ref, Variable):
        raise AttributeError(
            f"{op_type} changes a Variable; its ref argument is a {type(ref).__name__}"
        )
    graph = mode.building_graph() or ref.graph
    if graph is None:
        return _scatter_eagerly(ref, indices, updates, change)
    index = graph_input(graph, indices, name=f"{op_type}/indices" if name is None else None)
    if index.dtype not in (int32, int64):
        raise TypeError(
            f"Value passed to parameter 'indices' has DataType {index.dtype.name} not in list of "
            "allowed values: int32, int64"
        )
    rows = graph_input(graph, updates, ref.dtype)
    if rows.dtype != ref.dtype:
        raise ValueError(
            f"Tensor conversion requested dtype {ref.dtype.name} for Tensor with dtype "
            f"{rows.dtype.name}: {rows!r}"
        )
    _check_static_shapes(ref.shape, index.shape, rows.shape)

    def kernel(context: Any, inputs: list[Any]) -> tuple[Array]:
        variable, where, given = inputs
        store = store_of(context)
        return (store.update(variable, lambda value: _changed(value, where, given, change)),)

    op = graph.create_op(
        op_type,
        [ref.op.outputs[0], index, rows],
        [(ref.dtype, ref.shape)],
        kernel,
        name=name or op_type,
        attrs={"dtype": ref.dtype, "Tindices": index.dtype},
    )
    return op.outputs[0]


def _check_static_shapes(variable: TensorShape, indices: TensorShape, updates: TensorShape) -> None:
    """As TensorFlow's shape inference: ``updates`` is a scalar or
    ``indices.shape + variable.shape[1:]`` (in what is known of them)."""
    if updates.rank == 0 or variable.rank is None or variable.rank == 0 or indices.rank is None:
        return
    expected = TensorShape(list(indices.as_tuple() or ()) + list((variable.as_tuple() or ())[1:]))
    check_merge(updates, expected)


def _changed(value: Array, indices: Any, updates: Any, change: Change) -> Array:
    """A changed copy of ``value`` (the stored one is never written).

    Raises:
        InvalidArgumentError: what TensorFlow's scatter kernels refuse.
    """
    where = np.asarray(indices)
    given = np.asarray(updates)
    if value.ndim == 0:
        raise errors.InvalidArgumentError(
            None, None, f"params must be at least 1-D, got shape {kernel_text(value.shape)}"
        )
    expected = where.shape + value.shape[1:]
    if given.ndim and given.shape != expected:
        if given.ndim == where.ndim + value.ndim - 1 and given.shape[: where.ndim] != where.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"The shape of indices ({kernel_text(where.shape)}) must be a prefix of the shape "
                f"of updates ({kernel_text(given.shape)})",
            )
        # TensorFlow 2.21 checks only the rank and the prefix, and reads past
        # (or short of) rows of another shape: refused here (T21)
        raise errors.InvalidArgumentError(
            None,
            None,
            "Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = [], "
            f"got updates.shape {kernel_text(given.shape)}, indices.shape "
            f"{kernel_text(where.shape)}, params.shape {kernel_text(value.shape)}",
        )
    rows = value.shape[0]
    outside = np.argwhere((where < 0) | (where >= rows))
    if outside.size:
        at = tuple(int(i) for i in outside[0])
        raise errors.InvalidArgumentError(
            None,
            None,
            f"indices[{','.join(map(str, at))}] = {int(where[at])} is not in [0, {rows})",
        )
    fresh = np.array(value)
    change(fresh, where, given.astype(value.dtype, copy=False))
    return fresh


def _scatter_eagerly(ref: Variable, indices: Any, updates: Any, change: Change) -> Any:
    if is_symbolic(indices) or is_symbolic(updates):
        raise TypeError("An eager Variable cannot be changed by graph Tensors.")
    where = infer_array(indices)
    if where.dtype not in (np.int32, np.int64):
        raise TypeError(
            f"Value passed to parameter 'indices' has DataType {where.dtype} not in list of "
            "allowed values: int32, int64"
        )
    given = infer_array(updates, ref.dtype)
    _check_static_shapes(ref.shape, TensorShape(where.shape), TensorShape(given.shape))
    return ref.assign(_changed(ref.numpy(), where, given, change))


__all__ = ["scatter_add", "scatter_sub", "scatter_update"]
