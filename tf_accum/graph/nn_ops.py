"""``tf.nn``'s ops: activations, softmax, cross entropies, ``bias_add``,
``xw_plus_b``, ``l2_loss``, ``in_top_k``, and the ops their gradients use
(``ReluGrad``, ``SigmoidGrad``, ``BiasAddGrad``, ...).

Op types, attributes, static shapes and dtype rules are TensorFlow's; so are
the numerics that matter: softmax subtracts the row's maximum before
exponentiating, cross entropy uses log-sum-exp, and float16 is computed in
float32 and rounded once. Gradients are in ``nn_gradients``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.float_errors import ignoring_float_errors
from tf_accum.dtypes import DType
from tf_accum.dtypes import bool as bool_
from tf_accum.graph import mode
from tf_accum.graph.graph import Tensor, is_symbolic
from tf_accum.graph.math_kernels import half_float
from tf_accum.graph.math_ops import Converted, building_in, check_allowed, graph_of, op_def_inputs
from tf_accum.graph.op_building import Kernel, convert_input, dtype_of, make_op, same_as_first
from tf_accum.graph.ops import as_tensor
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.shapes import kernel_text

Array = np.ndarray[Any, Any]


def _widened(array: Array) -> Array:
    """Half-precision values as float32, computed in and rounded once at the end."""
    if half_float(array.dtype):
        return array.astype(np.float32)
    return array


def _elementwise_kernel(fn: Any, dtype: DType) -> Kernel:
    target = dtype.numpy_dtype

    def kernel(context: Any, inputs: list[Any]) -> Sequence[Any]:
        arrays = [_widened(np.asarray(a)) for a in inputs]
        found = ignoring_float_errors(fn, *arrays)
        return (np.asarray(found).astype(target, copy=False),)

    return kernel


def _unary(op_type: str, fn: Any, x: Any, name: str | None, param: str = "features") -> Any:
    with building_in(graph_of([x])):
        dtype, inputs = op_def_inputs(op_type, [(param, x)])
        return make_op(
            op_type,
            name,
            [(param, inputs[0])],
            _elementwise_kernel(fn, dtype),
            same_as_first,
            {"T": dtype},
        )


def _binary(op_type: str, fn: Any, params: tuple[str, str], x: Any, y: Any, name: Any) -> Any:
    with building_in(graph_of([x, y])):
        dtype, inputs = op_def_inputs(op_type, list(zip(params, (x, y), strict=True)))
        elementwise = _elementwise_kernel(fn, dtype)

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            if np.shape(arrays[0]) != np.shape(arrays[1]):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"{params[0]} and {params[1]} must be the same size: "
                    f"{kernel_text(np.shape(arrays[0]))} vs. {kernel_text(np.shape(arrays[1]))}",
                )
            return elementwise(context, arrays)

        return make_op(
            op_type,
            name,
            list(zip(params, inputs, strict=True)),
            kernel,
            same_as_first,
            {"T": dtype},
        )


# --- activations ---------------------------------------------------------------


def _relu(x: Array) -> Any:
    return np.where(x > 0, x, np.zeros_like(x)) if x.dtype.kind in "iu" else np.maximum(x, 0)


def relu(features: Any, name: str | None = None) -> Any:
    """``max(features, 0)`` elementwise (NaN stays NaN).

    Raises:
        TypeError: a dtype ``Relu`` does not take (bool, complex, string).
    """
    return _unary("Relu", _relu, features, name)


def relu6(features: Any, name: str | None = None) -> Any:
    """``min(max(features, 0), 6)`` elementwise."""
    return _unary("Relu6", lambda x: np.minimum(np.maximum(x, 0), 6), features, name)


def elu(features: Any, name: str | None = None) -> Any:
    """``exp(features) - 1`` where negative, ``features`` elsewhere."""
    return _unary("Elu", lambda x: np.where(x < 0, np.expm1(x), x), features, name)


def _sigmoid(x: Array) -> Any:
    if x.dtype.kind == "c":
        return 1 / (1 + np.exp(-x))
    # 1 / (1 + exp(-x)) overflows for very negative x; this form does not
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def sigmoid(x: Any, name: str | None = None) -> Any:
    """``1 / (1 + exp(-x))`` elementwise.

    Raises:
        TypeError: an integer, bool or string dtype.
    """
    return _unary("Sigmoid", _sigmoid, x, name, param="x")


def tanh(x: Any, name: str | None = None) -> Any:
    """The hyperbolic tangent, elementwise.

    Raises:
        TypeError: an integer, bool or string dtype.
    """
    return _unary("Tanh", np.tanh, x, name, param="x")


def relu_grad(gradients: Any, features: Any, name: str | None = None) -> Any:
    """``ReluGrad``: ``gradients`` where ``features > 0``, else 0."""
    return _binary(
        "ReluGrad",
        lambda g, x: np.where(x > 0, g, g.dtype.type(0)),
        ("gradients", "features"),
        gradients,
        features,
        name,
    )


def relu6_grad(gradients: Any, features: Any, name: str | None = None) -> Any:
    """``Relu6Grad``: ``gradients`` where ``0 < features < 6``, else 0."""
    return _binary(
        "Relu6Grad",
        lambda g, x: np.where((x > 0) & (x < 6), g, np.zeros_like(g)),
        ("gradients", "features"),
        gradients,
        features,
        name,
    )


def elu_grad(gradients: Any, outputs: Any, name: str | None = None) -> Any:
    """``EluGrad``: ``gradients * (outputs + 1)`` where ``outputs < 0``, else ``gradients``."""
    return _binary(
        "EluGrad",
        lambda g, y: np.where(y < 0, g * (y + 1), g),
        ("gradients", "outputs"),
        gradients,
        outputs,
        name,
    )


def sigmoid_grad(y: Any, dy: Any, name: str | None = None) -> Any:
    """``SigmoidGrad``: ``dy * y * (1 - y)`` (``y`` the sigmoid's output)."""
    return _binary("SigmoidGrad", lambda y, g: g * (y * (1 - y)), ("y", "dy"), y, dy, name)


def tanh_grad(y: Any, dy: Any, name: str | None = None) -> Any:
    """``TanhGrad``: ``dy * (1 - y * y)`` (``y`` the tanh's output)."""
    return _binary("TanhGrad", lambda y, g: g * (1 - y * y), ("y", "dy"), y, dy, name)


# --- softmax -------------------------------------------------------------------


def _shifted(x: Array) -> Array:
    shifted: Array = x - np.max(x, axis=-1, keepdims=True)
    return shifted


def _softmax(x: Array) -> Any:
    e = np.exp(_shifted(x))
    return e / np.sum(e, axis=-1, keepdims=True)


def _log_softmax(x: Array) -> Any:
    shifted = _shifted(x)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def _softmax_op(op_type: str, fn: Any, logits: Any, axis: Any, name: str | None) -> Any:
    with building_in(graph_of([logits])):
        dtype, inputs = op_def_inputs(op_type, [("logits", logits)])
        logits = inputs[0]
        rank = _rank_of(logits)
        if rank == 0:
            raise errors.InvalidArgumentError(None, None, "logits must have >= 1 dimension, got []")
        axis = -1 if axis is None else int(axis)
        if rank is not None and not -rank <= axis < rank:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"`axis` must be in the range [{-rank}, {rank}) where {rank} is the number of "
                f"dimensions in the input. Received: axis={axis}",
            )
        last = rank is None or axis % rank == rank - 1

        graph = mode.building_graph()
        # eagerly the kernel works along the axis; a graph's op along the last one
        kernel = _softmax_kernel(fn, dtype, axis if graph is None else -1)
        if graph is None or last:
            return make_op(op_type, name, [("logits", logits)], kernel, same_as_first, {"T": dtype})
        # as TensorFlow: swap the axis with the last, apply the op, swap back
        assert rank is not None
        from tf_accum.graph.array_ops import transpose

        perm = list(range(rank))
        perm[axis % rank], perm[-1] = perm[-1], perm[axis % rank]
        swapped = transpose(logits, perm, name="Transpose")
        applied = make_op(op_type, None, [("logits", swapped)], kernel, same_as_first, {"T": dtype})
        return transpose(applied, perm, name=name or "Transpose")


