"""``embedding_lookup`` and ``dropout``: the ``tf.nn`` functions built on a
gather and on random numbers.

``embedding_lookup`` gathers rows with a ``GatherV2`` op (on the variable's
value for a Variable; TensorFlow uses ``ResourceGather`` on its handle), so
its gradient reaches ``params`` as an ``IndexedSlices`` of the looked-up rows.

Differs from TensorFlow: the gather and the unsupported cases, see
docs/departures.md T22.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, int32
from tf_accum.graph import mode
from tf_accum.graph import nn_elementwise as ew
from tf_accum.graph.build_op import as_input, build, operand, refuse_dtype
from tf_accum.graph.graph import Tensor, is_symbolic
from tf_accum.graph.math_ops import Converted, building_in, graph_of
from tf_accum.graph.ops import as_tensor, constant, identity
from tf_accum.graph.tensor_shape import TensorShape


def gather(params: Any, indices: Any, name: str | None = None) -> Any:
    """``GatherV2`` along axis 0: the rows of ``params`` at ``indices`` (any shape).

    Raises:
        TypeError: indices that are not int16, int32 or int64.
        InvalidArgumentError: an index outside ``[0, rows)`` (when run).
    """
    with building_in(graph_of([params, indices])):
        source = as_input(operand(params))
        index_input = as_input(indices)
        index_dtype = _dtype_of(index_input)
        refuse_dtype("GatherV2", "indices", index_dtype, ("int16", "int32", "int64"))
        axis = Converted(np.asarray(0, np.int32), int32)

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            table, rows = np.asarray(arrays[0]), np.asarray(arrays[1])
            if table.ndim == 0:
                raise errors.InvalidArgumentError(
                    None, None, "Expected axis in the range [0, 0), but got 0"
                )
            bad = (rows < 0) | (rows >= table.shape[0])
            if np.any(bad):
                where = int(np.flatnonzero(bad.reshape(-1))[0])
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"indices[{where}] = {int(rows.reshape(-1)[where])} is not in "
                    f"[0, {table.shape[0]})",
                )
            return (np.take(table, rows, axis=0),)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            table, rows = tensors[0].shape, tensors[1].shape
            if table.rank is None or rows.rank is None:
                return [(tensors[0].dtype, TensorShape(None))]
            return [(tensors[0].dtype, TensorShape([*rows.as_list(), *table.as_list()[1:]]))]

        attrs = {
            "Tparams": _dtype_of(source),
            "Tindices": index_dtype,
            "Taxis": int32,
            "batch_dims": 0,
        }
        pairs = [("params", source), ("indices", index_input), ("axis", axis)]
        return build("GatherV2", name, pairs, outputs, kernel, attrs)


def _dtype_of(value: Any) -> DType:
    return value.dtype if isinstance(value, Converted) else as_tensor(value).dtype


def embedding_lookup(
    params: Any,
    ids: Any,
    partition_strategy: str = "mod",
    name: str | None = None,
    validate_indices: bool = True,
    max_norm: Any = None,
) -> Any:
    """The rows of ``params`` (a tensor or Variable, or a list of one) at ``ids``.

    Raises:
        ValueError: an empty list of params.
        NotImplementedError: params split over several tensors, or ``max_norm``.
    """
    if isinstance(params, (list, tuple)):
        if not params:
            raise ValueError("Need at least one param")
        if len(params) > 1:
            raise NotImplementedError("embedding_lookup over several partitions of params")
        params = params[0]
    if max_norm is not None:
        raise NotImplementedError("embedding_lookup with max_norm")
    with building_in(graph_of([params, ids])):
        graph = mode.building_graph()
        if graph is None:
            return gather(params, ids)
        with graph.name_scope(name or "embedding_lookup") as scope:
            rows = gather(params, ids, name=scope)
        return identity(rows)


def dropout(
    x: Any,
    keep_prob: Any = None,
    noise_shape: Any = None,
    seed: Any = None,
    name: str | None = None,
    rate: Any = None,
) -> Any:
    """``x / (1 - rate)`` where a uniform draw is at least ``rate``, else 0
    (TensorFlow 1 also takes ``keep_prob = 1 - rate``). ``noise_shape`` (default
    ``x``'s shape) broadcasts one draw over several elements.

    Raises:
        ValueError: both or neither of ``rate`` and ``keep_prob``; a rate
            outside [0, 1); ``x`` not floating point.
    """
    from tf_accum.graph.random_ops import random_uniform
    from tf_accum.graph.random_seed import get_seed

    if keep_prob is not None:
        if rate is not None:
            raise ValueError("Cannot specify both 'rate' and 'keep_prob'.")
        try:
            rate = 1.0 - keep_prob
        except TypeError:
            raise ValueError(
                "`keep_prob` must be a floating point number or Tensor. Received: "
                f"keep_prob={keep_prob}"
            ) from None
    if rate is None:
        raise ValueError(f"`rate` must be provided. Received: rate={rate}")
    is_number = isinstance(rate, numbers.Real)
    if is_number and not 0 <= rate < 1:
        raise ValueError(
            f"`rate` must be a scalar tensor or a float in the range [0, 1). Received: rate={rate}"
        )
    with building_in(graph_of([x, rate])), contextlib.ExitStack() as scope:
        graph = mode.building_graph()
        if graph is not None:
            scope.enter_context(graph.name_scope(name or "dropout"))
        source = x if is_symbolic(x) else constant(operand_value(x), name="x")
        dtype = as_tensor(source).dtype if is_symbolic(source) else _dtype_of(as_input(source))
        if not dtype.is_floating:
            raise ValueError(
                "`x.dtype` must be a floating point tensor as `x` will be scaled. Received: "
                f"x_dtype={dtype!r}"
            )
        if is_number and rate == 0:
            get_seed(seed)  # the seed counter moves on as if the draw happened
            return source
        if is_number:
            scale = constant(np.asarray(1 / (1 - rate)).astype(dtype.numpy_dtype))
            kept = source * scale
        else:
            rate_t = as_tensor(rate)
            if rate_t.dtype != dtype:
                from tf_accum.graph.ops import cast

                rate_t = cast(rate_t, dtype, name="rate")
            one = constant(np.asarray(1, dtype.numpy_dtype))
            kept = source / (one - rate_t)
        shape = _noise_shape(source, noise_shape)
        draws = random_uniform(shape, dtype=dtype, seed=seed)
        mask = ew.greater_equal(draws, rate)
        zero = constant(np.asarray(0, dtype.numpy_dtype))
        result = ew.select_v2(mask, kept, zero)
        if is_symbolic(result):
            result.set_shape(as_tensor(source).shape)
        return result


def operand_value(x: Any) -> Any:
    value = as_input(operand(x))
    return value.array if isinstance(value, Converted) else value


def _noise_shape(x: Any, noise_shape: Any) -> Any:
    static = as_tensor(x).shape if is_symbolic(x) else TensorShape(np.shape(x))
    if noise_shape is None:
        if not static.is_fully_defined():
            return ew.shape(x)  # read when the op runs
        return static.as_list()
    if is_symbolic(noise_shape):
        return noise_shape
    dims = list(noise_shape)
    if static.rank is not None and len(dims) == static.rank:
        dims = [d if d is not None else s for d, s in zip(dims, static.as_list(), strict=True)]
    return dims
