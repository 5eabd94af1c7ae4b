"""Array ops: shapes, reshaping, joining and splitting, gathering, selecting.

Each keeps TensorFlow's op type (``Reshape``, ``ConcatV2``, ``Pack``,
``GatherV2``, ...), so gradients registered by type apply, and infers the
static shape TensorFlow infers. As in TensorFlow, ``shape``, ``size`` and
``rank`` of a tensor whose static shape is known are constants, and a list
holding tensors, given where a tensor is expected, is packed into one.
Eagerly each returns numpy arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, as_dtype, float32, int32, int64
from tf_accum.dtypes import bool as bool_
from tf_accum.graph import mode
from tf_accum.graph.graph import Tensor, is_symbolic
from tf_accum.graph.op_building import (
    Converted,
    build_in,
    constant_value,
    convert_input,
    dtype_of,
    holds_symbolic,
    make_op,
    shape_error,
)
from tf_accum.graph.ops import constant, identity
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.indexed_slices import IndexedSlices
from tf_accum.shapes import kernel_text

Array = np.ndarray[Any, Any]
_INDEX_TYPES = ("int32", "int64")


def _index_input(
    value: Any, param: str, default: DType = int32, allowed: tuple[str, ...] = _INDEX_TYPES
) -> Any:
    """An int32/int64 input (Python values become int32, or ``default``).

    Raises:
        TypeError: another dtype.
    """
    if is_symbolic(value) or isinstance(value, Converted):
        converted = convert_input(value, param=param)
    elif isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "iu":
        converted = Converted(np.asarray(value), dtype_of(convert_input(value)))
    else:
        array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
        if array.dtype.kind in "iub" or array.size == 0:
            fits = array.size == 0 or (
                np.iinfo(np.int32).min <= array.min() and array.max() <= np.iinfo(np.int32).max
            )
            wanted = default if fits else int64
            converted = Converted(array.astype(wanted.numpy_dtype), wanted)
        else:
            converted = convert_input(value, param=param)
    if dtype_of(converted).name not in allowed:
        raise TypeError(
            f"Value passed to parameter '{param}' has DataType {dtype_of(converted).name} not "
            f"in list of allowed values: {', '.join(allowed)}"
        )
    return converted


def _known_dims(value: Any) -> list[int] | None:
    known = constant_value(value)
    return None if known is None else [int(d) for d in np.asarray(known).reshape(-1)]


def _unknown_dims(dims_input: Any) -> TensorShape:
    """The static shape a shape input of unknown value gives: its length, if known."""
    dims_shape = _shape_of(dims_input)
    length = dims_shape.as_list()[0] if dims_shape.rank == 1 else None
    return TensorShape(None) if length is None else TensorShape([None] * length)


def _shape_of(value: Any) -> TensorShape:
    if isinstance(value, Converted):
        return TensorShape(value.array.shape)
    return value.shape  # type: ignore[no-any-return]


# --- shapes --------------------------------------------------------------------


def shape(input: Any, name: str | None = None, out_type: Any = None) -> Any:  # noqa: A002
    """The shape of ``input`` as a 1-D ``out_type`` (int32) tensor; a constant when
    the static shape is fully known."""
    wanted = as_dtype(out_type) if out_type is not None else int32
    with build_in([input]):
        source = convert_input(input)
        static = _shape_of(source)
        if static.is_fully_defined():
            return constant(np.asarray(static.as_list(), wanted.numpy_dtype), name=name or "Shape")

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            return (np.asarray(np.shape(inputs[0]), wanted.numpy_dtype),)

        return make_op(
            "Shape",
            name,
            [("input", source)],
            kernel,
            lambda t: [(wanted, TensorShape([t[0].shape.rank]))],
            {"T": dtype_of(source), "out_type": wanted},
        )


def shape_n(input: Sequence[Any], out_type: Any = None, name: str | None = None) -> list[Any]:  # noqa: A002
    """The shapes of several tensors (a ``ShapeN`` op), each a 1-D ``out_type`` (int32) tensor."""
    wanted = as_dtype(out_type) if out_type is not None else int32
    values = list(input)
    with build_in(values):
        sources = _same_dtype_inputs(values, "ShapeN")

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            return tuple(np.asarray(np.shape(v), wanted.numpy_dtype) for v in inputs)

        found: list[Any] = make_op(
            "ShapeN",
            name,
            [(f"input_{i}", v) for i, v in enumerate(sources)],
            kernel,
            lambda t: [(wanted, TensorShape([v.shape.rank])) for v in t],
            {"N": len(sources), "T": dtype_of(sources[0]), "out_type": wanted},
            many=True,
        )
        return found


def size(input: Any, name: str | None = None, out_type: Any = None) -> Any:  # noqa: A002
    """The number of elements of ``input`` (an int32 scalar by default)."""
    wanted = as_dtype(out_type) if out_type is not None else int32
    with build_in([input]):
        source = convert_input(input)
        static = _shape_of(source)
        if static.is_fully_defined():
            count = static.num_elements()
            return constant(np.asarray(count, wanted.numpy_dtype), name=name or "Size")

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            return (np.asarray(np.size(inputs[0]), wanted.numpy_dtype),)

        return make_op(
            "Size",
            name,
            [("input", source)],
            kernel,
            lambda t: [(wanted, TensorShape([]))],
            {"T": dtype_of(source), "out_type": wanted},
        )


def rank(input: Any, name: str | None = None) -> Any:  # noqa: A002
    """The number of dimensions of ``input`` (an int32 scalar)."""
    with build_in([input]):
        source = convert_input(input)
        static = _shape_of(source)
        if static.rank is not None:
            return constant(np.asarray(static.rank, np.int32), name=name or "Rank")

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            return (np.asarray(np.ndim(inputs[0]), np.int32),)

        return make_op(
            "Rank", name, [("input", source)], kernel, lambda t: [(int32, TensorShape([]))]
        )


# --- reshaping -----------------------------------------------------------------


def _reshaped(array: Array, dims: list[int]) -> Array:
    unknown = [i for i, d in enumerate(dims) if d == -1]
    known = math.prod(d for d in dims if d != -1)
    if len(unknown) > 1:
        raise errors.InvalidArgumentError(
            None, None, f"Only one input size may be -1, not both {unknown[0]} and {unknown[1]}"
        )
    if any(d < -1 for d in dims):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Size {[d < -1 for d in dims].index(True)} must be non-negative, not {min(dims)}",
        )
    if unknown and known and array.size % known == 0:
        dims = [array.size // known if d == -1 else d for d in dims]
    elif unknown and known == 0 and array.size == 0:
        dims = [0 if d == -1 else d for d in dims]
    if unknown and -1 in dims or math.prod(dims) != array.size:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Input to reshape is a tensor with {array.size} values, but the requested shape "
            + (f"requires a multiple of {known}" if unknown else f"has {math.prod(dims)}"),
        )
    return array.reshape(dims)


def _reshape_static(
    source: TensorShape, dims: list[int] | None, shape_rank: Any, tensors: list[Tensor]
) -> TensorShape:
    if dims is None:
        return (
            TensorShape([None] * shape_rank) if isinstance(shape_rank, int) else TensorShape(None)
        )
    if dims.count(-1) > 1:
        return TensorShape([None if d == -1 else d for d in dims])
    if -1 in dims:
        total = source.num_elements() if source.is_fully_defined() else None
        known = int(np.prod([d for d in dims if d != -1]))
        if total is not None and known and total % known == 0:
            return TensorShape([total // known if d == -1 else d for d in dims])
        if total is not None and known and total % known:
            raise shape_error(
                f"Cannot reshape a tensor with {total} elements to shape {kernel_text(tuple(dims))} "
                f"(requires a multiple of {known})",
                tensors,
            )
        return TensorShape([None if d == -1 else d for d in dims])
    if source.is_fully_defined() and source.num_elements() != int(np.prod(dims)):
        raise shape_error(
            f"Cannot reshape a tensor with {source.num_elements()} elements to shape "
            f"{kernel_text(tuple(dims))} ({int(np.prod(dims))} elements)",
            tensors,
        )
    return TensorShape(dims)


def reshape(tensor: Any, shape: Any, name: str | None = None) -> Any:
    """``tensor``'s values in ``shape`` (one dimension may be -1: inferred).

    Raises:
        ValueError: a static element count that ``shape`` cannot hold.
        InvalidArgumentError: the same, found when run.
    """
    with build_in([tensor, shape]):
        source = convert_input(tensor, param="tensor")
        dims_input = _index_input(shape, "shape")
        dims = _known_dims(dims_input)
        dims_shape = _shape_of(dims_input)
        shape_rank = dims_shape.as_list()[0] if dims_shape.rank == 1 else None

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            wanted = [int(d) for d in np.asarray(inputs[1]).reshape(-1)]
            return (_reshaped(np.asarray(inputs[0]), wanted),)

        return make_op(
            "Reshape",
            name,
            [("tensor", source), ("shape", dims_input)],
            kernel,
            lambda t: [(t[0].dtype, _reshape_static(t[0].shape, dims, shape_rank, t))],
            {"T": dtype_of(source), "Tshape": dtype_of(dims_input)},
        )


def _checked_perm(perm: list[int], rank: int) -> list[int]:
    if sorted(p % rank if rank else p for p in perm) != list(range(rank)) or len(perm) != rank:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"transpose expects a vector of size {rank}. But input(1) is a vector of "
            f"size {len(perm)}"
            if len(perm) != rank
            else f"{perm} is not a valid permutation",
        )
    return [p % rank for p in perm]


def transpose(a: Any, perm: Any = None, name: str = "transpose", conjugate: bool = False) -> Any:
    """``a`` with its dimensions permuted by ``perm`` (default: reversed)."""
    with build_in([a, perm]):
        source = convert_input(a, param="a")
        static_in = _shape_of(source)
        if perm is None:
            if static_in.rank is None:
                perm_input = _index_input(range_(rank(source) - 1, -1, -1), "perm")
            else:
                perm_input = _index_input(list(range(static_in.rank - 1, -1, -1)), "perm")
        else:
            perm_input = _index_input(perm, "perm")
        known = _known_dims(perm_input)

        def infer(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            if known is not None and static_in.rank is not None:
                if len(known) != static_in.rank:
                    raise shape_error(
                        f"Dimension must be {static_in.rank} but is {len(known)}", tensors
                    )
                dims = static_in.as_list()
                return [(tensors[0].dtype, TensorShape([dims[p] for p in known]))]
            if static_in.rank is not None:
                return [(tensors[0].dtype, TensorShape([None] * static_in.rank))]
            return [(tensors[0].dtype, TensorShape(None))]

        conj = conjugate and dtype_of(source).is_complex

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            order = _checked_perm([int(p) for p in np.asarray(inputs[1]).reshape(-1)], array.ndim)
            result = np.transpose(array, order)
            return (np.conj(result) if conj else result.copy(),)

        return make_op(
            "ConjugateTranspose" if conj else "Transpose",
            name,
            [("x", source), ("perm", perm_input)],
            kernel,
            infer,
            {"T": dtype_of(source), "Tperm": dtype_of(perm_input)},
        )


def expand_dims(input: Any, axis: Any = None, name: str | None = None, dim: Any = None) -> Any:  # noqa: A002
    """``input`` with a dimension of length 1 inserted at ``axis``.

    Raises:
        ValueError: no axis, or one outside ``[-rank - 1, rank]``.
    """
    if axis is None:
        axis = dim
    if axis is None:
        raise ValueError("Must specify an axis argument to tf.expand_dims()")
    with build_in([input, axis]):
        source = convert_input(input)
        axis_input = _index_input(axis, "dim")
        known = _known_dims(axis_input)
        static_in = _shape_of(source)

        def infer(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            if known is None or static_in.rank is None:
                return [(tensors[0].dtype, TensorShape(None))]
            where = known[0]
            rank_in = static_in.rank
            if not -rank_in - 1 <= where <= rank_in:
                raise shape_error(
                    f"dim {where} not in the interval [{-rank_in - 1}, {rank_in}].", tensors
                )
            where = where % (rank_in + 1)
            dims = static_in.as_list()
            return [(tensors[0].dtype, TensorShape(dims[:where] + [1] + dims[where:]))]

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            position = int(np.asarray(inputs[1]).reshape(-1)[0])
            if not -array.ndim - 1 <= position <= array.ndim:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Tried to expand dim index {position} for tensor with {array.ndim} "
                    "dimensions.",
                )
            return (np.expand_dims(array, position % (array.ndim + 1)),)

        return make_op(
            "ExpandDims",
            name,
            [("input", source), ("dim", axis_input)],
            kernel,
            infer,
            {"T": dtype_of(source), "Tdim": dtype_of(axis_input)},
        )


def squeeze(
    input: Any,  # noqa: A002
    axis: Any = None,
    name: str | None = None,
    squeeze_dims: Any = None,
) -> Any:
    """``input`` without its dimensions of length 1 (or only those in ``axis``).

    Raises:
        ValueError: an axis whose static length is not 1, or outside the rank.
    """
    if axis is None:
        axis = squeeze_dims
    if isinstance(axis, int):
        axis = [axis]
    axes = [] if axis is None else [int(a) for a in axis]
    with build_in([input]):
        source = convert_input(input)
        static_in = _shape_of(source)

        def infer(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            dtype = tensors[0].dtype
            if static_in.rank is None:
                return [(dtype, TensorShape(None))]
            dims = static_in.as_list()
            rank_in = len(dims)
            for a in axes:
                if not -rank_in <= a < rank_in:
                    raise shape_error(
                        f"Tried to squeeze dim index {a} for tensor with {rank_in} dimensions.",
                        tensors,
                    )
                if dims[a] is not None and dims[a] != 1:
                    raise shape_error(
                        f"Can not squeeze dim[{a % rank_in}], expected a dimension of 1, got "
                        f"{dims[a]}",
                        tensors,
                    )
            chosen = {a % rank_in for a in axes}
            if chosen:
                return [(dtype, TensorShape([d for i, d in enumerate(dims) if i not in chosen]))]
            if all(d is not None for d in dims):
                return [(dtype, TensorShape([d for d in dims if d != 1]))]
            return [(dtype, TensorShape(None))]

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            if not axes:
                return (array.reshape([d for d in array.shape if d != 1]),)
            for a in axes:
                if not -array.ndim <= a < array.ndim or array.shape[a] != 1:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"Can not squeeze dim[{a % max(array.ndim, 1)}], expected a dimension "
                        f"of 1, got {array.shape[a] if -array.ndim <= a < array.ndim else '?'}",
                    )
            return (np.squeeze(array, axis=tuple(a % array.ndim for a in axes)),)

        return make_op(
            "Squeeze",
            name,
            [("input", source)],
            kernel,
            infer,
            {"T": dtype_of(source), "squeeze_dims": axes},
        )


# --- joining and splitting -----------------------------------------------------


def _same_dtype_inputs(values: Sequence[Any], op_type: str) -> list[Any]:
    converted: list[Any] = []
    dtype: DType | None = None
    for value in values:
        if dtype is None or is_symbolic(value) or isinstance(value, Converted):
            item = convert_input(value, param="values")
        else:
            item = convert_input(value, dtype, param="values")
        have = dtype_of(item)
        if dtype is None:
            dtype = have
        elif have != dtype:
            raise TypeError(
                f"Tensors in list passed to 'values' of '{op_type}' Op have types "
                f"[{', '.join(dtype_of(c).name for c in converted + [item])}] that don't all match."
            )
        converted.append(item)
    # a non-tensor first value takes the dtype of the first tensor, as TensorFlow's
    tensors = [dtype_of(c) for c in converted if not isinstance(c, Converted)]
    if tensors and isinstance(converted[0], Converted) and dtype != tensors[0]:
        return _same_dtype_inputs_as(values, tensors[0], op_type)
    return converted


def _same_dtype_inputs_as(values: Sequence[Any], dtype: DType, op_type: str) -> list[Any]:
    converted = []
    for value in values:
        item = convert_input(value, dtype if not is_symbolic(value) else None, param="values")
        if dtype_of(item) != dtype:
            raise TypeError(
                f"Tensors in list passed to 'values' of '{op_type}' Op have types that don't "
                "all match."
            )
        converted.append(item)
    return converted


def merged_shapes(shapes: Sequence[TensorShape], tensors: list[Tensor]) -> TensorShape:
    """The shapes merged into one, or TensorFlow's error naming the first difference."""
    merged = TensorShape(None)
    for one in shapes:
        if merged.rank is not None and one.rank is not None:
            if merged.rank != one.rank:
                raise shape_error(
                    f"Shapes must be equal rank, but are {merged.rank} and {one.rank}", tensors
                )
            for i, (a, b) in enumerate(zip(merged.as_list(), one.as_list(), strict=True)):
                if a is not None and b is not None and a != b:
                    raise shape_error(
                        f"Dimension {i} in both shapes must be equal, but are {a} and {b}. "
                        f"Shapes are {kernel_text(merged.as_tuple())} and "
                        f"{kernel_text(one.as_tuple())}.",
                        tensors,
                    )
        merged = merged.merge_with(one)
    return merged