def _softmax_kernel(fn: Any, dtype: DType, axis: int) -> Any:
    def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
        x = _widened(np.asarray(arrays[0]))
        if x.ndim < 1:
            raise errors.InvalidArgumentError(None, None, "logits must have >= 1 dimension, got []")
        with np.errstate(all="ignore"):
            out = np.moveaxis(fn(np.moveaxis(x, axis, -1)), -1, axis)
        return (np.asarray(out).astype(dtype.numpy_dtype),)

    return kernel


def _rank_of(value: Any) -> int | None:
    if isinstance(value, Converted):
        return int(np.ndim(value.array))
    return as_tensor(value).shape.rank


def softmax(logits: Any, axis: Any = None, name: str | None = None, dim: Any = None) -> Any:
    """``exp(logits) / sum(exp(logits))`` along ``axis`` (default: the last).

    The row's maximum is subtracted first, as TensorFlow does, so large logits
    do not overflow. ``dim`` is TensorFlow 1's name for ``axis``.

    Raises:
        TypeError: a dtype that is not float16, bfloat16, float32 or float64.
        InvalidArgumentError: a scalar, or an axis outside the rank.
    """
    return _softmax_op("Softmax", _softmax, logits, axis if axis is not None else dim, name)


def log_softmax(logits: Any, axis: Any = None, name: str | None = None, dim: Any = None) -> Any:
    """``logits - log(sum(exp(logits)))`` along ``axis`` (default: the last);
    arguments and errors as :func:`softmax`."""
    return _softmax_op("LogSoftmax", _log_softmax, logits, axis if axis is not None else dim, name)


