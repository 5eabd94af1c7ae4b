"""The queue ops: TensorFlow's FIFOQueueV2 and the Queue*V2 ops on its handle.

Arguments are checked and converted before the queue changes; a queue lives
in the resource table as an accumulator does (shared by ``shared_name``,
destroyed by ``DestroyResourceOp``). Blocking ops (enqueues into a full
queue, dequeues from an empty one, a close behind waiting enqueues) accept
``timeout`` (seconds, ours) and join a session run's cancellation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.attempts import current_cancellation
from tf_accum.dtypes import DType, as_dtype, string
from tf_accum.queues.fifo import Element, FIFOQueue, QueueSpec
from tf_accum.raw_ops.arguments import handle_of, scalar_int, tensor_array
from tf_accum.raw_ops.constructors import string_attr
from tf_accum.raw_ops.keyword_only import raw_op
from tf_accum.raw_ops.timeout import check_timeout
from tf_accum.resources import current_table
from tf_accum.shapes import DeclaredShape, is_compatible, kernel_text, parse_attr_shape

Array = np.ndarray[Any, Any]


def _component_types(component_types: Any) -> tuple[DType, ...]:
    if isinstance(component_types, (str, bytes)) or not isinstance(component_types, (list, tuple)):
        component_types = [component_types]
    found = tuple(as_dtype(t) for t in component_types)
    if not found:
        raise errors.InvalidArgumentError(
            None, None, "Length for attr 'component_types' of 0 must be at least minimum 1"
        )
    return found


def _shapes(shapes: Any, types: tuple[DType, ...]) -> tuple[DeclaredShape, ...]:
    found = tuple(parse_attr_shape(s) for s in (shapes or ()))
    if found and len(found) != len(types):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Different number of component types.  Types: {', '.join(t.name for t in types)}, "
            f"Shapes: [{', '.join(kernel_text(s) for s in found)}]",
        )
    return found


def queue_of(handle: Any, op_name: str) -> FIFOQueue:
    """The live queue behind ``handle``.

    Raises:
        NotFoundError: destroyed or unknown handle.
        InvalidArgumentError: the handle is an accumulator's.
    """
    found: Any = current_table().lookup(handle_of(handle))
    if not isinstance(found, FIFOQueue):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{op_name} needs a queue, but handle {handle} refers to {found.spec.describe()} "
            f"({found.label})",
        )
    return found


def _check_timeout_ms(timeout_ms: Any) -> None:
    if scalar_int(timeout_ms, "timeout_ms", "int64") >= 0:
        raise errors.InvalidArgumentError(None, None, "Timeout not supported yet.")


def _component(value: Any, dtype: DType) -> Array:
    """A component as a new array of its own (the queue keeps it)."""
    if dtype == string:
        return np.array(value, dtype=object)
    array = tensor_array(value)
    return np.array(array, copy=True)


def _dtype_name(array: Array) -> str:
    if array.dtype.kind in "OSU":
        return string.kernel_name
    return as_dtype(array.dtype).kernel_name


def _components(queue: FIFOQueue, components: Any) -> list[Array]:
    """The components converted, their dtypes and number checked against the queue's."""
    if not isinstance(components, (list, tuple)):
        components = [components]
    types = queue.spec.component_types
    arrays = [_component(v, types[min(i, len(types) - 1)]) for i, v in enumerate(components)]
    have = [_dtype_name(a) for a in arrays]
    wanted = [t.kernel_name for t in types]
    if have != wanted:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Signature mismatch, have: resource, {', '.join(have)}-> expected: resource, "
            f"{', '.join(wanted)}->",
        )
    return arrays


def _shape_mismatch(index: int, expected: DeclaredShape, got: Sequence[int]) -> Exception:
    return errors.InvalidArgumentError(
        None,
        None,
        f"Shape mismatch in tuple component {index}. Expected {kernel_text(expected)}, got "
        f"{kernel_text(tuple(got))}",
    )


def _check_element(queue: FIFOQueue, arrays: list[Array]) -> Element:
    for index, (array, shape) in enumerate(zip(arrays, queue.spec.shapes, strict=False)):
        if not is_compatible(shape, array.shape):
            raise _shape_mismatch(index, shape, array.shape)
    return tuple(arrays)


def _split_batch(queue: FIFOQueue, arrays: list[Array]) -> list[Element]:
    first = arrays[0]
    if first.ndim == 0:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Shape mismatch in tuple component 0. Expected a batch (rank 1 or more), got []",
        )
    batch = first.shape[0]
    shapes = queue.spec.shapes or (None,) * len(arrays)
    for index, (array, shape) in enumerate(zip(arrays, shapes, strict=True)):
        expected: DeclaredShape = None if shape is None else (batch, *shape)
        if array.ndim == 0 or array.shape[0] != batch:
            raise _shape_mismatch(index, expected or (batch,), array.shape)
        if not is_compatible(expected, array.shape):
            raise _shape_mismatch(index, expected, array.shape)
    return [tuple(array[row] for array in arrays) for row in range(batch)]


