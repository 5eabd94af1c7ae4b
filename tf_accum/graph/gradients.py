"""``tf.gradients``: the backward graph of ``ys`` with respect to ``xs``.

The walk is TensorFlow's: the ops between ``xs`` and ``ys`` are those reached
forward from the xs through floating-point (or resource) outputs and
backward from the ys; starting from ``grad_ys`` (ones by default), each such
op, once the gradients of all its consumers are in, gets the sum of its
outputs' gradients (``AddN``; IndexedSlices concatenated when every path
gives one, made dense when some do not) and hands them to the gradient
function registered for its type, which builds the gradients of its inputs.
Everything is built into the ys' graph under a ``gradients/`` name scope, one
``<op name>_grad`` scope per op. Control dependencies are not followed; an
integer tensor gets no gradient; ``stop_gradients`` tensors and
``tf.stop_gradient`` ops pass none through.

A Variable among the xs stands for its handle: every read of it contributes
(the gradient of ``ReadVariableOp`` is its output's).

Differs from TensorFlow: complex-valued ops are not differentiated
(NotImplementedError), see docs/departures.md T26.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Sequence
from typing import Any

import tf_accum.graph.array_grad  # noqa: F401 - registers the array ops' gradients
import tf_accum.graph.math_grad  # noqa: F401 - registers the math ops' gradients
import tf_accum.graph.padding_grad  # noqa: F401 - registers pad, reverse and cumsum's
from tf_accum.dtypes import DType, int64
from tf_accum.graph import mode
from tf_accum.graph.gradient_registry import get_gradient_function
from tf_accum.graph.graph import Graph, Operation, Tensor, is_symbolic
from tf_accum.graph.ops import as_tensor, identity
from tf_accum.indexed_slices import IndexedSlices


class UnconnectedGradients(enum.Enum):
    """What ``tf.gradients`` gives for an x that no y depends on: None or zeros."""

    NONE = "none"
    ZERO = "zero"


class AggregationMethod:
    """How the gradients of several paths are summed (every method gives the same sums here)."""

    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


_TRAINABLE = frozenset(
    {"float16", "float32", "float64", "bfloat16", "complex64", "complex128", "resource", "variant"}
)


def is_trainable(dtype: DType) -> bool:
    """Whether gradients flow through tensors of ``dtype`` (floats, complex, resources)."""
    return dtype.name in _TRAINABLE


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)) and not isinstance(value, IndexedSlices):
        return list(value)
    return [value]


def _as_x(value: Any) -> Tensor:
    handle = getattr(value, "_handle", None)
    if isinstance(handle, Operation) and hasattr(value, "graph_element"):
        return handle.outputs[0]  # a Variable: its handle, so every read counts
    if isinstance(value, IndexedSlices) or not is_symbolic(value):
        raise TypeError(f"tf.gradients: xs must be Tensors or Variables, got {value!r}")
    return as_tensor(value)


def gradients(
    ys: Any,
    xs: Any,
    grad_ys: Any = None,
    name: str = "gradients",
    colocate_gradients_with_ops: bool = False,
    gate_gradients: bool = False,
    aggregation_method: Any = None,
    stop_gradients: Any = None,
    unconnected_gradients: Any = UnconnectedGradients.NONE,
) -> list[Any]:
    """The gradients of ``sum(ys)`` with respect to each of ``xs``.

    Args:
        ys: a Tensor or list of Tensors (Variables stand for their value).
        xs: a Tensor, Variable or list of them.
        grad_ys: the gradients flowing into each y (default: ones of its shape).
        name: the name scope of the backward ops.
        stop_gradients: tensors through which no gradient flows.
        unconnected_gradients: for an x no y depends on, None (``"none"``) or
            zeros of its shape (``"zero"``).
        colocate_gradients_with_ops, gate_gradients: accepted; ops run where
            the session runs them, and gradients are values, not races.
        aggregation_method: an :class:`AggregationMethod` value.

    Returns:
        One gradient per x: a Tensor, an IndexedSlices (from ``gather``), or None.

    Raises:
        RuntimeError: called eagerly.
        ValueError: ``grad_ys`` of another length than ``ys``; an unknown
            ``unconnected_gradients`` or ``aggregation_method``.
        TypeError: a ``grad_y`` of the wrong kind of dtype.
        LookupError: an op between ``xs`` and ``ys`` has no registered gradient.
    """
    if mode.building_graph() is None:  # even for a graph's tensors, as TensorFlow 2
        raise RuntimeError(
            "tf.gradients is not supported when eager execution is enabled. Use "
            "tf.GradientTape instead."
        )
    try:
        unconnected = UnconnectedGradients(
            unconnected_gradients.value
            if isinstance(unconnected_gradients, UnconnectedGradients)
            else unconnected_gradients
        )
    except ValueError:
        raise ValueError(
            f"Unknown value for unconnected_gradients: '{unconnected_gradients}'"
        ) from None
    if aggregation_method is None:
        aggregation_method = AggregationMethod.DEFAULT
    if aggregation_method not in (0, 1, 2):
        raise ValueError(
            f"Invalid `aggregation_method` specified {aggregation_method}. Accepted values are "
            "[0, 1, 2]."
        )
    y_list = [as_tensor(y) for y in _as_list(ys)]
    x_list = [_as_x(x) for x in _as_list(xs)]
    stops = [as_tensor(t) for t in _as_list(stop_gradients)]
    grad_list = _as_list(grad_ys) if grad_ys is not None else [None] * len(y_list)
    if len(grad_list) != len(y_list):
        raise ValueError(f"Length mismatch. Passed {len(grad_list)} grad_ys for {len(y_list)} ys")
    graph = y_list[0].graph if y_list else mode.get_default_graph()
    with graph.as_default(), graph.name_scope(name or "gradients"):
        walk = _BackwardWalk(graph, y_list, x_list, stops)
        seeds = _seed_gradients(y_list, grad_list)
        return walk.run(seeds, unconnected)


def _seed_gradients(ys: list[Tensor], grad_ys: list[Any]) -> list[Any]:
    from tf_accum.graph.array_ops import fill, shape

    seeds: list[Any] = []
    for i, (y, grad_y) in enumerate(zip(ys, grad_ys, strict=True)):
        if grad_y is None:
            if y.dtype.is_complex:
                raise TypeError(
                    f"Gradients of complex tensors ({y}) must set grad_ys (y.dtype = "
                    f"{y.dtype.name})"
                )
            one = y.dtype.numpy_dtype.type(1) if y.dtype.numpy_dtype is not None else 1
            seeds.append(fill(shape(y), one, name=f"grad_ys_{i}"))
            continue
        if isinstance(grad_y, IndexedSlices):
            seeds.append(grad_y)
            continue
        if not is_symbolic(grad_y):
            from tf_accum.graph.ops import constant

            grad_y = constant(grad_y, dtype=y.dtype, name="grad_y")
        grad = as_tensor(grad_y)
        real = y.dtype.is_floating or y.dtype.is_integer
        if real and not (grad.dtype.is_floating or grad.dtype.is_integer):
            raise TypeError(
                f"Gradient type {grad.dtype.name} generated for real or integer-valued tensor "
                f"{y} with type {y.dtype.name} must be real or integer"
            )
        if y.dtype.is_complex and not grad.dtype.is_complex:
            raise TypeError(
                f"Gradient type {grad.dtype.name} generated for complex-valued tensor {y} with "
                f"type {y.dtype.name} must be real"
            )
        if not (real or y.dtype.is_complex or y.dtype.name == "resource"):
            raise TypeError(
                f"Tensor {y} with type {y.dtype.name} must be numeric to obtain a default gradient"
            )
        seeds.append(identity(grad, name=f"grad_ys_{i}"))
    return seeds


class _BackwardWalk:
    """The ops between the xs and the ys, and the gradients collected on their outputs."""

    def __init__(
        self, graph: Graph, ys: list[Tensor], xs: list[Tensor], stops: list[Tensor]
    ) -> None:
        self._graph = graph
        self._ys = ys
        self._xs = xs
        consumers: dict[Operation, list[Operation]] = collections.defaultdict(list)
        for op in graph.get_operations():
            for tensor in op.inputs:
                if is_trainable(tensor.dtype):
                    consumers[tensor.op].append(op)
        reached: set[Operation] = set()
        queue = collections.deque(x.op for x in xs)
        while queue:
            op = queue.popleft()
            if op in reached:
                continue
            reached.add(op)
            queue.extend(consumers.get(op, ()))
        between: set[Operation] = set()
        queue = collections.deque(y.op for y in ys)
        while queue:
            op = queue.popleft()
            if op in between or op not in reached:
                continue
            between.add(op)
            queue.extend(t.op for t in op.inputs)
        self._between = between
        # pending: for each op, how many inputs of ops between still have to
        # hand it a gradient
        pending: dict[Operation, int] = collections.Counter()
        for op in between:
            for tensor in op.inputs:
                if tensor.op in between:
                    pending[tensor.op] += 1
        self._pending = pending
        self._stop_ops = {t.op for t in stops}
        x_ops = [x.op for x in xs]
        for op in x_ops:
            if not any(pending.get(t.op, 0) > 0 for t in op.inputs):
                self._stop_ops.add(op)
        self._grads: dict[Operation, list[list[Any]]] = {}

    def _add(self, tensor: Tensor, grad: Any) -> None:
        slots = self._grads.setdefault(tensor.op, [[] for _ in tensor.op.outputs])
        slots[tensor.value_index].append(grad)

    def run(self, seeds: Sequence[Any], unconnected: UnconnectedGradients) -> list[Any]:
        for y, seed in zip(self._ys, seeds, strict=True):
            self._add(y, seed)
        queue: collections.deque[Operation] = collections.deque()
        queued: set[Operation] = set()
        for y in self._ys:
            op = y.op
            if self._pending.get(op, 0) == 0 and op not in queued and op in self._between:
                queued.add(op)
                queue.append(op)
        while queue:
            op = queue.popleft()
            out_grads = self._aggregated(op)
            self._grads[op] = [[g] if g is not None else [] for g in out_grads]
            in_grads = self._input_gradients(op, out_grads)
            for tensor, grad in zip(op.inputs, in_grads, strict=True):
                if grad is None:
                    continue
                if isinstance(grad, Tensor) and tensor.dtype.name != "resource":
                    try:
                        grad.set_shape(tensor.shape)
                    except ValueError:
                        raise ValueError(
                            "Incompatible shapes between op input and calculated input "
                            f"gradient. Forward operation: {op.name}. Original input shape: "
                            f"{tensor.shape}. Calculated input gradient shape: {grad.shape}"
                        ) from None
                self._add(tensor, grad)
            for tensor in op.inputs:
                producer = tensor.op
                if producer not in self._between:
                    continue
                self._pending[producer] -= 1
                if self._pending[producer] == 0:
                    queue.append(producer)
        return [self._result(x, unconnected) for x in self._xs]

    def _input_gradients(self, op: Operation, out_grads: list[Any]) -> list[Any]:
        if op in self._stop_ops or all(g is None for g in out_grads):
            return [None] * len(op.inputs)
        function = get_gradient_function(op)
        if function is None:
            return [None] * len(op.inputs)
        if any(t.dtype.is_complex for t in (*op.inputs, *op.outputs)):
            raise NotImplementedError(
                f"tf.gradients: tf_accum does not differentiate complex-valued ops (op "
                f"'{op.name}' of type {op.type}): docs/departures.md T26"
            )
        from tf_accum.graph.fill_ops import zeros_like

        filled = list(out_grads)
        with self._graph.name_scope(op.name + "_grad"):
            for i, grad in enumerate(filled):
                if grad is None and is_trainable(op.outputs[i].dtype):
                    filled[i] = zeros_like(op.outputs[i])
            found = function(op, *filled)
            single = not isinstance(found, (list, tuple)) or isinstance(found, IndexedSlices)
            in_grads = [found] if single else list(found)
        if len(in_grads) != len(op.inputs):
            raise ValueError(
                f"Num gradients {len(in_grads)} generated for op {op.name} do not match num "
                f"inputs {len(op.inputs)}"
            )
        return in_grads

    def _aggregated(self, op: Operation) -> list[Any]:
        slots = self._grads.get(op, [[] for _ in op.outputs])
        out: list[Any] = []
        for grads in slots:
            present = [g for g in grads if g is not None]
            if not present:
                out.append(None)
            elif len(present) == 1:
                out.append(present[0])
            else:
                out.append(aggregate(present))
        return out

    def _result(self, x: Tensor, unconnected: UnconnectedGradients) -> Any:
        slots = self._grads.get(x.op)
        grad = None
        if slots is not None:
            present = [g for g in slots[x.value_index] if g is not None]
            if len(present) > 1:
                grad = aggregate(present)
            elif present:
                grad = present[0]
        if grad is None and unconnected is UnconnectedGradients.ZERO:
            return _zeros_for(x)
        return grad


def _zeros_for(x: Tensor) -> Any:
    from tf_accum.graph.array_ops import shape
    from tf_accum.graph.fill_ops import zeros, zeros_like

    if x.dtype.name == "resource":
        # a variable's handle: zeros of what reading it gives
        for consumer in x.graph.get_operations():
            if consumer.type == "ReadVariableOp" and consumer.inputs[0] is x:
                return zeros_like(consumer.outputs[0])
        raise ValueError(f"Cannot make zeros for the resource tensor {x.name}")
    if x.shape.is_fully_defined():
        return zeros_like(x)
    return zeros(shape(x), dtype=x.dtype)


def aggregate(grads: list[Any]) -> Any:
    """The sum of several gradients of one tensor: ``AddN`` of tensors (IndexedSlices
    made dense when any is a Tensor), or the IndexedSlices of all their rows."""
    from tf_accum.graph.array_ops import concat
    from tf_accum.graph.elementwise_ops import add_n
    from tf_accum.graph.ops import cast

    if any(isinstance(g, Tensor) for g in grads):
        return add_n(grads)
    slices = [g for g in grads if isinstance(g, IndexedSlices)]
    if any(as_tensor(s.indices).dtype == int64 for s in slices):
        slices = [IndexedSlices(s.values, cast(s.indices, int64), s.dense_shape) for s in slices]
    return IndexedSlices(
        concat([s.values for s in slices], axis=0),
        concat([s.indices for s in slices], axis=0),
        slices[0].dense_shape,
    )