# --- cross entropy -------------------------------------------------------------


def _xent(logits: Array, labels: Array) -> tuple[Any, Any]:
    # the arrays' own reductions: numpy's functions add a layer around the same ones
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_sum = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    loss = (labels * (log_sum - shifted)).sum(axis=-1)
    backprop = np.exp(shifted - log_sum) - labels
    return loss, backprop


def xent_op(features: Any, labels: Any, name: str | None = None) -> tuple[Any, Any]:
    """``SoftmaxCrossEntropyWithLogits``: per row, the loss and its gradient
    with respect to ``features`` (``softmax(features) - labels``).

    ``labels`` broadcasts to ``features``' shape, as TensorFlow's kernel allows.

    Raises:
        TypeError: the dtypes differ, or one ``SoftmaxCrossEntropyWithLogits`` does not take.
        ValueError: shapes that do not broadcast (when known).
        InvalidArgumentError: shapes that do not broadcast (when run).
    """
    op_type = "SoftmaxCrossEntropyWithLogits"
    with building_in(graph_of([features, labels])):
        dtype, inputs = op_def_inputs(op_type, [("features", features), ("labels", labels)])

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            x, y = (_widened(np.asarray(a)) for a in arrays)
            try:
                if y.shape != x.shape:
                    y = np.broadcast_to(y, x.shape)
            except ValueError:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    "logits and labels must be broadcastable: logits_size="
                    f"{kernel_text(x.shape)} labels_size={kernel_text(np.shape(arrays[1]))}",
                ) from None
            loss, backprop = ignoring_float_errors(_xent, x, y)
            return (
                np.asarray(loss).astype(dtype.numpy_dtype, copy=False),
                np.asarray(backprop).astype(dtype.numpy_dtype, copy=False),
            )

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            shape = tensors[0].shape
            if shape.rank is not None and tensors[1].shape.rank is not None:
                from tf_accum.graph.math_shapes import broadcast_shape

                shape = broadcast_shape(op_type, op_type, tensors[0], tensors[1])
            loss = TensorShape(shape.as_list()[:-1]) if shape.rank else TensorShape(None)
            return [(dtype, loss), (dtype, shape)]

        pairs = [("features", inputs[0]), ("labels", inputs[1])]
        loss, backprop = make_op(op_type, name, pairs, kernel, outputs, {"T": dtype}, many=True)
        return loss, backprop