def stack(values: Sequence[Any], axis: int = 0, name: str = "stack") -> Any:
    """The tensors of ``values`` (of one shape) stacked along a new dimension ``axis``.

    Raises:
        ValueError: shapes that differ, or an axis outside ``[-rank - 1, rank]``.
    """
    values = list(values)
    if not holds_symbolic(values):
        try:
            array = convert_input(values).array
        except ValueError:
            array = None  # ragged: the Pack op says why
        if array is not None:
            if axis != 0:
                array = np.moveaxis(array, 0, axis % array.ndim if array.ndim else 0)
            return constant(array, name=name)
    with build_in(values):
        inputs = _same_dtype_inputs(values, "Pack")
        first = _shape_of(inputs[0])
        if first.rank is not None and not -first.rank - 1 <= axis <= first.rank:
            raise ValueError(
                f"Argument `axis` = {axis} not in range [{-first.rank - 1}, {first.rank + 1})"
            )

        def infer(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            common = merged_shapes([t.shape for t in tensors], tensors)
            if common.rank is None:
                return [(tensors[0].dtype, TensorShape(None))]
            where = axis % (common.rank + 1)
            dims = common.as_list()
            return [(tensors[0].dtype, TensorShape(dims[:where] + [len(inputs)] + dims[where:]))]

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            parts = [np.asarray(a) for a in arrays]
            if any(p.shape != parts[0].shape for p in parts):
                bad = next(i for i, p in enumerate(parts) if p.shape != parts[0].shape)
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Shapes of all inputs must match: values[0].shape = "
                    f"{kernel_text(parts[0].shape)} != values[{bad}].shape = "
                    f"{kernel_text(parts[bad].shape)}",
                )
            return (np.stack(parts, axis=axis % (parts[0].ndim + 1)),)

        return make_op(
            "Pack",
            name,
            [(f"values_{i}", v) for i, v in enumerate(inputs)],
            kernel,
            infer,
            {"N": len(inputs), "T": dtype_of(inputs[0]), "axis": axis},
        )


