"""``clip_by_value``, ``clip_by_norm``, ``global_norm`` and ``clip_by_global_norm``,
built from the ops TensorFlow builds them from (``Minimum``/``Maximum``,
``L2Loss``, ``Pack``, ``Sqrt``, ``SelectV2``), so their gradients are those
ops' gradients. An ``IndexedSlices`` is clipped in its values and keeps its
indices; ``None`` entries of a list stay ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum.graph import mode
from tf_accum.graph.array_ops import stack, where_v2
from tf_accum.graph.elementwise_ops import greater, maximum, minimum, sqrt
from tf_accum.graph.graph import Tensor, is_symbolic
from tf_accum.graph.math_ops import building_in, graph_of
from tf_accum.graph.nn_ops import l2_loss, operand_array
from tf_accum.graph.ops import as_tensor, constant, identity
from tf_accum.graph.reduce_ops import reduce_sum
from tf_accum.indexed_slices import IndexedSlices

Array = np.ndarray[Any, Any]


def _values_of(t: Any) -> Any:
    return t.values if isinstance(t, IndexedSlices) else t


def _like(t: Any, values: Any) -> Any:
    """``values`` in the form of ``t``: rows of the same IndexedSlices, or as they are."""
    if isinstance(t, IndexedSlices):
        return IndexedSlices(values, t.indices, t.dense_shape)
    return values


def _tensor(value: Any, name: str) -> Tensor:
    if is_symbolic(value):
        return as_tensor(value)
    made: Tensor = constant(operand_array(value), name=name)
    return made


def _check_same_shape(values: Tensor, result: Tensor) -> None:
    if not values.shape.is_compatible_with(result.shape):
        raise ValueError(f"Shapes {values.shape} and {result.shape} are incompatible")


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any, name: str | None = None) -> Any:
    """``t`` with values below ``clip_value_min`` raised to it and values above
    ``clip_value_max`` lowered to it.

    Raises:
        ValueError: bounds that would broadcast ``t`` to a larger shape.
        TypeError: bounds that do not convert to ``t``'s dtype.
    """
    with building_in(graph_of([_values_of(t), clip_value_min, clip_value_max])):
        graph = mode.building_graph()
        if graph is None:
            values = operand_array(_values_of(t))
            dtype = values.dtype
            low = np.asarray(clip_value_min, dtype=dtype)
            high = np.asarray(clip_value_max, dtype=dtype)
            clipped = np.maximum(np.minimum(values, high), low).astype(dtype)
            if clipped.shape != values.shape:
                raise ValueError(f"Shapes {values.shape} and {clipped.shape} are incompatible")
            return _like(t, clipped)
        with graph.name_scope(name or "clip_by_value") as scope:
            values_t = _tensor(_values_of(t), "t")
            smaller = minimum(values_t, clip_value_max)
            _check_same_shape(values_t, smaller)
            clipped_t = maximum(smaller, clip_value_min, name=scope)
            _check_same_shape(values_t, clipped_t)
        return _like(t, clipped_t)


def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: str | None = None) -> Any:
    """``t * clip_norm / max(norm(t), clip_norm)``: ``t`` scaled down to L2 norm
    ``clip_norm`` (over ``axes``, default all) if its norm is larger; the
    gradient is finite where the norm is 0."""
    with building_in(graph_of([_values_of(t), clip_norm])):
        graph = mode.building_graph()
        if graph is None:
            values = operand_array(_values_of(t))
            limit = np.asarray(clip_norm, dtype=values.dtype)
            axis = None if axes is None else tuple(np.atleast_1d(axes).tolist())
            with np.errstate(all="ignore"):
                squares = np.sum(values * values, axis=axis, keepdims=True)
                norm = np.where(squares > 0, np.sqrt(np.where(squares > 0, squares, 1)), squares)
                clipped = (values * limit / np.maximum(norm, limit)).astype(values.dtype)
            return _like(t, clipped)
        with graph.name_scope(name or "clip_by_norm") as scope:
            values_t = _tensor(_values_of(t), "t")
            squares = reduce_sum(values_t * values_t, axes, keepdims=True)
            positive = greater(squares, 0)
            from tf_accum.graph.fill_ops import ones_like

            # two selects, so that a zero norm gives no NaN gradient
            safe = where_v2(positive, squares, ones_like(squares))
            norm = where_v2(positive, sqrt(safe), squares)
            scaled = values_t * clip_norm
            _check_same_shape(values_t, scaled)
            clipped_t = identity(scaled / maximum(norm, clip_norm), name=scope)
        return _like(t, clipped_t)


def _check_list(t_list: Any) -> list[Any]:
    if not isinstance(t_list, Sequence) or isinstance(t_list, str):
        raise TypeError(f"`t_list` should be a sequence of tensors. Received {type(t_list)}.")
    return list(t_list)


def global_norm(t_list: Any, name: str | None = None) -> Any:
    """``sqrt(sum(l2norm(t) ** 2 for t in t_list))``; ``None`` entries are skipped.

    Raises:
        TypeError: ``t_list`` is not a sequence.
    """
    items = _check_list(t_list)
    with building_in(graph_of([_values_of(t) for t in items if t is not None])):
        graph = mode.building_graph()
        if graph is None:
            arrays = [operand_array(_values_of(t)) for t in items if t is not None]
            halves = [l2_loss(a) for a in arrays]
            dtype = np.asarray(halves[0]).dtype if halves else np.float32
            total = np.sum(np.asarray(halves, dtype=dtype))
            return np.sqrt(total * np.asarray(2.0, dtype)).astype(dtype)
        with graph.name_scope(name or "global_norm"):
            values = [
                _tensor(_values_of(t), f"t_{i}") if t is not None else None
                for i, t in enumerate(items)
            ]
            halves = [l2_loss(v) for v in values if v is not None]
            half_total = reduce_sum(stack(halves))
            two = constant(2.0, dtype=half_total.dtype)
            return sqrt(half_total * two, name="global_norm")


def clip_by_global_norm(
    t_list: Any, clip_norm: Any, use_norm: Any = None, name: str | None = None
) -> tuple[list[Any], Any]:
    """Every tensor of ``t_list`` times ``clip_norm / max(global_norm, clip_norm)``;
    returns the clipped list (``None`` stays ``None``, IndexedSlices keep their
    indices) and the global norm. An infinite or NaN norm makes every value NaN.

    Raises:
        TypeError: ``t_list`` is not a sequence.
    """
    items = _check_list(t_list)
    if use_norm is None:
        use_norm = global_norm(items, name)
    with building_in(graph_of([*(_values_of(t) for t in items if t is not None), use_norm])):
        graph = mode.building_graph()
        if graph is None:
            norm = np.asarray(use_norm)
            limit = np.asarray(clip_norm, dtype=norm.dtype)
            with np.errstate(all="ignore"):
                one = np.asarray(1.0, norm.dtype)
                scale = limit * np.minimum(one / norm, one / limit) + (norm - norm)
                clipped = [
                    None
                    if t is None
                    else _like(t, (operand_array(_values_of(t)) * scale).astype(norm.dtype))
                    for t in items
                ]
            return clipped, use_norm
        with graph.name_scope(name or "clip_by_global_norm") as scope:
            norm_t = as_tensor(use_norm)
            one = constant(1.0, dtype=norm_t.dtype)
            scale_for_finite = clip_norm * minimum(1.0 / norm_t, one / clip_norm)
            # any finite norm adds 0; an infinite or NaN one makes the scale NaN
            scale = scale_for_finite + (norm_t - norm_t)
            values = [
                _tensor(_values_of(t), f"t_{i}") if t is not None else None
                for i, t in enumerate(items)
            ]
            results: list[Any] = []
            for i, (t, v) in enumerate(zip(items, values, strict=True)):
                if v is None:
                    results.append(None)
                    continue
                results.append(_like(t, identity(v * scale, name=f"{scope}_{i}")))
        return results, use_norm