def sparse_xent_op(features: Any, labels: Any, name: str | None = None) -> tuple[Any, Any]:
    """``SparseSoftmaxCrossEntropyWithLogits``: per row of ``features``, the
    loss of class ``labels[row]`` and its gradient with respect to ``features``.

    Raises:
        InvalidArgumentError: a label outside ``[0, classes)`` (when run).
    """
    op_type = "SparseSoftmaxCrossEntropyWithLogits"
    with building_in(graph_of([features, labels])):
        dtype, (logits,) = op_def_inputs(op_type, [("features", features)])
        label_input = convert_input(labels)
        label_dtype = dtype_of(label_input)
        check_allowed(op_type, "labels", label_dtype, ("int32", "int64"))

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            x = _widened(np.asarray(arrays[0]))
            y = np.asarray(arrays[1])
            classes = x.shape[-1]
            bad = (y < 0) | (y >= classes)
            if np.any(bad):
                wrong = int(y[bad].flat[0])
                listed = " ".join(str(int(v)) for v in y.flat)
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Received a label value of {wrong} which is outside the valid range of "
                    f"[0, {classes}).  Label values: {listed}",
                )
            with np.errstate(all="ignore"):
                shifted = _shifted(x)
                log_sum = np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
                log_probs = shifted - log_sum
                loss = -np.take_along_axis(log_probs, y[..., None], axis=-1)[..., 0]
                backprop = np.exp(log_probs)
                np.put_along_axis(
                    backprop,
                    y[..., None],
                    np.take_along_axis(backprop, y[..., None], axis=-1) - 1,
                    axis=-1,
                )
            return (
                np.asarray(loss).astype(dtype.numpy_dtype),
                np.asarray(backprop).astype(dtype.numpy_dtype),
            )

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            shape = tensors[0].shape
            loss = TensorShape(shape.as_list()[:-1]) if shape.rank else TensorShape(None)
            return [(dtype, loss), (dtype, shape)]

        pairs = [("features", logits), ("labels", label_input)]
        attrs = {"T": dtype, "Tlabels": label_dtype}
        loss, backprop = make_op(op_type, name, pairs, kernel, outputs, attrs, many=True)
        return loss, backprop


def _static_shape(value: Any) -> TensorShape:
    if isinstance(value, Converted):
        return TensorShape(np.shape(value.array))
    return as_tensor(value).shape


def softmax_cross_entropy_with_logits_v2(
    labels: Any, logits: Any, axis: Any = None, name: str | None = None, dim: Any = None
) -> Any:
    """Cross entropy between ``labels`` (a distribution per row) and
    ``softmax(logits)``, along ``axis``; gradients flow into both.

    Returns the loss per row (``logits``' shape without ``axis``).

    Raises:
        TypeError: the dtypes differ, or are not floating point.
        ValueError: shapes that cannot be the same.
    """
    axis = int(dim if dim is not None else (axis if axis is not None else -1))
    with building_in(graph_of([labels, logits])):
        if mode.building_graph() is None:
            return _xent_eager(labels, logits, axis)
        graph = mode.building_graph()
        assert graph is not None
        with graph.name_scope(name or "softmax_cross_entropy_with_logits") as scope:
            logits_t = as_tensor(_constant_input(logits, None, "logits"))
            labels_t = as_tensor(_constant_input(labels, logits_t.dtype, "labels"))
            _check_same_shape(labels_t, logits_t)
            rank = logits_t.shape.rank
            if rank is None and axis != -1:
                raise NotImplementedError(
                    "softmax_cross_entropy_with_logits along an axis other than the last, of "
                    "logits of unknown rank"
                )
            if rank is not None and axis % max(rank, 1) != rank - 1:
                # as TensorFlow: move the axis to the end, keeping the others' order
                from tf_accum.graph.array_ops import transpose

                moved = axis % rank
                perm = [i for i in range(rank) if i != moved] + [moved]
                logits_t = transpose(logits_t, perm, name="Transpose")
                labels_t = transpose(labels_t, perm, name="Transpose")
            loss, _ = xent_op(logits_t, labels_t, name=scope)
        return loss


def _xent_eager(labels: Any, logits: Any, axis: int) -> Any:
    x = np.asarray(operand_array(logits))
    y = np.asarray(operand_array(labels, _eager_dtype(x)))
    check_allowed("SoftmaxCrossEntropyWithLogits", "features", _eager_dtype(x))
    if x.shape != y.shape:
        raise ValueError(f"Shapes {y.shape} and {x.shape} are incompatible")
    x, y = np.moveaxis(x, axis, -1), np.moveaxis(y, axis, -1)
    with np.errstate(all="ignore"):
        loss, _ = _xent(_widened(x), _widened(y))
    return np.asarray(loss).astype(x.dtype)


def _eager_dtype(array: Array) -> DType:
    from tf_accum.graph.ops import dtype_of_array

    return dtype_of_array(array)