def unstack(value: Any, num: int | None = None, axis: int = 0, name: str = "unstack") -> Any:
    """The tensors along dimension ``axis`` of ``value``, as a list.

    Raises:
        ValueError: ``num`` not given and the dimension's length not known.
    """
    with build_in([value]):
        source = convert_input(value, param="value")
        static_in = _shape_of(source)
        if static_in.rank is not None and not -static_in.rank <= axis < static_in.rank:
            raise ValueError(
                f"Argument `axis` = {axis} not in range [{-static_in.rank}, {static_in.rank})"
            )
        if num is None:
            dim = static_in.as_list()[axis] if static_in.rank is not None else None
            if dim is None:
                raise ValueError(f"Cannot infer argument `num` from shape {static_in}")
            num = dim
        count = num
        static = TensorShape(None)
        if static_in.rank is not None:
            dims = static_in.as_list()
            del dims[axis % static_in.rank]
            static = TensorShape(dims)

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            where = axis % array.ndim
            if array.shape[where] != count:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Input shape axis {where} must equal {count}, got shape "
                    f"{kernel_text(array.shape)}",
                )
            return tuple(np.take(array, i, axis=where) for i in range(count))

        return make_op(
            "Unpack",
            name,
            [("value", source)],
            kernel,
            lambda t: [(t[0].dtype, static)] * count,
            {"T": dtype_of(source), "num": count, "axis": axis},
            many=True,
        )


