"""TensorFlow 1's ``tf.losses``: ``mean_squared_error``, ``softmax_cross_entropy``
and ``sparse_softmax_cross_entropy`` with weights and reductions, each loss
added to the graph's ``losses`` collection as TensorFlow does.

The default reduction, ``SUM_BY_NONZERO_WEIGHTS``, divides the weighted sum
by the number of elements whose weight is not 0 (0 when there are none).
Losses are computed in float32 and cast back to the input's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum.dtypes import float32
from tf_accum.graph import mode
from tf_accum.graph.array_ops import stop_gradient
from tf_accum.graph.elementwise_ops import div_no_nan, not_equal, squared_difference
from tf_accum.graph.graph import is_symbolic
from tf_accum.graph.math_ops import building_in, graph_of, multiply
from tf_accum.graph.nn_ops import (
    softmax_cross_entropy_with_logits_v2,
    sparse_softmax_cross_entropy_with_logits,
)
from tf_accum.graph.ops import as_tensor, cast, constant, name_scope
from tf_accum.graph.reduce_ops import reduce_sum
from tf_accum.graph.tensor_shape import TensorShape

LOSSES = "losses"
REGULARIZATION_LOSSES = "regularization_losses"


class Reduction:
    """How a weighted loss is reduced to what the function returns."""

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls) -> tuple[str, ...]:
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE,
                cls.SUM_OVER_NONZERO_WEIGHTS, cls.SUM_BY_NONZERO_WEIGHTS)  # fmt: skip

    @classmethod
    def validate(cls, key: str) -> None:
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}. Key should be one of {cls.all()}.")


def _static_shape(value: Any) -> TensorShape:
    if is_symbolic(value):
        return as_tensor(value).shape
    return TensorShape(np.shape(value))


def _count(losses: Any) -> Any:
    """The number of elements of ``losses``, as float32."""
    shape = _static_shape(losses)
    if shape.is_fully_defined():
        return constant(
            float(np.prod([int(d or 0) for d in shape.as_list()])),
            dtype=float32,
            name="num_elements",
        )
    from tf_accum.graph.fill_ops import ones_like

    return reduce_sum(ones_like(losses), name="num_elements")


def _num_present(losses: Any, weights: Any) -> Any:
    """How many elements of ``losses`` have a weight that is not 0."""
    if isinstance(weights, float) and weights != 0.0:
        return _count(losses)
    with name_scope("num_present"):
        from tf_accum.graph.fill_ops import ones_like

        present = cast(not_equal(cast(weights, float32), 0.0), float32)
        return reduce_sum(multiply(ones_like(losses), present))


def compute_weighted_loss(
    losses: Any,
    weights: Any = 1.0,
    scope: str | None = None,
    loss_collection: Any = LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Any:
    """``losses * weights`` reduced by ``reduction``, added to ``loss_collection``.

    Raises:
        ValueError: an unknown reduction, or weights that do not broadcast to the losses.
    """
    Reduction.validate(reduction)
    weight_shape, loss_shape = _static_shape(weights), _static_shape(losses)
    if weight_shape.rank and loss_shape.rank is not None and weight_shape.rank > loss_shape.rank:
        raise ValueError(
            f"weights can not be broadcast to values. values.rank={loss_shape.rank}. "
            f"weights.rank={weight_shape.rank}. values.shape={loss_shape}. "
            f"weights.shape={weight_shape}."
        )
    with building_in(graph_of([losses, weights])), name_scope(scope or "weighted_loss"):
        input_dtype = as_tensor(losses).dtype if is_symbolic(losses) else None
        losses_f = cast(losses, float32)
        weights_f = cast(weights, float32)
        weighted = multiply(losses_f, weights_f)
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            loss = reduce_sum(weighted)
            if reduction == Reduction.MEAN:
                from tf_accum.graph.fill_ops import ones_like

                total = reduce_sum(multiply(ones_like(losses_f), weights_f))
                loss = div_no_nan(reduce_sum(loss), total, name="value")
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = div_no_nan(reduce_sum(loss), _num_present(losses_f, weights), name="value")
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = div_no_nan(reduce_sum(loss), _count(losses_f), name="value")
        if input_dtype is not None:
            loss = cast(loss, input_dtype)
        elif not is_symbolic(loss):
            loss = np.asarray(loss).astype(np.asarray(losses).dtype)
    graph = mode.building_graph()
    if loss_collection and graph is not None:
        graph.add_to_collection(loss_collection, loss)
    return loss


def _required(labels: Any, predictions: Any, second: str = "predictions") -> None:
    if labels is None:
        raise ValueError("Argument `labels` must not be None.")
    if predictions is None:
        raise ValueError(f"Argument `{second}` must not be None.")


def _check_compatible(a: Any, b: Any) -> None:
    first, second = _static_shape(a), _static_shape(b)
    if not first.is_compatible_with(second):
        raise ValueError(f"Shapes {first} and {second} are incompatible")


def mean_squared_error(
    labels: Any,
    predictions: Any,
    weights: Any = 1.0,
    scope: str | None = None,
    loss_collection: Any = LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Any:
    """The weighted squared difference of ``predictions`` and ``labels``, reduced
    by ``reduction`` (default: the mean over elements of nonzero weight).

    Raises:
        ValueError: None arguments, or shapes that cannot be the same.
    """
    _required(labels, predictions)
    with (
        building_in(graph_of([labels, predictions, weights])),
        name_scope(scope or "mean_squared_error") as full,
    ):
        predictions_f = cast(predictions, float32)
        labels_f = cast(labels, float32)
        _check_compatible(predictions_f, labels_f)
        losses = squared_difference(predictions_f, labels_f)
        return compute_weighted_loss(losses, weights, full, loss_collection, reduction)


def softmax_cross_entropy(
    onehot_labels: Any,
    logits: Any,
    weights: Any = 1.0,
    label_smoothing: float = 0,
    scope: str | None = None,
    loss_collection: Any = LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Any:
    """The weighted cross entropy of ``softmax(logits)`` and ``onehot_labels``
    (no gradient flows into the labels), reduced by ``reduction``.
    ``label_smoothing`` moves that much of each label's mass evenly over the classes.

    Raises:
        ValueError: None arguments, or shapes that cannot be the same.
    """
    _required(onehot_labels, logits, "logits")
    with (
        building_in(graph_of([onehot_labels, logits, weights])),
        name_scope(scope or "softmax_cross_entropy_loss") as full,
    ):
        logits_t = logits if is_symbolic(logits) else constant(logits)
        dtype = as_tensor(logits_t).dtype if is_symbolic(logits_t) else None
        labels = cast(onehot_labels, dtype) if dtype is not None else onehot_labels
        if not is_symbolic(labels):
            labels = np.asarray(labels, dtype=np.asarray(logits_t).dtype)
        _check_compatible(logits_t, labels)
        if label_smoothing > 0:
            classes = _static_shape(labels).as_list()[-1]
            if classes is None:
                raise NotImplementedError("label smoothing of labels with an unknown class count")
            labels = labels * (1.0 - label_smoothing) + label_smoothing / classes
        labels = stop_gradient(labels, name="labels_stop_gradient")
        losses = softmax_cross_entropy_with_logits_v2(
            labels=labels, logits=logits_t, name="xentropy"
        )
        return compute_weighted_loss(losses, weights, full, loss_collection, reduction)


def sparse_softmax_cross_entropy(
    labels: Any,
    logits: Any,
    weights: Any = 1.0,
    scope: str | None = None,
    loss_collection: Any = LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Any:
    """The weighted cross entropy of ``softmax(logits)`` and the classes
    ``labels`` names (int32/int64), reduced by ``reduction``.

    Raises:
        ValueError: None arguments, or labels of a rank other than ``logits``' - 1.
    """
    _required(labels, logits, "logits")
    with (
        building_in(graph_of([labels, logits, weights])),
        name_scope(scope or "sparse_softmax_cross_entropy_loss") as full,
    ):
        losses = sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits, name="xentropy"
        )
        return compute_weighted_loss(losses, weights, full, loss_collection, reduction)


def get_losses(scope: str | None = None, loss_collection: str = LOSSES) -> list[Any]:
    """The losses in ``loss_collection`` of the graph being built."""
    return mode.get_default_graph().get_collection(loss_collection, scope)


def get_regularization_losses(scope: str | None = None) -> list[Any]:
    """The losses regularizers added (``get_variable(regularizer=...)``)."""
    return mode.get_default_graph().get_collection(REGULARIZATION_LOSSES, scope)


def add_loss(loss: Any, loss_collection: str = LOSSES) -> None:
    """Add ``loss`` to ``loss_collection`` (in graph mode)."""
    graph = mode.building_graph()
    if loss_collection and graph is not None:
        graph.add_to_collection(loss_collection, loss)


def get_total_loss(
    add_regularization_losses: bool = True, name: str = "total_loss", scope: str | None = None
) -> Any:
    """The sum of the losses (and the regularization losses).

    Raises:
        ValueError: there are no losses.
    """
    losses = get_losses(scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope)
    if not losses:
        raise ValueError("No losses found")
    from tf_accum.graph.ops import identity

    total = losses[0]
    for loss in losses[1:]:
        total = total + loss
    return identity(total, name=name)