def operand_array(value: Any, dtype: DType | None = None) -> Array:
    """An eager operand's value as an array (of ``dtype`` when given)."""
    converted = convert_input(value, dtype)
    array: Array = np.asarray(converted.array)
    return array


def _constant_input(value: Any, dtype: DType | None, name: str) -> Any:
    """A graph Tensor as it is; anything else as a constant (of ``dtype`` if given)."""
    if is_symbolic(value):
        tensor = as_tensor(value)
        if dtype is not None and tensor.dtype != dtype:
            raise TypeError(
                f"Input 'labels' of 'SoftmaxCrossEntropyWithLogits' Op has type "
                f"{tensor.dtype.name} that does not match type {dtype.name} of argument "
                "'features'."
            )
        return tensor
    from tf_accum.graph.ops import constant

    converted = convert_input(value, dtype)
    return constant(converted.array, dtype=converted.dtype, name=name)


def _check_same_shape(labels: Tensor, logits: Tensor) -> None:
    if not labels.shape.is_compatible_with(logits.shape):
        raise ValueError(f"Shapes {labels.shape} and {logits.shape} are incompatible")


def softmax_cross_entropy_with_logits(
    labels: Any = None,
    logits: Any = None,
    dim: int = -1,
    name: str | None = None,
    axis: Any = None,
) -> Any:
    """TensorFlow 1's cross entropy of ``labels`` and ``softmax(logits)``: as
    :func:`softmax_cross_entropy_with_logits_v2`, but no gradient flows into
    ``labels``.

    Raises:
        ValueError: ``labels`` or ``logits`` missing.
    """
    _both_given("softmax_cross_entropy_with_logits", labels, logits)
    axis = axis if axis is not None else dim
    from tf_accum.graph.array_ops import stop_gradient

    with building_in(graph_of([labels, logits])):
        if mode.building_graph() is not None:
            labels = stop_gradient(
                _constant_input(labels, None, "labels"), name="labels_stop_gradient"
            )
        return softmax_cross_entropy_with_logits_v2(
            labels=labels, logits=logits, axis=axis, name=name
        )


def _both_given(function: str, labels: Any, logits: Any) -> None:
    if labels is None or logits is None:
        raise ValueError(
            f"Both `labels` and `logits` must be provided for {function}Received: "
            f"labels={labels} and logits={logits}"
        )


def sparse_softmax_cross_entropy_with_logits(
    labels: Any = None, logits: Any = None, name: str | None = None
) -> Any:
    """Cross entropy of ``softmax(logits)`` and the one class ``labels`` names
    per row (int32 or int64 labels of ``logits``' shape without its last axis).

    Raises:
        ValueError: a missing argument, or ``labels`` of a
            rank other than ``logits``' rank - 1.
        InvalidArgumentError: a label outside ``[0, classes)`` (when run).
    """
    _both_given("sparse_softmax_cross_entropy_with_logits", labels, logits)
    with building_in(graph_of([labels, logits])):
        graph = mode.building_graph()
        if graph is None:
            x = operand_array(logits)
            y = operand_array(labels)
            _check_sparse_ranks(TensorShape(y.shape), TensorShape(x.shape))
            loss, _ = sparse_xent_op(x, y)
            return loss
        with graph.name_scope(name or "SparseSoftmaxCrossEntropyWithLogits"):
            logits_t = as_tensor(_constant_input(logits, None, "logits"))
            labels_t = as_tensor(_constant_input(labels, None, "labels"))
            _check_sparse_ranks(labels_t.shape, logits_t.shape)
            loss, _ = sparse_xent_op(logits_t, labels_t)
        return loss


def _check_sparse_ranks(labels: TensorShape, logits: TensorShape) -> None:
    if logits.rank == 0:
        raise ValueError(f"Logits cannot be scalars - received shape {logits}.")
    if labels.rank is not None and logits.rank is not None:
        if labels.rank != logits.rank - 1:
            raise ValueError(
                f"Rank mismatch: Rank of labels (received {labels.rank}) should equal rank of "
                f"logits minus 1 (received {logits.rank})."
            )
        if not labels.is_compatible_with(TensorShape(logits.as_list()[:-1])):
            raise ValueError(
                f"Shape mismatch: The shape of labels (received {labels}) should equal the shape "
                f"of logits except for the last dimension (received {logits})."
            )