def concat(values: Any, axis: Any, name: str = "concat") -> Any:
    """The tensors of ``values`` joined along dimension ``axis``.

    Raises:
        ValueError: ranks that differ, or other dimensions that differ (when known).
        InvalidArgumentError: the same, found when run.
    """
    if not isinstance(values, (list, tuple)):
        values = [values]
    values = list(values)
    if len(values) == 1:
        with build_in(values):
            source = convert_input(values[0], param="values")
            if mode.building_graph() is None:
                return np.asarray(source.array if isinstance(source, Converted) else source)
            return identity(source if is_symbolic(source) else source.array, name=name)
    with build_in(values + [axis]):
        inputs = _same_dtype_inputs(values, "ConcatV2")
        axis_input = _index_input(axis, "axis")
        known_axis = _known_dims(axis_input)
        shapes = [_shape_of(v) for v in inputs]
        axis_value = known_axis[0] if known_axis else None

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            parts = [np.asarray(a) for a in arrays[:-1]]
            where = int(np.asarray(arrays[-1]).reshape(-1)[0])
            ndim = parts[0].ndim
            if not -ndim <= where < ndim:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"ConcatOp : Expected concatenating dimensions in the range [{-ndim}, {ndim})"
                    f", but got {where}",
                )
            for i, part in enumerate(parts[1:], 1):
                if part.ndim != ndim:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"ConcatOp : Ranks of all input tensors should match: shape[0] = "
                        f"{kernel_text(parts[0].shape)} vs. shape[{i}] = {kernel_text(part.shape)}",
                    )
                for j in range(ndim):
                    if j != where % ndim and part.shape[j] != parts[0].shape[j]:
                        raise errors.InvalidArgumentError(
                            None,
                            None,
                            f"ConcatOp : Dimension {j} in both shapes must be equal: shape[0] = "
                            f"{kernel_text(parts[0].shape)} vs. shape[{i}] = "
                            f"{kernel_text(part.shape)}",
                        )
            return (np.concatenate(parts, axis=where % ndim),)

        return make_op(
            "ConcatV2",
            name,
            [(f"values_{i}", v) for i, v in enumerate(inputs)] + [("axis", axis_input)],
            kernel,
            lambda t: [(t[0].dtype, _concat_static(shapes, axis_value, t))],
            {"N": len(inputs), "T": dtype_of(inputs[0]), "Tidx": dtype_of(axis_input)},
        )


def _concat_static(
    shapes: list[TensorShape], axis: int | None, tensors: list[Tensor]
) -> TensorShape:
    ranks = [s.rank for s in shapes if s.rank is not None]
    if not ranks:
        return TensorShape(None)
    rank_all = ranks[0]
    for other in ranks[1:]:
        if other != rank_all:
            raise shape_error(f"Shape must be rank {rank_all} but is rank {other}", tensors)
    if axis is None:
        return TensorShape([None] * rank_all)
    if not -rank_all <= axis < rank_all:
        raise shape_error(
            f"ConcatOp : Expected concatenating dimensions in the range [{-rank_all}, "
            f"{rank_all}), but got {axis}",
            tensors,
        )
    where = axis % rank_all
    first: list[int | None] | None = None
    total: int | None = 0
    for one in shapes:
        if one.rank is None:
            total = None
            continue
        dims = one.as_list()
        size_ = dims.pop(where)
        total = None if total is None or size_ is None else total + size_
        if first is None:
            first = dims
            continue
        for i, (a, b) in enumerate(zip(first, dims, strict=True)):
            if a is not None and b is not None and a != b:
                raise shape_error(
                    f"Dimension {i} in both shapes must be equal, but are {a} and {b}. Shapes "
                    f"are {kernel_text(tuple(first))} and {kernel_text(tuple(dims))}.",
                    tensors,
                )
        first = [a if a is not None else b for a, b in zip(first, dims, strict=True)]
    assert first is not None
    return TensorShape(first[:where] + [total] + first[where:])


# --- filling, selecting, gathering ---------------------------------------------


def fill(dims: Any, value: Any, name: str | None = None) -> Any:
    """A tensor of shape ``dims`` whose every element is the scalar ``value``.

    Raises:
        ValueError: ``value`` is not a scalar (when known).
        InvalidArgumentError: a negative dimension (when run).
    """
    with build_in([dims, value]):
        dims_input = _index_input(dims, "dims")
        source = convert_input(value, param="value")
        known = _known_dims(dims_input)
        static = TensorShape(known) if known is not None else _unknown_dims(dims_input)

        def infer(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            if tensors[1].shape.rank not in (None, 0):
                raise shape_error(
                    f"Shape must be rank 0 but is rank {tensors[1].shape.rank}", tensors
                )
            return [(tensors[1].dtype, static)]

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            wanted = [int(d) for d in np.asarray(inputs[0]).reshape(-1)]
            if any(d < 0 for d in wanted):
                raise errors.InvalidArgumentError(
                    None, None, f"Dimension {min(wanted)} must be >= 0"
                )
            scalar = np.asarray(inputs[1])
            if scalar.ndim:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"value must represent a scalar, got shape {kernel_text(scalar.shape)}",
                )
            return (np.full(wanted, scalar, dtype=scalar.dtype),)

        return make_op(
            "Fill",
            name,
            [("dims", dims_input), ("value", source)],
            kernel,
            infer,
            {"T": dtype_of(source), "index_type": dtype_of(dims_input)},
        )


def stop_gradient(input: Any, name: str | None = None) -> Any:  # noqa: A002
    """``input`` unchanged, but gradients do not flow through it."""
    with build_in([input]):
        source = convert_input(input)
        return make_op(
            "StopGradient",
            name,
            [("input", source)],
            lambda context, inputs: (inputs[0],),
            lambda t: [(t[0].dtype, t[0].shape)],
            {"T": dtype_of(source)},
        )


def _check_indices(indices: Array, limit: int, where: str) -> None:
    bad = (indices < 0) | (indices >= limit)
    if np.any(bad):
        position = tuple(int(i) for i in np.argwhere(bad)[0])
        raise errors.InvalidArgumentError(
            None,
            None,
            f"indices{list(position)} = {int(indices[position])} is not in [0, {limit}){where}",
        )


def gather(
    params: Any,
    indices: Any,
    validate_indices: Any = None,
    name: str | None = None,
    axis: Any = None,
    batch_dims: int = 0,
) -> Any:
    """The slices of ``params`` along ``axis`` (default 0) at ``indices``.

    Raises:
        InvalidArgumentError: an index outside ``[0, params.shape[axis])`` (when run).
    """
    if batch_dims != 0:
        raise NotImplementedError("gather with batch_dims other than 0 is not supported")
    handle = getattr(params, "_handle", None)
    if handle is not None and axis in (None, 0) and mode.building_graph() is not None:
        return resource_gather(params, indices, name=name)
    with build_in([params, indices, axis]):
        source = convert_input(params, param="params")
        index_input = _index_input(indices, "indices", allowed=("int16", "int32", "int64"))
        axis_input = _index_input(0 if axis is None else axis, "axis")
        known_axis = _known_dims(axis_input)
        params_shape = _shape_of(source)
        index_shape = _shape_of(index_input)
        static = TensorShape(None)
        if known_axis is not None and params_shape.rank is not None:
            where = known_axis[0]
            if not -params_shape.rank <= where < max(params_shape.rank, 1):
                raise ValueError(
                    f"Shape must be at least rank {where + 1} but is rank {params_shape.rank}"
                )
            if index_shape.rank is not None:
                dims = params_shape.as_list()
                where %= max(len(dims), 1)
                static = TensorShape(dims[:where] + index_shape.as_list() + dims[where + 1 :])

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            chosen = np.asarray(inputs[1])
            where = int(np.asarray(inputs[2]).reshape(-1)[0])
            if array.ndim == 0:
                raise errors.InvalidArgumentError(
                    None, None, "params must be at least 1 dimensional"
                )
            where %= array.ndim
            _check_indices(chosen, array.shape[where], "")
            return (np.take(array, chosen.astype(np.int64), axis=where),)

        return make_op(
            "GatherV2",
            name,
            [("params", source), ("indices", index_input), ("axis", axis_input)],
            kernel,
            lambda t: [(t[0].dtype, static)],
            {
                "Tparams": dtype_of(source),
                "Tindices": dtype_of(index_input),
                "Taxis": dtype_of(axis_input),
                "batch_dims": 0,
            },
        )


