"""``tf.compat.v1.FIFOQueue`` (also ``tf.compat.v1.queue.FIFOQueue``) and its base class."""

from __future__ import annotations

from typing import Any

from tf_accum import raw_ops
from tf_accum.compat.v1 import _symbolic
from tf_accum.dtypes import DType, as_dtype
from tf_accum.graph.graph import is_symbolic
from tf_accum.graph.mode import executing_eagerly
from tf_accum.graph.ops import as_tensor
from tf_accum.graph.tensor_shape import TensorShape, as_shape
from tf_accum.raw_ops.common import destroy_when_collected
from tf_accum.shapes import python_text


class QueueBase:
    """A queue of elements, each a tuple (or, with ``names``, a dict) of tensors.

    Every method acts at once eagerly (enqueues return None, dequeues give
    ndarrays and block while the queue is empty); in graph mode each builds
    an op that a ``Session`` runs. See :class:`FIFOQueue`.
    """

    _eager_name = ""

    def __init__(self, dtypes: Any, shapes: Any, names: Any, queue_ref: Any) -> None:
        self._dtypes = _as_list(dtypes, as_dtype)
        if shapes is not None:
            shape_list = _shape_list(shapes, len(self._dtypes))
            if len(shape_list) != len(self._dtypes):
                raise ValueError("Queue shapes must have the same length as dtypes")
            self._shapes = shape_list
        else:
            self._shapes = [TensorShape(None) for _ in self._dtypes]
        if names is not None:
            name_list = list(names) if isinstance(names, (list, tuple)) else [names]
            if len(name_list) != len(self._dtypes):
                raise ValueError(
                    "List of names must have the same length as the list of dtypes, received "
                    f"len(names)={len(name_list)},len(dtypes)={len(self._dtypes)}"
                )
            self._names: list[Any] | None = name_list
        else:
            self._names = None
        self._queue_ref = queue_ref

    @property
    def queue_ref(self) -> Any:
        """The queue's handle (graph mode: a resource Tensor)."""
        return self._queue_ref

    @property
    def name(self) -> str:
        """The name of the op that made the queue (eagerly: the name given)."""
        if is_symbolic(self._queue_ref):
            op_name: str = as_tensor(self._queue_ref).op.name
            return op_name
        return self._eager_name

    @property
    def dtypes(self) -> list[DType]:
        return list(self._dtypes)

    @property
    def shapes(self) -> list[TensorShape]:
        return list(self._shapes)

    @property
    def names(self) -> list[Any] | None:
        return None if self._names is None else list(self._names)

    # --- enqueueing ----------------------------------------------------------------

    def _values(self, vals: Any) -> list[Any]:
        """The components of ``vals``, in order, converted to the queue's dtypes.

        Raises:
            ValueError: a dict for a queue without names or keys other than
                the names, no dict for a queue with names, more components
                than dtypes (docs/departures.md T28), a tensor of another dtype.
            TypeError: values that do not convert.
        """
        if isinstance(vals, dict):
            if not self._names:
                raise ValueError("Queue must have names to enqueue a dictionary")
            if sorted(self._names, key=str) != sorted(vals.keys(), key=str):
                raise ValueError(
                    "Keys in dictionary to enqueue do not match names of Queue.  Dictionary: "
                    f"{sorted(vals.keys())},Queue: {sorted(self._names)}"
                )
            values = [vals[k] for k in self._names]
        else:
            if self._names:
                raise ValueError("You must enqueue a dictionary in a Queue with names")
            values = list(vals) if isinstance(vals, (list, tuple)) else [vals]
        if len(values) > len(self._dtypes):
            raise ValueError(
                f"Expected at most {len(self._dtypes)} components (one per dtype of the "
                f"queue), got {len(values)}"
            )
        return [_symbolic.gradient(v, t) for v, t in zip(values, self._dtypes, strict=False)]

    def enqueue(self, vals: Any, name: str | None = None) -> Any:
        """Add one element at the back; waits while the queue is full.

        Args:
            vals: a value, a list or tuple of values (one per component), or a
                dict keyed by ``names``; each is converted to its component's dtype.

        Returns:
            None (graph mode: the Operation).

        Raises:
            ValueError: a component whose shape contradicts the queue's, or
                see ``_values``.
            CancelledError: the queue is closed.
        """
        values = self._values(vals)
        for value, shape in zip(values, self._shapes, strict=False):
            _check_compatible(_symbolic.static_shape(value), shape)
        return raw_ops.QueueEnqueueV2(
            handle=self._queue_ref, components=values, name=name or f"{self.name}_enqueue"
        )

    def enqueue_many(self, vals: Any, name: str | None = None) -> Any:
        """Add a batch of elements: dimension 0 of every component runs over them.

        Raises:
            ValueError: components whose dimension 0 differ, or whose other
                dimensions contradict the queue's shapes.
        """
        values = self._values(vals)
        batch: int | None = None
        for value, shape in zip(values, self._shapes, strict=False):
            found = _symbolic.static_shape(value)
            if found is None:
                continue
            if not found:
                raise ValueError("Shape must be at least rank 1 but is rank 0")
            if batch is not None and found[0] is not None and found[0] != batch:
                raise ValueError(f"Dimensions {batch} and {found[0]} are not compatible")
            batch = found[0] if batch is None else batch
            _check_compatible(found[1:], shape)
        return raw_ops.QueueEnqueueManyV2(
            handle=self._queue_ref, components=values, name=name or f"{self.name}_EnqueueMany"
        )

    # --- dequeueing ----------------------------------------------------------------

    def _structured(self, components: list[Any], leading: list[int | None] | None) -> Any:
        if components and is_symbolic(components[0]):
            for tensor, shape in zip(components, self._shapes, strict=True):
                if shape.rank is not None:
                    dims = shape.as_list()
                    tensor.set_shape(dims if leading is None else [*leading, *dims])
                elif leading is not None:
                    tensor.set_shape(TensorShape(None))
        if self._names:
            return dict(zip(self._names, components, strict=True))
        if len(components) == 1:
            return components[0]
        return components

    def dequeue(self, name: str | None = None, *, timeout: float | None = None) -> Any:
        """Take the front element; waits while the queue is empty.

        Returns:
            The element: one array for a queue of one component, a list of
            them, or a dict with ``names`` (graph mode: Tensors with the
            queue's static shapes).

        Raises:
            OutOfRangeError: the queue is closed and empty.
            DeadlineExceededError: ``timeout`` (keyword-only, seconds; ours) expired.
        """
        components = raw_ops.QueueDequeueV2(
            handle=self._queue_ref,
            component_types=self._dtypes,
            name=name or f"{self.name}_Dequeue",
            timeout=timeout,
        )
        return self._structured(list(components), None)

    def dequeue_many(self, n: Any, name: str | None = None, *, timeout: float | None = None) -> Any:
        """Take ``n`` elements, each component stacked along a new dimension 0.

        Raises:
            OutOfRangeError: the queue is closed with fewer than ``n`` left.
            InvalidArgumentError: the queue has no shapes.
        """
        components = raw_ops.QueueDequeueManyV2(
            handle=self._queue_ref,
            n=n,
            component_types=self._dtypes,
            name=name or f"{self.name}_DequeueMany",
            timeout=timeout,
        )
        static = n if isinstance(n, int) and not isinstance(n, bool) else None
        return self._structured(list(components), [static])

    def dequeue_up_to(
        self, n: Any, name: str | None = None, *, timeout: float | None = None
    ) -> Any:
        """As ``dequeue_many``, but a closed queue gives what it has (at least one)."""
        components = raw_ops.QueueDequeueUpToV2(
            handle=self._queue_ref,
            n=n,
            component_types=self._dtypes,
            name=name or f"{self.name}_DequeueUpTo",
            timeout=timeout,
        )
        return self._structured(list(components), [None])

    # --- the rest ----------------------------------------------------------------

    def close(self, cancel_pending_enqueues: bool = False, name: str | None = None) -> Any:
        """Close the queue (see :func:`tf_accum.raw_ops.QueueCloseV2`)."""
        return raw_ops.QueueCloseV2(
            handle=self._queue_ref,
            cancel_pending_enqueues=cancel_pending_enqueues,
            name=name or f"{self.name}_Close",
        )

    def is_closed(self, name: str | None = None) -> Any:
        """Whether the queue is closed (a bool; graph mode: a Tensor)."""
        return raw_ops.QueueIsClosedV2(
            handle=self._queue_ref, name=name or f"{self.name}_Is_Closed"
        )

    def size(self, name: str | None = None) -> Any:
        """The number of elements in the queue (an int32; graph mode: a Tensor)."""
        return raw_ops.QueueSizeV2(handle=self._queue_ref, name=name or f"{self.name}_Size")