def sigmoid_cross_entropy_with_logits(
    labels: Any = None, logits: Any = None, name: str | None = None
) -> Any:
    """Elementwise cross entropy of ``labels`` (probabilities) and
    ``sigmoid(logits)``, computed as ``max(x, 0) - x * z + log1p(exp(-|x|))``
    so that it neither overflows nor loses precision.

    Raises:
        ValueError: a missing argument, or shapes that differ.
    """
    _both_given("sigmoid_cross_entropy_with_logits", labels, logits)
    with building_in(graph_of([labels, logits])):
        graph = mode.building_graph()
        if graph is None:
            x = operand_array(logits)
            z = operand_array(labels, _eager_dtype(x))
            if x.shape != z.shape:
                raise ValueError(
                    f"logits and labels must have the same shape ({x.shape} vs {z.shape})"
                )
            with np.errstate(all="ignore"):
                w, v = _widened(x), _widened(z)
                out = np.maximum(w, 0) - w * v + np.log1p(np.exp(-np.abs(w)))
            return np.asarray(out).astype(x.dtype)
        from tf_accum.graph.array_ops import where
        from tf_accum.graph.elementwise_ops import exp, greater_equal, log1p
        from tf_accum.graph.math_ops import add, multiply, subtract

        with graph.name_scope(name or "logistic_loss"):
            logits_t = as_tensor(_constant_input(logits, None, "logits"))
            labels_t = as_tensor(_constant_input(labels, logits_t.dtype, "labels"))
            if not logits_t.shape.is_compatible_with(labels_t.shape):
                raise ValueError(
                    f"logits and labels must have the same shape ({logits_t.shape} vs "
                    f"{labels_t.shape})"
                )
            from tf_accum.graph.fill_ops import zeros_like

            zeros = zeros_like(logits_t)
            cond = greater_equal(logits_t, zeros)
            relu_logits = where(cond, logits_t, zeros)
            neg_abs_logits = where(cond, -logits_t, logits_t)
            return add(
                subtract(relu_logits, multiply(logits_t, labels_t)),
                log1p(exp(neg_abs_logits)),
            )


# --- the rest ------------------------------------------------------------------


def bias_add(value: Any, bias: Any, data_format: Any = None, name: str | None = None) -> Any:
    """``value + bias``, ``bias`` (1-D) added along ``value``'s last axis
    (its second with ``data_format="NCHW"``).

    Raises:
        TypeError: the dtypes differ.
        ValueError: ``bias`` is not 1-D, or its length is not that axis' length.
    """
    op_type = "BiasAdd"
    channels_first = data_format is not None and str(data_format).startswith("NC")
    with building_in(graph_of([value, bias])):
        dtype, inputs = op_def_inputs(op_type, [("value", value), ("bias", bias)])
        value_shape, bias_shape = (_static_shape(v) for v in inputs)
        if bias_shape.rank is not None and bias_shape.rank != 1:
            raise ValueError(f"Shape must be rank 1 but is rank {bias_shape.rank}")
        if value_shape.rank is not None and value_shape.rank < 2:
            raise ValueError(f"Shape must be at least rank 2 but is rank {value_shape.rank}")
        axis = 1 if channels_first else -1
        if value_shape.rank is not None and bias_shape.rank == 1:
            have, want = value_shape.as_list()[axis], bias_shape.as_list()[0]
            if have is not None and want is not None and have != want:
                raise ValueError(f"Dimensions must be equal, but are {have} and {want}")

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            x, b = (np.asarray(a) for a in arrays)
            if x.ndim < 2 or b.ndim != 1 or x.shape[axis] != b.shape[0]:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Must provide as many biases as the channel dimension of the input tensor: "
                    f"{kernel_text(b.shape)} vs. {x.shape[axis] if x.ndim else 0} in "
                    f"{kernel_text(x.shape)}",
                )
            shaped = b.reshape((-1,) + (1,) * (x.ndim - 2)) if channels_first else b
            with np.errstate(all="ignore"):
                return (np.asarray(_widened(x) + _widened(shaped)).astype(dtype.numpy_dtype),)

        attrs = {"T": dtype, "data_format": "NCHW" if channels_first else "NHWC"}
        return make_op(
            op_type, name, [("value", inputs[0]), ("bias", inputs[1])], kernel, same_as_first, attrs
        )