def gathered_rows(value: Any, indices: Any) -> Array:
    """The rows of a variable's ``value`` at ``indices``: what ``ResourceGather`` gives,
    in this process or on the variable's ps task.

    Raises:
        InvalidArgumentError: an index outside ``[0, rows)``.
    """
    array = np.asarray(value)
    chosen = np.asarray(indices)
    _check_indices(chosen, array.shape[0], "")
    return np.take(array, chosen.astype(np.int64), axis=0)


def resource_gather(variable: Any, indices: Any, name: str | None = None) -> Any:
    """``ResourceGather``: rows of a graph Variable at ``indices``, read when run
    (only those rows; the gradient is an IndexedSlices over the variable's shape)."""
    from tf_accum.graph.variables import store_of

    graph = variable.graph
    with graph.as_default():
        index_input = _index_input(indices, "indices")
        dims = variable.shape.as_list() if variable.shape.rank is not None else None
        index_shape = _shape_of(index_input)
        static = (
            TensorShape(index_shape.as_list() + dims[1:])
            if dims is not None and index_shape.rank is not None
            else TensorShape(None)
        )
        dtype = variable.dtype

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            return (gathered_rows(store_of(context).read(inputs[0]), inputs[1]),)

        return make_op(
            "ResourceGather",
            name or "Gather",
            [("resource", variable._handle.outputs[0]), ("indices", index_input)],
            kernel,
            lambda t: [(dtype, static)],
            {"dtype": dtype, "Tindices": dtype_of(index_input), "batch_dims": 0},
        )


def unsorted_segment_sum(
    data: Any, segment_ids: Any, num_segments: Any, name: str | None = None
) -> Any:
    """Sums of the slices of ``data`` with the same segment id, ``num_segments`` of them.

    Raises:
        InvalidArgumentError: an id outside ``[0, num_segments)`` (when run; TensorFlow
            drops negative ids, and so does this).
    """
    with build_in([data, segment_ids, num_segments]):
        source = convert_input(data, param="data")
        ids = _index_input(segment_ids, "segment_ids")
        count = _index_input(num_segments, "num_segments")
        known = _known_dims(count)
        data_shape, ids_shape = _shape_of(source), _shape_of(ids)
        static = TensorShape(None)
        if data_shape.rank is not None and ids_shape.rank is not None:
            rest = data_shape.as_list()[ids_shape.rank :]
            static = TensorShape([known[0] if known else None, *rest])

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            chosen = np.asarray(inputs[1]).astype(np.int64)
            total = int(np.asarray(inputs[2]).reshape(-1)[0])
            if np.any(chosen >= total):
                bad = int(chosen[chosen >= total].flat[0])
                raise errors.InvalidArgumentError(
                    None, None, f"segment_ids[0] = {bad} is out of range [0, {total})"
                )
            rows = array.reshape((chosen.size, *array.shape[chosen.ndim :]))
            flat = chosen.reshape(-1)
            out = np.zeros((total, *rows.shape[1:]), dtype=array.dtype)
            keep = flat >= 0
            np.add.at(out, flat[keep], rows[keep])
            return (out,)

        return make_op(
            "UnsortedSegmentSum",
            name,
            [("data", source), ("segment_ids", ids), ("num_segments", count)],
            kernel,
            lambda t: [(t[0].dtype, static)],
            {"T": dtype_of(source), "Tindices": dtype_of(ids), "Tnumsegments": dtype_of(count)},
        )


def unique(x: Any, out_idx: Any = int32, name: str | None = None) -> list[Any]:
    """``Unique``: the distinct elements of the vector ``x`` in the order they
    first appear, and for each element of ``x`` the position of its value
    among them (an ``out_idx`` vector).

    Raises:
        ValueError: ``x`` of known rank other than 1 (when building).
        InvalidArgumentError: ``x`` not a vector (when run).
    """
    index_dtype = as_dtype(out_idx)
    with build_in([x]):
        source = convert_input(x, param="x")
        static_in = _shape_of(source)

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            if array.ndim != 1:
                raise errors.InvalidArgumentError(None, None, "unique expects a 1D vector.")
            found, first, inverse = np.unique(array, return_index=True, return_inverse=True)
            order = np.argsort(first, kind="stable")
            place = np.empty_like(order)
            place[order] = np.arange(order.size)
            positions = place[inverse.reshape(-1)].astype(index_dtype.numpy_dtype)
            return (found[order].astype(array.dtype), positions)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            if static_in.rank not in (None, 1):
                raise shape_error(f"Shape must be rank 1 but is rank {static_in.rank}", tensors)
            return [
                (tensors[0].dtype, TensorShape([None])),
                (index_dtype, TensorShape([static_in.as_list()[0]] if static_in.rank else None)),
            ]

        made: list[Any] = make_op(
            "Unique",
            name,
            [("x", source)],
            kernel,
            outputs,
            {"T": dtype_of(source), "out_idx": index_dtype},
            many=True,
        )
        return made


def dense_from_slices(value: IndexedSlices, name: str | None = None) -> Any:
    """An IndexedSlices as the dense tensor it stands for (rows at the same index add up).

    Raises:
        ValueError: it has no ``dense_shape``.
    """
    if value.dense_shape is None:
        raise ValueError(
            "Tensor conversion requested for IndexedSlices for argument `value` without "
            f"dense_shape: {value!s}"
        )
    with build_in([value.values, value.indices, value.dense_shape]):
        rows = gather_first(value.dense_shape)
        return unsorted_segment_sum(value.values, value.indices, rows, name=name)


def gather_first(dense_shape: Any) -> Any:
    """``dense_shape[0]``: a constant when the shape is known."""
    known = constant_value(dense_shape)
    if known is not None:
        return int(np.asarray(known).reshape(-1)[0])
    from tf_accum.graph.indexing import strided_slice

    return strided_slice(dense_shape, [0], [1], [1], shrink_axis_mask=1)