def _check_dequeue_types(queue: FIFOQueue, component_types: Any, many: bool) -> None:
    wanted = [t.kernel_name for t in queue.spec.component_types]
    have = [t.kernel_name for t in _component_types(component_types)]
    if have != wanted:
        inputs = "resource, int32" if many else "resource"
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Signature mismatch, have: {inputs}->{', '.join(have)} expected: {inputs}->"
            f"{', '.join(wanted)}",
        )


def _stacked(queue: FIFOQueue, taken: list[Element]) -> list[Array]:
    spec = queue.spec
    if taken:
        return [np.stack([element[i] for element in taken]) for i in range(len(taken[0]))]
    return [
        np.empty((0, *(shape or ())), dtype=t.numpy_dtype if t != string else object)
        for t, shape in zip(spec.component_types, spec.shapes, strict=True)
    ]


def _dequeue_many(
    op_name: str,
    handle: Any,
    n: Any,
    component_types: Any,
    timeout_ms: Any,
    timeout: Any,
    up_to: bool,
) -> list[Array]:
    queue = queue_of(handle, op_name)
    _check_dequeue_types(queue, component_types, many=True)
    _check_timeout_ms(timeout_ms)
    count = scalar_int(n, "n", "int32")
    if count < 0:
        kernel = "DequeueUpToOp" if up_to else "DequeueManyOp"
        raise errors.InvalidArgumentError(None, None, f"{kernel} requested {count} < 0 elements")
    shapes = queue.spec.shapes
    if not shapes or any(s is None or None in s for s in shapes):
        raise errors.InvalidArgumentError(
            None,
            None,
            "FIFOQueue's DequeueMany and DequeueUpTo require the components to have specified "
            "shapes.",
        )
    seconds = check_timeout(timeout)
    taken = queue.dequeue(count, up_to, seconds, current_cancellation())
    return _stacked(queue, taken)


@raw_op
def FIFOQueueV2(
    *,
    component_types: Any,
    shapes: Any = [],  # noqa: B006 - TensorFlow's default, never changed
    capacity: Any = -1,
    container: str | bytes | None = "",
    shared_name: str | bytes | None = "",
    name: str | None = None,
) -> int:
    """Create a first-in first-out queue of tuples of tensors; returns its handle.

    Args:
        component_types: the dtypes of an element's components (one or more).
        shapes: the shape of each component, or ``[]`` for any shapes (then
            DequeueMany and DequeueUpTo are refused).
        capacity: the most elements it holds; a negative number is no bound.
        container, shared_name: as for the accumulators: every call with the
            same ones gets the same queue while it exists.
        name: the base of a private queue's name.

    Raises:
        InvalidArgumentError: no component types; as many shapes as types
            neither; a shared name used with other attributes.
        TypeError: not a dtype; a malformed shape.
    """
    types = _component_types(component_types)
    spec = QueueSpec(types, _shapes(shapes, types), scalar_int(capacity, "capacity", "int64"))
    return current_table().create_queue(
        string_attr(container, "container"),
        string_attr(shared_name, "shared_name"),
        name or "FIFOQueueV2",
        spec,
        lambda label: FIFOQueue(spec, label),
    )


@raw_op
def QueueEnqueueV2(
    *,
    handle: Any,
    components: Any,
    timeout_ms: Any = -1,
    name: str | None = None,
    timeout: float | None = None,
) -> None:
    """Add one element (a list of components) at the back, waiting while the queue is full.

    Raises:
        InvalidArgumentError: components of other dtypes or number than the
            queue's ("Signature mismatch"), or of other shapes ("Shape
            mismatch in tuple component i"); ``timeout_ms`` other than -1
            (as TensorFlow: "Timeout not supported yet.").
        CancelledError: the queue is closed, or was closed with
            cancel_pending_enqueues (or destroyed) while this waited.
        DeadlineExceededError: ``timeout`` (ours, seconds) expired.
        NotFoundError: the handle was destroyed.
    """
    queue = queue_of(handle, "QueueEnqueueV2")
    element = _check_element(queue, _components(queue, components))
    _check_timeout_ms(timeout_ms)
    queue.enqueue([element], check_timeout(timeout), current_cancellation())


@raw_op
def QueueEnqueueManyV2(
    *,
    handle: Any,
    components: Any,
    timeout_ms: Any = -1,
    name: str | None = None,
    timeout: float | None = None,
) -> None:
    """Add a batch of elements: each component's dimension 0 runs over the elements.

    The elements go in one after another as room appears; out of time, those
    added stay. Errors as for :func:`QueueEnqueueV2`; every component must
    have the first one's dimension 0.
    """
    queue = queue_of(handle, "QueueEnqueueManyV2")
    elements = _split_batch(queue, _components(queue, components))
    _check_timeout_ms(timeout_ms)
    queue.enqueue(elements, check_timeout(timeout), current_cancellation())