def bias_add_grad(out_backprop: Any, data_format: str = "NHWC", name: str | None = None) -> Any:
    """``BiasAddGrad``: ``out_backprop`` summed over every axis but the channel axis."""
    op_type = "BiasAddGrad"
    channels_first = data_format.startswith("NC")
    with building_in(graph_of([out_backprop])):
        dtype, inputs = op_def_inputs(op_type, [("out_backprop", out_backprop)])

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            g = _widened(np.asarray(arrays[0]))
            axis = 1 if channels_first else g.ndim - 1
            axes = tuple(a for a in range(g.ndim) if a != axis)
            return (np.sum(g, axis=axes).astype(dtype.numpy_dtype),)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            shape = tensors[0].shape
            if shape.rank is None:
                return [(dtype, TensorShape([None]))]
            return [(dtype, TensorShape([shape.as_list()[1 if channels_first else -1]]))]

        attrs = {"T": dtype, "data_format": "NCHW" if channels_first else "NHWC"}
        return make_op(op_type, name, [("out_backprop", inputs[0])], kernel, outputs, attrs)


def xw_plus_b(x: Any, weights: Any, biases: Any, name: str | None = None) -> Any:
    """``matmul(x, weights) + biases``: a ``MatMul`` and a ``BiasAdd`` in a
    scope called ``xw_plus_b``."""
    from tf_accum.graph.linalg_ops import matmul

    with building_in(graph_of([x, weights, biases])):
        graph = mode.building_graph()
        if graph is None:
            return bias_add(matmul(x, weights), biases)
        with graph.name_scope(name or "xw_plus_b") as scope:
            product = matmul(x, weights, name="MatMul")
            return bias_add(product, biases, name=scope)


def l2_loss(t: Any, name: str | None = None) -> Any:
    """``sum(t ** 2) / 2``, a scalar of ``t``'s dtype."""
    op_type = "L2Loss"
    with building_in(graph_of([t])):
        dtype, inputs = op_def_inputs(op_type, [("t", t)])

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            x = _widened(np.asarray(arrays[0]))
            return (np.asarray(np.sum(x * x) / 2).astype(dtype.numpy_dtype),)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            return [(dtype, TensorShape([]))]

        return make_op(op_type, name, [("t", inputs[0])], kernel, outputs, {"T": dtype})


def in_top_k(predictions: Any, targets: Any, k: Any, name: str | None = None) -> Any:
    """Whether ``targets[i]`` is among the ``k`` largest of ``predictions[i]``
    (a bool per row). Ties count in the target's favour: it is in the top ``k``
    when fewer than ``k`` predictions are strictly larger. A non-finite
    prediction for the target, or a target outside the classes, is False.
    """
    op_type = "InTopKV2"
    with building_in(graph_of([predictions, targets, k])):
        preds = convert_input(predictions)
        if dtype_of(preds).name != "float32":
            check_allowed(op_type, "predictions", dtype_of(preds), ("float32",))
        target_input = convert_input(targets)
        target_dtype = dtype_of(target_input)
        check_allowed(op_type, "targets", target_dtype, ("int32", "int64"))
        k_input = convert_input(k, target_dtype) if not is_symbolic(k) else k

        def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
            p = np.asarray(arrays[0])
            t = np.asarray(arrays[1])
            count = int(np.asarray(arrays[2]))
            if p.ndim != 2 or t.ndim != 1 or t.shape[0] != p.shape[0]:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    "First dimension of predictions "
                    f"{p.shape[0] if p.ndim else 0} must match length of targets "
                    f"{t.shape[0] if t.ndim else 0}",
                )
            inside = (t >= 0) & (t < p.shape[1])
            safe = np.where(inside, t, 0)
            target_values = p[np.arange(p.shape[0]), safe]
            larger = np.sum(p > target_values[:, None], axis=1)
            found = inside & np.isfinite(target_values) & (larger < count)
            return (found,)

        def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
            rows = tensors[0].shape.as_list()[0] if tensors[0].shape.rank == 2 else None
            return [(bool_, TensorShape([rows]))]

        pairs = [("predictions", preds), ("targets", target_input), ("k", k_input)]
        return make_op(op_type, name, pairs, kernel, outputs, {"T": target_dtype})