def one_hot(
    indices: Any,
    depth: Any,
    on_value: Any = None,
    off_value: Any = None,
    axis: Any = None,
    dtype: Any = None,
    name: str | None = None,
) -> Any:
    """Vectors of length ``depth``, ``on_value`` at each index and ``off_value``
    elsewhere, added as dimension ``axis`` (default: last). An index outside
    ``[0, depth)`` gives a vector of ``off_value``."""
    wanted = as_dtype(dtype) if dtype is not None else None
    with build_in([indices, depth, on_value, off_value]):
        given = [dtype_of(convert_input(v)) for v in (on_value, off_value) if v is not None]
        if len(given) == 2 and given[0] != given[1]:
            raise TypeError(
                f"dtype <dtype: '{given[0].name}'> of on_value does not match dtype "
                f"<dtype: '{given[1].name}'> of off_value"
            )
        if wanted is not None and given and given[0] != wanted:
            raise TypeError(
                f"dtype <dtype: '{given[0].name}'> of on_value does not match dtype parameter "
                f"<dtype: '{wanted.name}'>"
            )
        if wanted is None and given:
            wanted = given[0]
        wanted = wanted or float32
        on = convert_input(1 if on_value is None else on_value, wanted, param="on_value")
        off = convert_input(0 if off_value is None else off_value, wanted, param="off_value")
        index_input = convert_input(indices, param="indices")
        if dtype_of(index_input).name not in ("uint8", "int8", "int32", "int64"):
            if mode.building_graph() is None:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Value for attr 'TI' of {dtype_of(index_input).kernel_name} is not in the "
                    "list of allowed values: uint8, int8, int32, int64",
                )
            raise TypeError(
                f"Value passed to parameter 'indices' has DataType {dtype_of(index_input).name} "
                "not in list of allowed values: uint8, int8, int32, int64"
            )
        depth_input = convert_input(depth, int32, param="depth")
        where = -1 if axis is None else int(axis)
        known_depth = _known_dims(depth_input)
        index_shape = _shape_of(index_input)
        static = TensorShape(None)
        if index_shape.rank is not None:
            dims = index_shape.as_list()
            position = len(dims) if where == -1 else where
            size_known = known_depth[0] if known_depth and known_depth[0] >= 0 else None
            static = TensorShape(dims[:position] + [size_known] + dims[position:])

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            chosen = np.asarray(inputs[0]).astype(np.int64)
            size_ = int(np.asarray(inputs[1]))
            if size_ < 0:
                raise errors.InvalidArgumentError(
                    None, None, f"depth must be non-negative, got: {size_}"
                )
            hot = chosen[..., None] == np.arange(size_)
            result = np.where(hot, np.asarray(inputs[2]), np.asarray(inputs[3]))
            if where != -1:
                result = np.moveaxis(result, -1, where)
            return (result.astype(wanted.numpy_dtype),)

        return make_op(
            "OneHot",
            name or "one_hot",
            [
                ("indices", index_input),
                ("depth", depth_input),
                ("on_value", on),
                ("off_value", off),
            ],
            kernel,
            lambda t: [(wanted, static)],
            {"T": wanted, "TI": dtype_of(index_input), "axis": where},
        )


def tile(input: Any, multiples: Any, name: str | None = None) -> Any:  # noqa: A002
    """``input`` repeated ``multiples[i]`` times along each dimension i.

    Raises:
        ValueError: ``multiples`` of another length than the rank (when known).
        InvalidArgumentError: the same, or a negative multiple (when run).
    """
    with build_in([input, multiples]):
        source = convert_input(input)
        times = _index_input(multiples, "multiples")
        known = _known_dims(times)
        static_in = _shape_of(source)

        def infer(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            static = TensorShape(None) if known is None else TensorShape([None] * len(known))
            if static_in.rank is not None:
                if known is not None and len(known) != static_in.rank:
                    raise shape_error(
                        f"Shape must be rank {static_in.rank} but is rank {len(known)}", tensors
                    )
                dims = static_in.as_list()
                if known is None:
                    static = TensorShape([None] * len(dims))
                else:
                    static = TensorShape(
                        [None if d is None else d * m for d, m in zip(dims, known, strict=True)]
                    )
            return [(tensors[0].dtype, static)]

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            reps = [int(m) for m in np.asarray(inputs[1]).reshape(-1)]
            if len(reps) != array.ndim:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Expected multiples argument to be a vector of length {array.ndim} but "
                    f"got length {len(reps)}",
                )
            if any(m < 0 for m in reps):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Expected multiples[{reps.index(min(reps))}] >= 0, but got {min(reps)}",
                )
            return (np.tile(array, reps) if array.ndim else array.copy(),)

        return make_op(
            "Tile",
            name,
            [("input", source), ("multiples", times)],
            kernel,
            infer,
            {"T": dtype_of(source), "Tmultiples": dtype_of(times)},
        )


def broadcast_to(input: Any, shape: Any, name: str | None = None) -> Any:  # noqa: A002
    """``input`` broadcast to ``shape``.

    Raises:
        InvalidArgumentError: shapes that do not broadcast (when run).
    """
    with build_in([input, shape]):
        source = convert_input(input)
        dims_input = _index_input(shape, "shape")
        known = _known_dims(dims_input)
        static = TensorShape(known) if known is not None else TensorShape(None)

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            wanted = tuple(int(d) for d in np.asarray(inputs[1]).reshape(-1))
            try:
                return (np.array(np.broadcast_to(array, wanted)),)
            except ValueError:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Unable to broadcast tensor of shape {kernel_text(array.shape)} to tensor "
                    f"of shape {kernel_text(wanted)}",
                ) from None

        return make_op(
            "BroadcastTo",
            name,
            [("input", source), ("shape", dims_input)],
            kernel,
            lambda t: [(t[0].dtype, static)],
            {"T": dtype_of(source), "Tidx": dtype_of(dims_input)},
        )


def slice(input_: Any, begin: Any, size: Any, name: str | None = None) -> Any:  # noqa: A001
    """The block of ``input_`` starting at ``begin`` of extent ``size`` (-1: to the end).

    Raises:
        InvalidArgumentError: a block outside the input (when run).
    """
    with build_in([input_, begin, size]):
        source = convert_input(input_, param="input")
        begin_input = _index_input(begin, "begin")
        size_input = convert_input(
            size, dtype_of(begin_input) if not is_symbolic(size) else None, param="size"
        )
        starts, extents = _known_dims(begin_input), _known_dims(size_input)
        static_in = _shape_of(source)
        static = TensorShape(None)
        if extents is not None:
            dims: list[int | None] = []
            for i, extent in enumerate(extents):
                if extent != -1:
                    dims.append(extent)
                elif starts is not None and static_in.rank is not None:
                    full = static_in.as_list()[i]
                    dims.append(None if full is None else full - starts[i])
                else:
                    dims.append(None)
            static = TensorShape(dims)
        elif static_in.rank is not None:
            static = TensorShape([None] * static_in.rank)

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            first = [int(b) for b in np.asarray(inputs[1]).reshape(-1)]
            count = [int(s) for s in np.asarray(inputs[2]).reshape(-1)]
            if len(first) != array.ndim or len(count) != array.ndim:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Expected begin and size arguments to be 1-D tensors of size {array.ndim}, "
                    f"but got shapes [{len(first)}] and [{len(count)}] instead.",
                )
            index = []
            for i, (b, s) in enumerate(zip(first, count, strict=False)):
                end = array.shape[i] if s == -1 else b + s
                if b < 0 or end > array.shape[i] or end < b:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"Expected size[{i}] in [0, {array.shape[i] - b}], but got {s}",
                    )
                index.append(np.s_[b:end])
            return (array[tuple(index)].copy(),)

        return make_op(
            "Slice",
            name,
            [("input", source), ("begin", begin_input), ("size", size_input)],
            kernel,
            lambda t: [(t[0].dtype, static)],
            {"T": dtype_of(source), "Index": dtype_of(begin_input)},
        )


