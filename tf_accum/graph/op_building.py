"""Building an op from a numpy kernel, in a graph or at once.

The model-math ops (array, matrix, comparison and reduction ops and their
gradients) share one shape: convert the inputs by TensorFlow's rules, then
either run the kernel now on numpy arrays (eager mode, returning arrays as
the other math ops do) or add an op to the graph being built, with its
static output shapes. ``constant_value`` reads a tensor's value when it is
known while building (a constant), which is how static shapes and gradients
avoid run-time shape arithmetic where TensorFlow's do too.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tf_accum.dtypes import DType, as_dtype
from tf_accum.graph import mode
from tf_accum.graph.graph import Tensor, is_symbolic
from tf_accum.graph.math_convert import array_as, default_array
from tf_accum.graph.math_ops import Converted, building_in, eager_value, graph_of, materialize
from tf_accum.graph.math_shapes import node_text, type_enum
from tf_accum.graph.ops import as_tensor, dtype_of_array
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.indexed_slices import IndexedSlices

Array = np.ndarray[Any, Any]
Kernel = Callable[[Any, list[Any]], Sequence[Any]]
OutputSpec = list[tuple[DType, TensorShape]]

__all__ = [
    "Converted",
    "building_in",
    "constant_value",
    "convert_input",
    "dtype_of",
    "graph_of",
    "make_op",
    "same_as_first",
]


def dtype_of(value: Any) -> DType:
    """The dtype of a converted input (a Tensor or a :class:`Converted`)."""
    return value.dtype if isinstance(value, Converted) else as_tensor(value).dtype


def convert_input(value: Any, dtype: Any = None, param: str = "input") -> Any:
    """``value`` as an op input: a graph Tensor as it is, anything else as a
    :class:`Converted` array (of ``dtype`` when given). A list holding tensors is
    packed into one (``Pack``), and an IndexedSlices made dense, as TensorFlow's
    conversion does.

    Raises:
        ValueError: None, a ragged list, or a Tensor of another dtype than ``dtype``.
        TypeError: a value that does not convert to ``dtype``.
    """
    wanted = as_dtype(dtype) if dtype is not None else None
    if isinstance(value, IndexedSlices) and _symbolic_slices(value):
        from tf_accum.graph.array_ops import dense_from_slices

        value = dense_from_slices(value)
    elif isinstance(value, (list, tuple)) and holds_symbolic(value):
        from tf_accum.graph.array_ops import stack

        value = stack(list(value), name="packed")
    if is_symbolic(value):
        tensor = as_tensor(value)
        if wanted is not None and tensor.dtype != wanted:
            raise ValueError(
                f"Tensor conversion requested dtype {wanted.name} for Tensor with dtype "
                f"{tensor.dtype.name}: {tensor!r}"
            )
        return tensor
    if hasattr(value, "numpy") and not isinstance(value, (np.ndarray, np.generic)):
        value = np.asarray(value.numpy())  # an eager Variable: its current value
    if isinstance(value, Converted):
        return value
    try:
        array = array_as(value, wanted) if wanted is not None else default_array(value)
    except ValueError as error:
        raise ValueError(
            f"Tried to convert '{param}' to a tensor and failed. Error: {error}"
        ) from None
    return Converted(array, wanted if wanted is not None else dtype_of_array(array))


def _symbolic_slices(value: IndexedSlices) -> bool:
    return is_symbolic(value.values) or is_symbolic(value.indices)


def holds_symbolic(value: Any) -> bool:
    """Whether a (nested) list or tuple holds a graph Tensor or Variable."""
    for item in value:
        if is_symbolic(item):
            return True
        if isinstance(item, (list, tuple)) and holds_symbolic(item):
            return True
    return False


def constant_value(value: Any) -> Array | None:
    """The value of an input when it is known while building: a converted
    array, a constant's value, a fully known ``Shape``/``Size``/``Rank``; else None."""
    if isinstance(value, Converted):
        return value.array
    if isinstance(value, (np.ndarray, np.generic, int, float, list, tuple)):
        try:
            return default_array(value)
        except (TypeError, ValueError):
            return None
    if not is_symbolic(value):
        return None
    tensor = as_tensor(value)
    op = tensor.op
    if op.type == "Const":
        known: Array = np.asarray(op.get_attr("value"))
        return known
    source_shape = op.inputs[0].shape if op.inputs else None
    if op.type == "Shape" and source_shape is not None and source_shape.is_fully_defined():
        return np.asarray(source_shape.as_list(), tensor.dtype.numpy_dtype)
    if op.type == "Size" and source_shape is not None and source_shape.is_fully_defined():
        return np.asarray(source_shape.num_elements(), tensor.dtype.numpy_dtype)
    if op.type == "Rank" and source_shape is not None and source_shape.rank is not None:
        return np.asarray(source_shape.rank, np.int32)
    if op.type in _FOLDABLE and len(op.outputs) == 1 and not op.control_inputs:
        # as TensorFlow's shape inference: a small op of known inputs is evaluated
        parts = [constant_value(t) for t in op.inputs]
        if all(p is not None and np.size(p) <= _FOLD_LIMIT for p in parts):
            try:
                folded: Array = np.asarray(op.kernel(None, parts)[0])  # type: ignore[arg-type]
            except Exception:  # the op fails when run: nothing is known now
                return None
            return folded
    return None


