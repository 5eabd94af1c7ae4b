"""Tensor indexing: ``t[i]``, ``t[:, 1:3]``, ``t[..., ::-1, tf.newaxis]`` as ``StridedSlice``.

An index becomes TensorFlow's strided-slice spec: begin, end and strides
vectors (packed when an index is a tensor) and the bit masks saying which
begins and ends are absent, which dimension is an ellipsis, a new axis, or
an integer that removes its dimension. Slices clamp to the dimension as
Python's do; an integer out of range is InvalidArgumentError when run.
The gradient of a slice, ``StridedSliceGrad``, writes the incoming gradient
into zeros of the input's shape at the same places.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import int32
from tf_accum.graph.graph import is_symbolic
from tf_accum.graph.op_building import (
    Converted,
    build_in,
    constant_value,
    convert_input,
    dtype_of,
    make_op,
    shape_error,
)
from tf_accum.graph.tensor_shape import TensorShape

Array = np.ndarray[Any, Any]
MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def _bit(mask: int, i: int) -> bool:
    return bool(mask >> i & 1)


def _actions(ndim: int, count: int, masks: dict[str, int]) -> list[tuple[str, int, int]]:
    """For each spec entry: (kind, entry, input dimension), kind one of
    ``slice``, ``index``, ``new``, ``all`` (dimensions an ellipsis covers or the
    spec leaves out)."""
    consumed = sum(
        1
        for i in range(count)
        if not _bit(masks["new_axis_mask"], i) and not _bit(masks["ellipsis_mask"], i)
    )
    plan: list[tuple[str, int, int]] = []
    dim = 0
    seen_ellipsis = False
    for i in range(count):
        if _bit(masks["ellipsis_mask"], i) and not seen_ellipsis:
            seen_ellipsis = True
            for _ in range(max(ndim - consumed, 0)):
                plan.append(("all", -1, dim))
                dim += 1
        elif _bit(masks["new_axis_mask"], i):
            plan.append(("new", i, -1))
        elif _bit(masks["shrink_axis_mask"], i):
            plan.append(("index", i, dim))
            dim += 1
        else:
            plan.append(("slice", i, dim))
            dim += 1
    while dim < ndim:
        plan.append(("all", -1, dim))
        dim += 1
    return plan


def numpy_index(
    shape: Sequence[int], begin: Array, end: Array, strides: Array, masks: dict[str, int]
) -> tuple[Any, ...]:
    """The numpy index a strided-slice spec stands for, checked against ``shape``.

    Raises:
        InvalidArgumentError: a zero stride, or an integer index out of range.
    """
    index: list[Any] = []
    for kind, i, dim in _actions(len(shape), len(begin), masks):
        if kind in ("index", "slice") and dim >= len(shape):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Index out of range using input dim {dim}; input has only {len(shape)} dims",
            )
        if kind == "all":
            index.append(builtins.slice(None))
        elif kind == "new":
            index.append(None)
        elif kind == "index":
            position = int(begin[i])
            if not -shape[dim] <= position < shape[dim]:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"slice index {position} of dimension {dim} out of bounds.",
                )
            index.append(position)
        else:
            step = int(strides[i])
            if step == 0:
                raise errors.InvalidArgumentError(None, None, f"strides[{i}] must be non-zero")
            start = None if _bit(masks["begin_mask"], i) else int(begin[i])
            stop = None if _bit(masks["end_mask"], i) else int(end[i])
            index.append(builtins.slice(start, stop, step))
    if len([k for k in index if k is not None]) > len(shape):
        raise errors.InvalidArgumentError(
            None, None, f"Index out of range using input dim {len(shape)}"
        )
    return tuple(index)


def _static(
    source: TensorShape,
    begin: Array | None,
    end: Array | None,
    strides: Array | None,
    count: int | None,
    masks: dict[str, int],
    tensors: list[Any],
) -> TensorShape:
    if source.rank is None or count is None:
        return TensorShape(None)
    dims = source.as_list()
    out: list[int | None] = []
    for kind, i, dim in _actions(len(dims), count, masks):
        if kind == "all":
            out.append(dims[dim] if dim < len(dims) else None)
        elif kind == "new":
            out.append(1)
        elif kind == "index":
            if dim >= len(dims):
                raise shape_error(
                    f"Index out of range using input dim {dim}; input has only {len(dims)} dims",
                    tensors,
                )
            if begin is not None and dims[dim] is not None:
                position = int(begin[i])
                if not -dims[dim] <= position < dims[dim]:  # type: ignore[operator]
                    raise shape_error(
                        f"slice index {position} of dimension {dim} out of bounds.", tensors
                    )
        else:
            if dim >= len(dims):
                raise shape_error(
                    f"Index out of range using input dim {dim}; input has only {len(dims)} dims",
                    tensors,
                )
            size = dims[dim]
            if size is None or begin is None or end is None or strides is None:
                out.append(None)
                continue
            start = None if _bit(masks["begin_mask"], i) else int(begin[i])
            stop = None if _bit(masks["end_mask"], i) else int(end[i])
            out.append(len(range(size)[builtins.slice(start, stop, int(strides[i]) or 1)]))
    return TensorShape(out)


def strided_slice(
    input_: Any,
    begin: Any,
    end: Any,
    strides: Any = None,
    begin_mask: int = 0,
    end_mask: int = 0,
    ellipsis_mask: int = 0,
    new_axis_mask: int = 0,
    shrink_axis_mask: int = 0,
    var: Any = None,
    name: str | None = None,
) -> Any:
    """The strided slice of ``input_`` given by begin, end, strides and the masks
    (see the module's docstring)."""
    from tf_accum.graph.array_ops import _index_input

    masks = {
        "begin_mask": begin_mask,
        "end_mask": end_mask,
        "ellipsis_mask": ellipsis_mask,
        "new_axis_mask": new_axis_mask,
        "shrink_axis_mask": shrink_axis_mask,
    }
    if strides is None:
        strides = [1] * (len(begin) if isinstance(begin, (list, tuple)) else 1)
    with build_in([input_, begin, end, strides]):
        source = convert_input(input_, param="input")
        begin_input = _index_input(begin, "begin")
        end_input = _index_input(end, "end")
        strides_input = _index_input(strides, "strides")
        known = [constant_value(v) for v in (begin_input, end_input, strides_input)]
        count_shape = begin_input.shape if not isinstance(begin_input, Converted) else None
        count = (
            len(np.asarray(known[0]).reshape(-1))
            if known[0] is not None
            else (
                count_shape.as_list()[0]
                if count_shape is not None and count_shape.rank == 1
                else None
            )
        )
        source_shape = (
            TensorShape(source.array.shape) if isinstance(source, Converted) else source.shape
        )

        def infer(tensors: list[Any]) -> list[tuple[Any, TensorShape]]:
            static = _static(
                source_shape,
                None if known[0] is None else np.asarray(known[0]).reshape(-1),
                None if known[1] is None else np.asarray(known[1]).reshape(-1),
                None if known[2] is None else np.asarray(known[2]).reshape(-1),
                count,
                masks,
                tensors,
            )
            return [(tensors[0].dtype, static)]

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            spec = [np.asarray(v).reshape(-1) for v in inputs[1:]]
            index = numpy_index(array.shape, spec[0], spec[1], spec[2], masks)
            return (np.array(array[index]),)

        return make_op(
            "StridedSlice",
            name or "strided_slice",
            [
                ("input", source),
                ("begin", begin_input),
                ("end", end_input),
                ("strides", strides_input),
            ],
            kernel,
            infer,
            {"Index": dtype_of(begin_input), "T": dtype_of(source), **masks},
        )


def strided_slice_grad(
    shape: Any,
    begin: Any,
    end: Any,
    strides: Any,
    dy: Any,
    masks: dict[str, int],
    name: str | None = None,
) -> Any:
    """Zeros of ``shape`` with ``dy`` written where the strided slice took its values."""
    with build_in([shape, begin, end, strides, dy]):
        inputs = [convert_input(v) for v in (shape, begin, end, strides, dy)]
        known_shape = constant_value(inputs[0])
        static = (
            TensorShape([int(d) for d in np.asarray(known_shape).reshape(-1)])
            if known_shape is not None
            else TensorShape(None)
        )

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            dims = [int(d) for d in np.asarray(arrays[0]).reshape(-1)]
            spec = [np.asarray(v).reshape(-1) for v in arrays[1:4]]
            grad = np.asarray(arrays[4])
            out = np.zeros(dims, dtype=grad.dtype)
            out[numpy_index(dims, spec[0], spec[1], spec[2], masks)] = grad
            return (out,)

        return make_op(
            "StridedSliceGrad",
            name,
            [
                ("shape", inputs[0]),
                ("begin", inputs[1]),
                ("end", inputs[2]),
                ("strides", inputs[3]),
                ("dy", inputs[4]),
            ],
            kernel,
            lambda t: [(t[4].dtype, static)],
            {"T": dtype_of(inputs[4]), "Index": dtype_of(inputs[1]), **masks},
        )


def getitem(tensor: Any, key: Any) -> Any:
    """``tensor[key]``: integers, slices, ``...`` and ``None`` (tf.newaxis), any
    index a scalar int tensor; a StridedSlice op (numpy arrays eagerly).

    Raises:
        TypeError: an index of another kind (float, string, list).
        ValueError: more than one ellipsis is fine in numpy, not here.
    """
    if not isinstance(key, tuple):
        key = (key,)
    begin: list[Any] = []
    end: list[Any] = []
    strides: list[Any] = []
    masks = dict.fromkeys(MASKS, 0)
    for i, item in enumerate(key):
        if isinstance(item, builtins.slice):
            for part in (item.start, item.stop, item.step):
                _check_index(part, allow_none=True)
            if item.start is None:
                masks["begin_mask"] |= 1 << i
            if item.stop is None:
                masks["end_mask"] |= 1 << i
            begin.append(0 if item.start is None else item.start)
            end.append(0 if item.stop is None else item.stop)
            strides.append(1 if item.step is None else item.step)
        elif item is Ellipsis:
            masks["ellipsis_mask"] |= 1 << i
            begin.append(0)
            end.append(0)
            strides.append(1)
        elif item is None:
            masks["new_axis_mask"] |= 1 << i
            begin.append(0)
            end.append(0)
            strides.append(1)
        else:
            _check_index(item, allow_none=False)
            masks["shrink_axis_mask"] |= 1 << i
            begin.append(item)
            end.append(item + 1 if not is_symbolic(item) else item + 1)
            strides.append(1)
    return strided_slice_with_masks(tensor, _pack(begin), _pack(end), _pack(strides), masks)


def strided_slice_with_masks(
    input_: Any, begin: Any, end: Any, strides: Any, masks: dict[str, int]
) -> Any:
    """:func:`strided_slice` with its masks given as a dict (keys: ``MASKS``)."""
    return strided_slice(
        input_,
        begin,
        end,
        strides,
        begin_mask=masks["begin_mask"],
        end_mask=masks["end_mask"],
        ellipsis_mask=masks["ellipsis_mask"],
        new_axis_mask=masks["new_axis_mask"],
        shrink_axis_mask=masks["shrink_axis_mask"],
    )


def _pack(items: list[Any]) -> Any:
    if any(is_symbolic(item) for item in items):
        from tf_accum.graph.array_ops import stack

        dtypes = {item.dtype for item in items if is_symbolic(item)}
        wanted = dtypes.pop() if len(dtypes) == 1 else int32
        return stack(
            [item if is_symbolic(item) else np.asarray(item, wanted.numpy_dtype) for item in items]
        )
    if any(int(item) > 2**31 - 1 or int(item) < -(2**31) for item in items):
        return np.asarray(items, np.int64)
    return np.asarray(items, np.int32)


def _check_index(item: Any, allow_none: bool) -> None:
    if item is None and allow_none:
        return
    if is_symbolic(item):
        if item.dtype.name not in ("int32", "int64"):
            raise TypeError(
                "Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
                f"tf.int32/tf.int64 tensors are valid indices, got {item!r}"
            )
        return
    if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
        raise TypeError(
            "Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
            f"tf.int32/tf.int64 tensors are valid indices, got {item!r}"
        )