def range_(
    start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None, name: str = "range"
) -> Any:
    """``start, start + delta, ...`` up to (not including) ``limit``; ``range(n)`` is 0..n-1."""
    if limit is None:
        start, limit = 0, start
    with build_in([start, limit, delta]):
        parts = [
            convert_input(v, dtype, param=p)
            for p, v in (("start", start), ("limit", limit), ("delta", delta))
        ]
        kinds = [dtype_of(p) for p in parts]
        order = ["int32", "int64", "float32", "float64"]
        widest = max(kinds, key=lambda k: order.index(k.name) if k.name in order else 0)
        parts = [p if dtype_of(p) == widest else _converted_cast(p, widest) for p in parts]
        known = [constant_value(p) for p in parts]
        static = TensorShape([None])
        if all(k is not None for k in known):
            first, last, step = (np.asarray(k).item() for k in known if k is not None)
            static = TensorShape([len(np.arange(first, last, step))])

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            first, last, step = (np.asarray(v).item() for v in inputs)
            if step == 0:
                raise errors.InvalidArgumentError(None, None, f"Requires delta != 0: {step}")
            return (np.arange(first, last, step, dtype=widest.numpy_dtype),)

        return make_op(
            "Range",
            name,
            [("start", parts[0]), ("limit", parts[1]), ("delta", parts[2])],
            kernel,
            lambda t: [(widest, static)],
            {"Tidx": widest},
        )


def _converted_cast(value: Any, dtype: DType) -> Any:
    if isinstance(value, Converted):
        return Converted(value.array.astype(dtype.numpy_dtype), dtype)
    from tf_accum.graph.ops import cast

    return cast(value, dtype)


def setdiff1d(x: Any, y: Any, index_dtype: Any = int32, name: str | None = None) -> list[Any]:
    """``ListDiff``: the values of ``x`` not in ``y`` (in ``x``'s order) and their positions."""
    wanted = as_dtype(index_dtype)
    with build_in([x, y]):
        first = convert_input(x, param="x")
        second = convert_input(y, None if is_symbolic(y) else dtype_of(first), param="y")

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            values = np.asarray(inputs[0]).reshape(-1)
            keep = ~np.isin(values, np.asarray(inputs[1]).reshape(-1))
            return (values[keep], np.flatnonzero(keep).astype(wanted.numpy_dtype))

        found: list[Any] = make_op(
            "ListDiff",
            name,
            [("x", first), ("y", second)],
            kernel,
            lambda t: [(t[0].dtype, TensorShape([None])), (wanted, TensorShape([None]))],
            {"T": dtype_of(first), "out_idx": wanted},
            many=True,
        )
        return found


def invert_permutation(x: Any, name: str | None = None) -> Any:
    """The inverse of the permutation ``x``: ``y[x[i]] = i``."""
    with build_in([x]):
        source = _index_input(x, "x")

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            perm = np.asarray(inputs[0])
            inverse = np.empty_like(perm)
            inverse[perm] = np.arange(perm.size, dtype=perm.dtype)
            return (inverse,)

        return make_op(
            "InvertPermutation",
            name,
            [("x", source)],
            kernel,
            lambda t: [(t[0].dtype, t[0].shape)],
            {"T": dtype_of(source)},
        )


# --- where ---------------------------------------------------------------------


def where(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Any:
    """TensorFlow 1's ``where``: with ``x`` and ``y``, elements of ``x`` where
    ``condition`` holds and of ``y`` elsewhere (``condition`` of their shape, or a
    vector over their first dimension); alone, the indices where it holds (int64).

    Raises:
        ValueError: only one of ``x`` and ``y``, or shapes that do not fit.
    """
    if x is None and y is None:
        return _where_indices(condition, name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    return _select("Select", condition, x, y, name)


def where_v2(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Any:
    """TensorFlow 2's ``where``: as :func:`where`, the three shapes broadcast together."""
    if x is None and y is None:
        return _where_indices(condition, name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    return _select("SelectV2", condition, x, y, name)


def _where_indices(condition: Any, name: str | None) -> Any:
    with build_in([condition]):
        source = convert_input(condition, param="condition")
        static_in = _shape_of(source)

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            return (np.argwhere(np.asarray(inputs[0])).astype(np.int64),)

        return make_op(
            "Where",
            name,
            [("input", source)],
            kernel,
            lambda t: [(int64, TensorShape([None, static_in.rank]))],
            {"T": dtype_of(source)},
        )


def _select(op_type: str, condition: Any, x: Any, y: Any, name: str | None) -> Any:
    from tf_accum.graph.math_ops import op_def_inputs

    with build_in([condition, x, y]):
        cond = (
            convert_input(condition, bool_, param="condition")
            if not is_symbolic(condition)
            else convert_input(condition)
        )
        if dtype_of(cond) != bool_:
            raise TypeError(
                f"Input 'condition' of '{op_type}' Op has type {dtype_of(cond).name} that does "
                "not match expected type of bool."
            )
        _, (left, right) = op_def_inputs(op_type, [("t", x), ("e", y)], allowed=False)
        shapes = [_shape_of(v) for v in (cond, left, right)]
        if op_type == "Select":
            if not shapes[1].is_compatible_with(shapes[2]):
                raise ValueError(
                    f"Shapes must be equal rank, but are {shapes[1].rank} and {shapes[2].rank}"
                )
            static = shapes[1].merge_with(shapes[2])
        else:
            static = TensorShape(None)

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            c, a, b = (np.asarray(v) for v in inputs)
            if op_type == "Select":
                _check_select(c, a, b)
                if c.ndim == 1 and a.ndim > 1:
                    c = c.reshape((len(c),) + (1,) * (a.ndim - 1))
            else:
                try:
                    np.broadcast_shapes(c.shape, a.shape, b.shape)
                except ValueError:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"Incompatible shapes: {kernel_text(a.shape)} vs. {kernel_text(b.shape)}",
                    ) from None
            return (np.where(c, a, b),)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            if op_type == "Select":
                return [(tensors[1].dtype, static)]
            return [(tensors[1].dtype, _broadcast_all([t.shape for t in tensors], tensors))]

        return make_op(
            op_type,
            name,
            [("condition", cond), ("t", left), ("e", right)],
            kernel,
            outputs,
            {"T": dtype_of(left)},
        )


def _check_select(c: Array, a: Array, b: Array) -> None:
    """TensorFlow 1's ``Select`` shapes: a condition of the branches' shape, a
    scalar, or a vector over their first dimension."""
    if c.shape == a.shape or c.ndim == 0:
        if a.shape != b.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Inputs to operation Select of type Select must have the same size and shape.  "
                f"Input 0: {kernel_text(c.shape)} != input 2: {kernel_text(b.shape)}"
                if c.shape != b.shape
                else "'then' and 'else' must have the same size.  but received: "
                f"{kernel_text(a.shape)} vs. {kernel_text(b.shape)}",
            )
        return
    if c.ndim == 1 and a.ndim > 1:
        if a.shape != b.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                "'then' and 'else' must have the same size.  but received: "
                f"{kernel_text(a.shape)} vs. {kernel_text(b.shape)}",
            )
        if len(c) != a.shape[0]:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Number of batches of 'then' must match size of 'cond', but saw: {a.shape[0]} "
                f"vs. {len(c)}",
            )
        return
    raise errors.InvalidArgumentError(
        None,
        None,
        "Inputs to operation Select of type Select must have the same size and shape.  "
        f"Input 0: {kernel_text(c.shape)} != input 1: {kernel_text(a.shape)}",
    )