# pure ops (no state, one output) whose value the shapes of later ops may need, and
# whose output is no larger than their inputs (so not Fill or Range)
_FOLDABLE = frozenset(
    {
        "Pack", "ConcatV2", "Reshape", "StridedSlice", "ExpandDims", "Squeeze",
        "Identity", "Cast", "AddV2", "Sub", "Mul", "FloorDiv", "FloorMod", "Neg", "Maximum",
        "Minimum", "Max", "Min", "Sum", "Prod", "Shape", "Size", "Rank",
    }
)  # fmt: skip
_FOLD_LIMIT = 1000


# the op whose static shapes are being inferred: (node name, op type, attrs)
_inferring: contextvars.ContextVar[tuple[str, str, dict[str, Any]] | None] = contextvars.ContextVar(
    "inferring", default=None
)


def attrs_text(attrs: dict[str, Any]) -> str:
    """An op's attributes as TensorFlow's node texts print them: sorted, ``T=DT_FLOAT``."""
    parts = []
    for key in sorted(attrs):
        value = attrs[key]
        if isinstance(value, DType):
            text = type_enum(value)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            text = "[" + ", ".join(str(v) for v in value) + "]"
        else:
            text = str(value)
        parts.append(f"{key}={text}")
    return ", ".join(parts)


def shape_error(message: str, tensors: Sequence[Tensor]) -> ValueError:
    """A build-time shape error of the op being inferred, with TensorFlow's node text."""
    current = _inferring.get()
    if current is None:
        return ValueError(message)
    name, op_type, attrs = current
    return ValueError(f"{message} for {node_text(name, op_type, attrs_text(attrs), tensors)}")


def make_op(
    op_type: str,
    name: str | None,
    inputs: Sequence[tuple[str, Any]],
    kernel: Kernel,
    outputs: Callable[[list[Tensor]], OutputSpec],
    attrs: dict[str, Any] | None = None,
    many: bool = False,
    effects: bool = False,
) -> Any:
    """Run ``kernel`` on the inputs now (eager: its output array, or list of
    arrays with ``many``) or build an ``op_type`` op named ``name`` into the
    graph being built (its Tensor, or list of Tensors with ``many``).

    ``inputs`` are (parameter name, converted input) pairs; ``outputs`` gives the
    dtypes and static shapes of the outputs from the input tensors. ``effects``:
    the kernel changes state (a random op advances its sequence).
    """
    graph = mode.building_graph()
    if graph is None:
        results = kernel(None, [np.asarray(eager_value(v)) for _, v in inputs])
        return list(results) if many else results[0]
    with graph.name_scope(name or op_type) as full:
        tensors = [materialize(graph, v, p) for p, v in inputs]
        token = _inferring.set((full[:-1], op_type, dict(attrs or {})))
        try:
            specs = outputs(tensors)
        finally:
            _inferring.reset(token)
        op = graph.create_op(
            op_type, tensors, specs, kernel, name=full, attrs=dict(attrs or {}), effects=effects
        )
    return list(op.outputs) if many else op.outputs[0]


def same_as_first(tensors: list[Tensor]) -> OutputSpec:
    """One output of the first input's dtype and static shape."""
    return [(tensors[0].dtype, tensors[0].shape)]


def build_in(values: Sequence[Any]) -> Any:
    """The context that builds in the graph of the first symbolic value (or the default)."""
    return building_in(graph_of(_flat(values)))


def _flat(values: Any) -> list[Any]:
    found: list[Any] = []
    for value in values:
        if isinstance(value, IndexedSlices):
            found.extend([value.values, value.indices])
        elif isinstance(value, (list, tuple)):
            found.extend(_flat(value))
        else:
            found.append(value)
    return found
