"""``pad``, ``reverse``, ``cumsum``, ``boolean_mask`` and ``sequence_mask``, with
TensorFlow's op types (``Pad``, ``PadV2``, ``MirrorPad``, ``ReverseV2``, ``Cumsum``;
the masks are built from other ops, as TensorFlow builds them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, as_dtype, int32
from tf_accum.dtypes import bool as bool_
from tf_accum.graph.array_ops import (
    _index_input,
    _known_dims,
    _shape_of,
    concat,
    expand_dims,
    gather,
    range_,
    reshape,
    shape,
    squeeze,
    where,
)
from tf_accum.graph.graph import Tensor
from tf_accum.graph.op_building import (
    build_in,
    constant_value,
    convert_input,
    dtype_of,
    make_op,
    shape_error,
)
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.shapes import kernel_text

Array = np.ndarray[Any, Any]
_MIRROR = {"REFLECT": "reflect", "SYMMETRIC": "symmetric"}


def _checked_paddings(paddings: Array, ndim: int) -> list[tuple[int, int]]:
    if paddings.shape != (ndim, 2):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"The first dimension of paddings must be the rank of inputs{kernel_text((ndim, 2))}"
            f", but got {kernel_text(paddings.shape)}",
        )
    pairs = [(int(a), int(b)) for a, b in paddings]
    if any(a < 0 or b < 0 for a, b in pairs):
        raise errors.InvalidArgumentError(None, None, "Paddings must be non-negative")
    return pairs


def pad(
    tensor: Any,
    paddings: Any,
    mode: str = "CONSTANT",
    name: str | None = None,
    constant_values: Any = 0,
) -> Any:
    """``tensor`` with ``paddings[i] = [before, after]`` elements added around
    dimension i: ``constant_values`` (CONSTANT), or the tensor mirrored (REFLECT
    leaves the edge out, SYMMETRIC repeats it).

    Raises:
        ValueError: an unknown mode, or paddings that do not fit the rank (when known).
        InvalidArgumentError: the same, or negative paddings (when run).
    """
    wanted = str(mode).upper()
    if wanted not in ("CONSTANT", "REFLECT", "SYMMETRIC"):
        raise ValueError(
            'Value of argument `mode` expected to be one of "CONSTANT", "REFLECT", or '
            f'"SYMMETRIC". Received `mode` = {wanted}'
        )
    with build_in([tensor, paddings, constant_values]):
        source = convert_input(tensor, param="tensor")
        pads = _index_input(paddings, "paddings")
        known = constant_value(pads)
        static_in = _shape_of(source)

        def infer(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            pairs = np.asarray(known).reshape(-1, 2) if known is not None else None
            if static_in.rank is None or pairs is None:
                rank_ = static_in.rank if pairs is None else len(pairs)
                return [(tensors[0].dtype, TensorShape(None if rank_ is None else [None] * rank_))]
            if len(pairs) != static_in.rank:
                raise shape_error(
                    f"Shape must be rank {len(pairs)} but is rank {static_in.rank}", tensors
                )
            dims = [
                None if d is None else d + int(a) + int(b)
                for d, (a, b) in zip(static_in.as_list(), pairs, strict=True)
            ]
            return [(tensors[0].dtype, TensorShape(dims))]

        if wanted != "CONSTANT":
            numpy_mode = _MIRROR[wanted]

            def mirror(context: Any, inputs: list[Any]) -> Sequence[Any]:
                array = np.asarray(inputs[0])
                pairs = _checked_paddings(np.asarray(inputs[1]), array.ndim)
                offset = 1 if numpy_mode == "reflect" else 0
                for i, (a, b) in enumerate(pairs):
                    if a > array.shape[i] - offset or b > array.shape[i] - offset:
                        raise errors.InvalidArgumentError(
                            None,
                            None,
                            f"paddings must be no greater than the dimension size: {a}, {b} "
                            f"greater than {array.shape[i] - offset}",
                        )
                mirrored: Array = np.pad(array, pairs, mode=numpy_mode)  # type: ignore[call-overload]
                return (mirrored,)

            return make_op(
                "MirrorPad",
                name,
                [("input", source), ("paddings", pads)],
                mirror,
                infer,
                {"T": dtype_of(source), "Tpaddings": dtype_of(pads), "mode": wanted},
            )
        zero = isinstance(constant_values, (int, float)) and constant_values == 0
        fill_value = None if zero else convert_input(constant_values, dtype_of(source))

        def constant_pad(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            pairs = _checked_paddings(np.asarray(inputs[1]), array.ndim)
            value = np.asarray(inputs[2]) if len(inputs) > 2 else np.zeros((), array.dtype)
            if value.ndim:
                raise errors.InvalidArgumentError(
                    None, None, f"constant_values must be a scalar. Got: {kernel_text(value.shape)}"
                )
            return (np.pad(array, pairs, mode="constant", constant_values=value),)

        inputs: list[tuple[str, Any]] = [("input", source), ("paddings", pads)]
        if fill_value is not None:
            inputs.append(("constant_values", fill_value))
        return make_op(
            "Pad" if fill_value is None else "PadV2",
            name,
            inputs,
            constant_pad,
            infer,
            {"T": dtype_of(source), "Tpaddings": dtype_of(pads)},
        )


def mirror_pad_grad(grad: Any, paddings: Any, mode: str, name: str | None = None) -> Any:
    """``MirrorPadGrad``: each element of the padded tensor's gradient added back to
    the element it copied."""
    numpy_mode = _MIRROR[mode]

    def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
        incoming = np.asarray(inputs[0])
        pairs = [(int(a), int(b)) for a, b in np.asarray(inputs[1])]
        dims = [d - a - b for d, (a, b) in zip(incoming.shape, pairs, strict=True)]
        indices = np.arange(int(np.prod(dims))).reshape(dims)
        positions: Array = np.pad(indices, pairs, mode=numpy_mode)  # type: ignore[call-overload]
        out = np.zeros(int(np.prod(dims)), incoming.dtype)
        np.add.at(out, positions.reshape(-1), incoming.reshape(-1))
        return (out.reshape(dims),)

    with build_in([grad, paddings]):
        source = convert_input(grad)
        pads = convert_input(paddings)
        return make_op(
            "MirrorPadGrad",
            name,
            [("input", source), ("paddings", pads)],
            kernel,
            lambda t: [(t[0].dtype, TensorShape(None))],
            {"T": dtype_of(source), "Tpaddings": dtype_of(pads), "mode": mode},
        )


def reverse(tensor: Any, axis: Any, name: str | None = None) -> Any:
    """``tensor`` with the order of its elements along each of ``axis`` reversed.

    Raises:
        InvalidArgumentError: an axis outside the rank, or repeated (when run).
    """
    with build_in([tensor, axis]):
        source = convert_input(tensor, param="tensor")
        axes = _index_input(axis, "axis")
        known = _known_dims(axes)

        def infer(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            rank_ = tensors[0].shape.rank
            if known is not None and rank_ is not None:
                for i, a in enumerate(known):
                    if not -rank_ <= a < rank_:
                        raise shape_error(
                            f"'axis'[{i}] = {a} is out of valid range [0, {rank_ - 1}", tensors
                        )
            return [(tensors[0].dtype, tensors[0].shape)]

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            chosen = [int(a) for a in np.asarray(inputs[1]).reshape(-1)]
            for a in chosen:
                if not -array.ndim <= a < max(array.ndim, 1):
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"'axis'[{chosen.index(a)}] = {a} is out of valid range [0, "
                        f"{array.ndim - 1}",
                    )
            return (np.flip(array, axis=tuple(a % array.ndim for a in chosen)).copy(),)

        return make_op(
            "ReverseV2",
            name,
            [("tensor", source), ("axis", axes)],
            kernel,
            infer,
            {"T": dtype_of(source), "Tidx": dtype_of(axes)},
        )


def cumsum(
    x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False, name: str | None = None
) -> Any:
    """The running sums of ``x`` along ``axis`` (``exclusive``: of the elements
    before each; ``reverse``: from the end)."""
    with build_in([x, axis]):
        source = convert_input(x, param="x")
        axis_input = _index_input(axis, "axis")
        backwards = reverse

        def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
            array = np.asarray(inputs[0])
            where = int(np.asarray(inputs[1]).reshape(-1)[0])
            if not -array.ndim <= where < max(array.ndim, 1):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"ScanOp: Expected scan axis in the range [{-array.ndim}, {array.ndim}), but "
                    f"got {where}",
                )
            work = np.flip(array, where) if backwards else array
            out = np.cumsum(work, axis=where, dtype=array.dtype)
            if exclusive:
                out = (
                    np.concatenate(
                        [np.zeros_like(np.take(work, [0], axis=where)), np.delete(out, -1, where)],
                        axis=where,
                    )
                    if work.shape[where]
                    else out
                )
            return ((np.flip(out, where) if backwards else out).copy(),)

        return make_op(
            "Cumsum",
            name,
            [("x", source), ("axis", axis_input)],
            kernel,
            lambda t: [(t[0].dtype, t[0].shape)],
            {
                "T": dtype_of(source),
                "Tidx": dtype_of(axis_input),
                "exclusive": exclusive,
                "reverse": reverse,
            },
        )


def boolean_mask(tensor: Any, mask: Any, name: str = "boolean_mask", axis: Any = None) -> Any:
    """The slices of ``tensor`` where ``mask`` (a bool tensor of its leading shape,
    from ``axis``) holds, flattened into one dimension.

    Raises:
        ValueError: a mask of unknown or zero rank, or one longer than the tensor's rank.
    """
    with build_in([tensor, mask]):
        source = convert_input(tensor, param="tensor")
        chosen = convert_input(mask, None if _is_tensor(mask) else bool_, param="mask")
        mask_shape = _shape_of(chosen)
        if mask_shape.rank is None:
            raise ValueError(
                "Number of mask dimensions must be specified, even if some dimensions"
                " are None.  E.g. shape=[None] is ok, but shape=None is not."
            )
        if mask_shape.rank == 0:
            raise ValueError("mask cannot be scalar.")
        start = 0 if axis is None else int(axis)
        dims_mask = mask_shape.rank
        tensor_shape = _shape_of(source)
        if tensor_shape.rank is not None:
            covered = TensorShape(tensor_shape.as_list()[start : start + dims_mask])
            if not covered.is_compatible_with(mask_shape):
                raise ValueError(f"Shapes {covered} and {mask_shape} are incompatible")
        whole = shape(source)
        leading = mask_shape.num_elements() if mask_shape.is_fully_defined() else -1
        from tf_accum.graph.indexing import strided_slice

        before: Any = strided_slice(whole, [0], [start], [1]) if start else np.zeros((0,), np.int32)
        after = strided_slice(whole, [start + dims_mask], [0], [1], end_mask=1)
        flat = reshape(source, concat([before, np.asarray([leading], np.int32), after], 0))
        positions = squeeze(where(reshape(chosen, [-1])), axis=[1])
        found = gather(flat, positions, axis=start, name=name)
        if tensor_shape.rank is not None and hasattr(found, "set_shape"):
            dims = tensor_shape.as_list()
            found.set_shape(dims[:start] + [None] + dims[start + dims_mask :])
        return found


def _is_tensor(value: Any) -> bool:
    from tf_accum.graph.graph import is_symbolic

    return is_symbolic(value)


def sequence_mask(
    lengths: Any, maxlen: Any = None, dtype: Any = bool_, name: str | None = None
) -> Any:
    """``mask[i, j] = j < lengths[i]``, for j below ``maxlen`` (default: the longest)."""
    from tf_accum.graph.elementwise_ops import less
    from tf_accum.graph.ops import cast
    from tf_accum.graph.reduce_ops import reduce_max

    wanted = as_dtype(dtype)
    with build_in([lengths, maxlen]):
        counts = convert_input(lengths, param="lengths")
        longest = reduce_max(counts) if maxlen is None else maxlen
        steps = (
            range_(convert_input(0, dtype_of(counts)), longest, 1)
            if maxlen is None
            else (range_(0, longest, 1))
        )
        matrix = cast(
            expand_dims(counts, -1), dtype_of(steps) if not isinstance(steps, np.ndarray) else int32
        )
        result = less(steps, matrix)
        return result if wanted == bool_ else cast(result, wanted, name=name)