def _broadcast_all(shapes: list[TensorShape], tensors: list[Tensor]) -> TensorShape:
    """The static shape of several shapes broadcast together (unknown dimensions kept
    unknown unless another dimension above 1 decides them).

    Raises:
        ValueError: two known dimensions differ and neither is 1.
    """
    if any(s.rank is None for s in shapes):
        return TensorShape(None)
    rank_ = max(s.rank or 0 for s in shapes)
    ones: list[int | None] = [1] * rank_
    padded = [ones[: rank_ - len(s.as_list())] + s.as_list() for s in shapes]
    dims: list[int | None] = []
    for column in zip(*padded, strict=True):
        big = {d for d in column if d is not None and d != 1}
        if len(big) > 1:
            a, b = sorted(big)[:2]
            raise shape_error(f"Dimensions must be equal, but are {a} and {b}", tensors)
        if big:
            dims.append(big.pop())
        elif any(d is None for d in column):
            dims.append(None)
        else:
            dims.append(1)
    return TensorShape(dims)


# --- splitting -----------------------------------------------------------------


def split(
    value: Any,
    num_or_size_splits: Any,
    axis: Any = 0,
    num: int | None = None,
    name: str = "split",
) -> list[Any]:
    """``value`` cut along ``axis`` into ``num_or_size_splits`` equal pieces (an int:
    ``Split``) or pieces of the given sizes (a list, one size may be -1: ``SplitV``).

    Raises:
        ValueError: a length the pieces cannot divide, or sizes that do not add up
            (when known).
        InvalidArgumentError: the same, found when run.
    """
    with build_in([value, axis]):
        source = convert_input(value, param="value")
        axis_input = _index_input(axis, "axis")
        known_axis = _known_dims(axis_input)
        static_in = _shape_of(source)
        if isinstance(num_or_size_splits, (int, np.integer)) and not isinstance(
            num_or_size_splits, bool
        ):
            return _split_even(
                source, axis_input, known_axis, static_in, int(num_or_size_splits), name
            )
        sizes_input = _index_input(num_or_size_splits, "size_splits")
        sizes = _known_dims(sizes_input)
        sizes_shape = _shape_of(sizes_input)
        static_count = sizes_shape.as_list()[0] if sizes_shape.rank == 1 else None
        count = len(sizes) if sizes is not None else num if num is not None else static_count
        if count is None:
            raise ValueError(f"Cannot infer argument `num` from shape {_shape_of(sizes_input)}")
        pieces = count

        def infer(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            dtype = tensors[0].dtype
            if static_in.rank is None or known_axis is None or sizes is None:
                rank_ = static_in.rank
                return [(dtype, TensorShape(None if rank_ is None else [None] * rank_))] * pieces
            where = known_axis[0] % static_in.rank
            dims = static_in.as_list()
            total = dims[where]
            resolved = list(sizes)
            if resolved.count(-1) == 1 and total is not None:
                resolved[resolved.index(-1)] = total - (sum(resolved) + 1)
            if total is not None and -1 not in resolved and sum(resolved) != total:
                raise shape_error(
                    f"can't split axis of size {total} into pieces of size "
                    f"{kernel_text(tuple(sizes))}",
                    tensors,
                )
            return [
                (dtype, TensorShape(dims[:where] + [None if s == -1 else s] + dims[where + 1 :]))
                for s in resolved
            ]

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            wanted = [int(s) for s in np.asarray(inputs[1]).reshape(-1)]
            where = int(np.asarray(inputs[2]).reshape(-1)[0])
            if not -array.ndim <= where < max(array.ndim, 1):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"-input rank(-{array.ndim}) <= split_dim < input rank ({array.ndim}), but "
                    f"got {where}",
                )
            where %= array.ndim
            if wanted.count(-1) == 1:
                wanted[wanted.index(-1)] = array.shape[where] - (sum(wanted) + 1)
            if sum(wanted) != array.shape[where] or any(s < 0 for s in wanted):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    "Determined shape must either match input shape along split_dim exactly if "
                    "fully specified, or be less than the size of the input along split_dim if "
                    f"not fully specified.  Got: {sum(wanted)}",
                )
            cuts = np.cumsum(wanted)[:-1]
            return tuple(np.split(array, cuts, axis=where))

        return make_op(  # type: ignore[no-any-return]
            "SplitV",
            name,
            [("value", source), ("size_splits", sizes_input), ("split_dim", axis_input)],
            kernel,
            infer,
            {"T": dtype_of(source), "Tlen": dtype_of(sizes_input), "num_split": pieces},
            many=True,
        )


def _split_even(
    source: Any,
    axis_input: Any,
    known_axis: list[int] | None,
    static_in: TensorShape,
    count: int,
    name: str,
) -> list[Any]:
    def infer(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
        dtype = tensors[1].dtype
        if static_in.rank is None or known_axis is None:
            rank_ = static_in.rank
            return [(dtype, TensorShape(None if rank_ is None else [None] * rank_))] * count
        where = known_axis[0] % static_in.rank
        dims = static_in.as_list()
        total = dims[where]
        if total is not None and total % count:
            raise shape_error(
                f"Dimension size must be evenly divisible by {count} but is {total}", tensors
            )
        piece = None if total is None else total // count
        return [(dtype, TensorShape(dims[:where] + [piece] + dims[where + 1 :]))] * count

    def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
        where = int(np.asarray(inputs[0]).reshape(-1)[0])
        array = np.asarray(inputs[1])
        if not -array.ndim <= where < max(array.ndim, 1):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"-input rank(-{array.ndim}) <= split_dim < input rank ({array.ndim}), but got "
                f"{where}",
            )
        where %= array.ndim
        if array.shape[where] % count:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Number of ways to split should evenly divide the split dimension, but got "
                f"split_dim {where} (size = {array.shape[where]}) and num_split {count}",
            )
        return tuple(np.split(array, count, axis=where))

    found: list[Any] = make_op(
        "Split",
        name,
        [("split_dim", axis_input), ("value", source)],
        kernel,
        infer,
        {"T": dtype_of(source), "num_split": count},
        many=True,
    )
    return found
