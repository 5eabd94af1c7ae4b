"""``embedding_lookup`` and ``dropout``: the ``tf.nn`` functions built on a
gather and on random numbers.

``embedding_lookup`` gathers rows as ``gather`` does (``ResourceGather`` on a
Variable's handle, ``GatherV2`` of a tensor), so its gradient reaches
``params`` as an ``IndexedSlices`` of the looked-up rows.

Differs from TensorFlow: the unsupported cases, see docs/departures.md T22.
"""

from __future__ import annotations

import contextlib
import numbers
from typing import Any

import numpy as np

from tf_accum.graph import array_ops, mode
from tf_accum.graph.array_ops import where_v2
from tf_accum.graph.elementwise_ops import greater_equal
from tf_accum.graph.graph import is_symbolic
from tf_accum.graph.math_ops import Converted, building_in, graph_of
from tf_accum.graph.op_building import convert_input, dtype_of
from tf_accum.graph.ops import as_tensor, constant, identity
from tf_accum.graph.tensor_shape import TensorShape


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
            return array_ops.gather(params, ids)
        with graph.name_scope(name or "embedding_lookup") as scope:
            rows = array_ops.gather(params, ids, name=scope)
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
        dtype = as_tensor(source).dtype if is_symbolic(source) else dtype_of(convert_input(source))
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
        mask = greater_equal(draws, rate)
        zero = constant(np.asarray(0, dtype.numpy_dtype))
        result = where_v2(mask, kept, zero)
        if is_symbolic(result):
            result.set_shape(as_tensor(source).shape)
        return result


def operand_value(x: Any) -> Any:
    value = convert_input(x)
    return value.array if isinstance(value, Converted) else value


def _noise_shape(x: Any, noise_shape: Any) -> Any:
    static = as_tensor(x).shape if is_symbolic(x) else TensorShape(np.shape(x))
    if noise_shape is None:
        if not static.is_fully_defined():
            return array_ops.shape(x)  # read when the op runs
        return static.as_list()
    if is_symbolic(noise_shape):
        return noise_shape
    dims = list(noise_shape)
    if static.rank is not None and len(dims) == static.rank:
        dims = [d if d is not None else s for d, s in zip(dims, static.as_list(), strict=True)]
    return dims