class FIFOQueue(QueueBase):
    """A first-in first-out queue with a capacity, as TensorFlow's.

    Args:
        capacity: the most elements it holds (a negative number: no bound).
        dtypes: the dtype of each component (or one dtype).
        shapes: the shape of each component, or None for any shapes (then
            ``dequeue_many`` and ``dequeue_up_to`` are refused).
        names: names for the components: elements are then dicts.
        shared_name: every queue made with this name shares one queue (in one
            session, graph mode); private otherwise, destroyed eagerly when
            this object is garbage-collected.
        name: the name of the queue's op.

    Raises:
        ValueError: as many shapes or names as dtypes neither.
        TypeError: not a dtype.

    Differs from TensorFlow (docs/departures.md T28): the dequeues accept
    ``timeout=``; a dequeue that stops waiting consumes nothing; more
    components than dtypes are refused.
    """

    def __init__(
        self,
        capacity: Any,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        shared_name: Any = None,
        name: str = "fifo_queue",
    ) -> None:
        types = _as_list(dtypes, as_dtype)
        shape_list = _shape_list(shapes, len(types)) if shapes is not None else []
        if shapes is not None and len(shape_list) != len(types):
            raise ValueError("Queue shapes must have the same length as dtypes")
        ref = raw_ops.FIFOQueueV2(
            component_types=types,
            shapes=[s.as_list() for s in shape_list],
            capacity=capacity,
            shared_name=shared_name,
            name=name,
        )
        self._eager_name = name
        super().__init__(types, shapes, names, ref)
        if executing_eagerly() and not is_symbolic(ref) and not shared_name:
            self._finalizer = destroy_when_collected(self, ref)


def _as_list(value: Any, convert: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [convert(v) for v in value]
    return [convert(value)]


def _shape_list(shapes: Any, count: int) -> list[TensorShape]:
    """``shapes`` as a list of TensorShapes: a list of shapes, or one shape when
    the queue has one component (``[2]`` is then the shape [2])."""
    if isinstance(shapes, TensorShape):
        return [shapes]
    listed = list(shapes)
    if all(d is None or isinstance(d, int) for d in listed):
        return [as_shape(listed)]  # one shape, as TensorFlow reads it
    return [as_shape(s) for s in listed]


def _check_compatible(found: Any, shape: TensorShape) -> None:
    if found is None or shape.rank is None:
        return
    declared = shape.as_tuple()
    if declared is None:
        return
    if len(found) != len(declared) or not all(
        a is None or b is None or a == b for a, b in zip(found, declared, strict=True)
    ):
        raise ValueError(
            f"Shapes {python_text(tuple(found))} and {python_text(declared)} are incompatible"
        )