@raw_op
def QueueDequeueV2(
    *,
    handle: Any,
    component_types: Any,
    timeout_ms: Any = -1,
    name: str | None = None,
    timeout: float | None = None,
) -> list[Array]:
    """Take the front element, waiting while the queue is empty; returns its components.

    Raises:
        OutOfRangeError: the queue is closed and empty.
        InvalidArgumentError: ``component_types`` other than the queue's.
        CancelledError: the queue was destroyed, or the session closed, while
            this waited; nothing was taken.
        DeadlineExceededError: ``timeout`` (ours, seconds) expired; nothing was taken.
        NotFoundError: the handle was destroyed.
    """
    queue = queue_of(handle, "QueueDequeueV2")
    _check_dequeue_types(queue, component_types, many=False)
    _check_timeout_ms(timeout_ms)
    taken = queue.dequeue(1, False, check_timeout(timeout), current_cancellation())
    return list(taken[0])


@raw_op
def QueueDequeueManyV2(
    *,
    handle: Any,
    n: Any,
    component_types: Any,
    timeout_ms: Any = -1,
    name: str | None = None,
    timeout: float | None = None,
) -> list[Array]:
    """Take ``n`` elements, waiting for them; returns each component stacked (dimension 0: n).

    Raises:
        OutOfRangeError: the queue is closed with fewer than ``n`` elements
            (none is taken).
        InvalidArgumentError: a queue without shapes, ``n`` below 0,
            ``component_types`` other than the queue's.
        CancelledError, DeadlineExceededError, NotFoundError: as for
            :func:`QueueDequeueV2`; what the wait had taken goes back to the
            front of the queue (docs/departures.md T28).
    """
    return _dequeue_many(
        "QueueDequeueManyV2", handle, n, component_types, timeout_ms, timeout, up_to=False
    )


@raw_op
def QueueDequeueUpToV2(
    *,
    handle: Any,
    n: Any,
    component_types: Any,
    timeout_ms: Any = -1,
    name: str | None = None,
    timeout: float | None = None,
) -> list[Array]:
    """As :func:`QueueDequeueManyV2`, but a closed queue gives what it has
    (1 to ``n`` elements); OutOfRangeError only when it is closed and empty."""
    return _dequeue_many(
        "QueueDequeueUpToV2", handle, n, component_types, timeout_ms, timeout, up_to=True
    )


@raw_op
def QueueSizeV2(*, handle: Any, name: str | None = None) -> np.int32:
    """The number of elements in the queue (int32 scalar)."""
    size: np.int32 = np.int32(queue_of(handle, "QueueSizeV2").size())
    return size


@raw_op
def QueueCloseV2(
    *,
    handle: Any,
    cancel_pending_enqueues: Any = False,
    name: str | None = None,
    timeout: float | None = None,
) -> None:
    """Close the queue: later enqueues fail; dequeues fail once too few elements are left.

    As in TensorFlow, a plain close waits behind the enqueues waiting already,
    and closing a closed queue so is CancelledError "Queue '...' is already
    closed."; with ``cancel_pending_enqueues`` those enqueues fail with
    CancelledError "Enqueue operation was cancelled" and it closes at once.
    """
    queue = queue_of(handle, "QueueCloseV2")
    queue.close_queue(bool(cancel_pending_enqueues), check_timeout(timeout), current_cancellation())


@raw_op
def QueueIsClosedV2(*, handle: Any, name: str | None = None) -> np.bool_:
    """Whether the queue is closed (bool scalar)."""
    return np.bool_(queue_of(handle, "QueueIsClosedV2").is_closed())


def refused_before_waiting(op_type: str, queue: FIFOQueue, arguments: dict[str, Any]) -> bool:
    """Whether queue op ``op_type`` would refuse ``arguments`` (dtypes, number of
    components, shapes) before it waits for elements or room: a host that holds
    such an op back must run it at once, so that it fails as it does in one process."""
    try:
        if op_type == "QueueDequeueV2":
            _check_dequeue_types(queue, arguments.get("component_types"), many=False)
        elif op_type in ("QueueDequeueManyV2", "QueueDequeueUpToV2"):
            _check_dequeue_types(queue, arguments.get("component_types"), many=True)
        elif op_type == "QueueEnqueueV2":
            _check_element(queue, _components(queue, arguments.get("components")))
        elif op_type == "QueueEnqueueManyV2":
            _split_batch(queue, _components(queue, arguments.get("components")))
    except (errors.OpError, TypeError, ValueError):
        return True
    return False
