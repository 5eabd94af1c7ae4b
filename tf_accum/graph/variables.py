"""``Variable``: the state a TF1 program keeps beside its accumulators.

A graph-mode variable is a set of ops (a handle, an initializer, reads,
assignments); its value lives in each Session separately, as TensorFlow's
resource variables do, and reading it before its initializer ran is a
FailedPreconditionError. In eager mode a Variable simply holds a numpy array.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum.dtypes import DType, resource
from tf_accum.graph import mode
from tf_accum.graph.graph import (
    GLOBAL_VARIABLES,
    TRAINABLE_VARIABLES,
    Graph,
    Operation,
    Tensor,
)
from tf_accum.graph.operators import TensorOperators
from tf_accum.graph.ops import dtype_of_array, graph_input, infer_array
from tf_accum.graph.tensor_shape import TensorShape, as_shape
from tf_accum.graph.variable_store import VariableStore, check_merge, frozen
from tf_accum.indexed_slices import IndexedSlices

Array = np.ndarray[Any, Any]


# An eager variable's device: TensorFlow's name for this process's CPU.
EAGER_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"


def _rows_of(sparse_delta: Any) -> tuple[Any, Any]:
    if not isinstance(sparse_delta, IndexedSlices):
        raise TypeError(
            f"Argument `sparse_delta` must be a `tf.IndexedSlices`. Received arg: {sparse_delta}"
        )
    return sparse_delta.indices, sparse_delta.values


def _initialize(context: Any, inputs: list[Any]) -> tuple[()]:
    store_of(context).assign(inputs[0], inputs[1])
    return ()


# a VarHandleOp -> its Variable (what the training ops' nodes find from a handle tensor)
_variables_by_handle: weakref.WeakKeyDictionary[Operation, Variable] = weakref.WeakKeyDictionary()


def variable_of(value: Any) -> Variable | None:
    """The Variable ``value`` is, or whose handle tensor it is; else None."""
    if isinstance(value, Variable):
        return value
    if isinstance(value, Tensor):
        return _variables_by_handle.get(value.op)
    return None


def store_of(context: Any) -> VariableStore:
    store: VariableStore = context.session.variables
    return store


class Variable(TensorOperators):
    """A variable: ``initializer``, ``assign``, ``assign_add``, ``read_value``, ``eval``.

    Args:
        initial_value: a value, a Tensor, or a callable returning one.
        trainable: listed in ``trainable_variables()`` (default True).
        collections: graph collections to add it to (default: global variables).
        name: the variable's name (default "Variable").
        dtype: its dtype (default: inferred from the initial value).
        shape: its static shape (default: the initial value's).

    Other TensorFlow arguments are accepted and ignored.

    Raises:
        ValueError: no initial value.
        TypeError: an initial value that does not convert to ``dtype``.
    """

    def __init__(
        self,
        initial_value: Any = None,
        trainable: bool | None = None,
        collections: Any = None,
        validate_shape: bool = True,
        caching_device: Any = None,
        name: str | None = None,
        variable_def: Any = None,
        dtype: Any = None,
        expected_shape: Any = None,
        import_scope: Any = None,
        constraint: Any = None,
        use_resource: Any = None,
        synchronization: Any = None,
        aggregation: Any = None,
        shape: Any = None,
    ) -> None:
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        if collections is not None and not isinstance(collections, (list, tuple, set)):
            raise ValueError(
                "collections argument to Variable constructor must be a list, tuple, or set. "
                f"Got {collections} of type {type(collections)}"
            )
        if callable(initial_value):
            initial_value = initial_value()
        self._trainable = True if trainable is None else bool(trainable)
        graph = mode.building_graph()
        self._graph = graph
        if graph is None:
            self._value = frozen(np.array(infer_array(initial_value, dtype)))
            self._dtype = dtype_of_array(self._value)
            self._shape = TensorShape(self._value.shape)
            self._name = f"{name or 'Variable'}:0"
            return
        self._build(graph, initial_value, dtype, shape, name, validate_shape, collections)

    def _build(
        self,
        graph: Graph,
        initial_value: Any,
        dtype: Any,
        shape: Any,
        name: str | None,
        validate_shape: bool,
        collections: Any,
    ) -> None:
        handle = graph.create_op(
            "VarHandleOp",
            [],
            [(resource, TensorShape([]))],
            lambda context, inputs: (self,),
            name=name or "Variable",
            effects=False,
        )
        self._handle = handle
        _variables_by_handle[handle] = self
        self._name = f"{handle.name}:0"
        with graph.name_scope(f"{handle.name}/"), graph.control_dependencies(None):
            initial = graph_input(graph, initial_value, dtype, name="Initializer/initial_value")
            self._dtype = initial.dtype
            self._shape = initial.shape if shape is None else as_shape(shape)
            if validate_shape and not self._shape.is_compatible_with(initial.shape):
                raise ValueError(
                    f"Shapes {initial.shape} and {self._shape} are incompatible for Variable "
                    f"{handle.name}"
                )
            self._initial_value = initial
            self._initializer = graph.create_op(
                "AssignVariableOp",
                [handle.outputs[0], initial],
                [],
                _initialize,
                name="Assign",
            )
            self._snapshot = self._read_op(graph, "Read/ReadVariableOp")
        keys = list(collections) if collections is not None else [GLOBAL_VARIABLES]
        if self._trainable and TRAINABLE_VARIABLES not in keys:
            keys.append(TRAINABLE_VARIABLES)  # as TensorFlow: whatever collections were given
        for key in dict.fromkeys(keys):
            graph.add_to_collection(key, self)

    def _read_op(self, graph: Graph, name: str) -> Tensor:
        op = graph.create_op(
            "ReadVariableOp",
            [self._handle.outputs[0]],
            [(self._dtype, self._shape)],
            lambda context, inputs: (store_of(context).read(inputs[0]),),
            name=name,
            effects=False,
        )
        return op.outputs[0]

    # --- what TensorFlow's Variable offers ------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def graph(self) -> Graph | None:
        return self._graph

    @property
    def device(self) -> str:
        """Where the variable lives: its handle op's device, as TensorFlow spells it
        (``"/job:ps/task:0"``; "" when unplaced); an eager variable is on this
        process's CPU, which TensorFlow names ``EAGER_DEVICE``."""
        if self._graph is None:
            return EAGER_DEVICE
        return self._handle.device

    @property
    def op(self) -> Operation:
        """The variable's handle op (graph mode only)."""
        return self._graph_only()._handle

    @property
    def handle(self) -> Any:
        """What the ``Resource*`` training ops take: the variable's resource Tensor in
        graph mode; eagerly an object through which the ops read and replace the value."""
        if self._graph is None:
            return EagerHandle(self)
        return self._handle.outputs[0]

    @property
    def initializer(self) -> Operation | None:
        """The op that sets the initial value (None in eager mode)."""
        if self._graph is None:
            return None
        return self._initializer

    @property
    def initial_value(self) -> Any:
        return self._value if self._graph is None else self._initial_value

    @property
    def graph_element(self) -> Tensor:
        """The tensor this variable stands for as an op input or a fetch: its value."""
        return self._graph_only()._snapshot

    def _graph_only(self) -> Variable:
        if self._graph is None:
            raise AttributeError("an eager Variable has no graph ops")
        return self

    def value(self) -> Any:
        return self._value if self._graph is None else self._snapshot

    def read_value(self) -> Any:
        """A new read of the value (a Tensor in graph mode, an array eagerly)."""
        if self._graph is None:
            return self._value.copy()
        # as TensorFlow's resource variables: a read in "Read", then an Identity
        # (which the device scope of the caller places, not the variable's)
        graph = self._graph
        with graph.name_scope("Read"):
            value = self._read_op(graph, "ReadVariableOp")
        op = graph.create_op(
            "Identity",
            [value],
            [(self._dtype, self._shape)],
            lambda context, inputs: (inputs[0],),
            name="Identity",
            effects=False,
        )
        return op.outputs[0]

    def numpy(self) -> Array:
        if self._graph is not None:
            raise NotImplementedError("numpy() is only available in eager mode; use eval().")
        value: Array = self._value.copy()
        return value

    def eval(self, session: Any = None) -> Any:
        """The value in ``session`` (default: the default session); eagerly, the value."""
        if self._graph is None:
            return self._value.copy()
        return self._snapshot.eval(session=session)

    def assign(
        self, value: Any, use_locking: Any = None, name: str | None = None, read_value: bool = True
    ) -> Any:
        """Set the value; returns the new value (a Tensor in graph mode), or
        with ``read_value=False`` the op (None eagerly)."""
        return self._update(
            value,
            name or "AssignVariableOp",
            lambda store, v, x: store.assign(v, x),
            read_value,
            merged=False,
        )

    def assign_add(
        self, delta: Any, use_locking: Any = None, name: str | None = None, read_value: bool = True
    ) -> Any:
        """Add ``delta`` atomically; returns the new value (a Tensor in graph mode),
        or with ``read_value=False`` the op (None eagerly)."""
        return self._update(
            delta,
            name or "AssignAddVariableOp",
            lambda store, v, x: store.assign_add(v, x),
            read_value,
        )

    def assign_sub(
        self, delta: Any, use_locking: Any = None, name: str | None = None, read_value: bool = True
    ) -> Any:
        """Subtract ``delta`` atomically; returns the new value (a Tensor in graph
        mode), or with ``read_value=False`` the op (None eagerly).

        ``delta`` must have the variable's shape (no broadcasting) and convert
        to its dtype.

        Raises:
            ValueError: a shape that cannot be the variable's, or a Tensor of
                another dtype (when the op is built).
            TypeError: values that do not convert to the variable's dtype.
            InvalidArgumentError: a fed value of another shape (when it runs).
            FailedPreconditionError: the variable is not initialized (when it runs).
        """
        return self._update(
            delta,
            name or "AssignSubVariableOp",
            lambda store, v, x: store.assign_sub(v, x),
            read_value,
        )

    def scatter_add(self, sparse_delta: Any, use_locking: bool = False, name: Any = None) -> Any:
        """Add an IndexedSlices' rows to those rows; as ``scatter_add(self, ...)``.

        Raises:
            TypeError: ``sparse_delta`` is not an IndexedSlices.
        """
        from tf_accum.graph.scatter import scatter_add

        return scatter_add(self, *_rows_of(sparse_delta), name=name)

    def scatter_sub(self, sparse_delta: Any, use_locking: bool = False, name: Any = None) -> Any:
        """Subtract an IndexedSlices' rows from those rows; as ``scatter_sub(self, ...)``."""
        from tf_accum.graph.scatter import scatter_sub

        return scatter_sub(self, *_rows_of(sparse_delta), name=name)

    def scatter_update(self, sparse_delta: Any, use_locking: bool = False, name: Any = None) -> Any:
        """Set those rows to an IndexedSlices' rows; as ``scatter_update(self, ...)``."""
        from tf_accum.graph.scatter import scatter_update

        return scatter_update(self, *_rows_of(sparse_delta), name=name)

    def load(self, value: Any, session: Any = None) -> None:
        """Set the value in ``session`` (default: the default session) without building an op.

        As TensorFlow does, this runs the variable's initializer with ``value``
        fed as the initial value, so ``value`` must have the variable's shape.

        Raises:
            ValueError: no session given and no default session; a value of
                another shape.
            TypeError: values that do not convert to the variable's dtype.
        """
        if self._graph is None:
            self.assign(value)
            return
        from tf_accum.graph.session import get_default_session

        session = session or get_default_session()
        if session is None:
            raise ValueError(
                "Either session argument should be provided or default session should be "
                "established"
            )
        session.run(self._initializer, {self._initial_value: value})

    def is_initialized(self, name: str | None = None) -> Any:
        """Whether the variable has a value in the session that runs it: a bool
        scalar Tensor (eagerly ``numpy.True_``: an eager variable always has one)."""
        if self._graph is None:
            return np.True_
        from tf_accum.graph.initialization import initialized_op

        return initialized_op(self, name)

    def initialized_value(self) -> Any:
        """The value once initialized: a Tensor that, in a session, is the
        variable's value if it was initialized there and its initial value otherwise.

        Use it for an initial value of another variable that depends on this one.
        """
        if self._graph is None:
            return self._value.copy()
        graph = self._graph
        with graph.as_default(), graph.name_scope(None), graph.control_dependencies(None):
            op = graph.create_op(
                "InitializedValue",
                [self._handle.outputs[0], self._initial_value],
                [(self._dtype, self._shape)],
                lambda context, inputs: (store_of(context).read_or(inputs[0], inputs[1]),),
                name=f"{self._handle.name}/initialized_value",
            )
        return op.outputs[0]

    def _update(
        self,
        value: Any,
        name: str,
        apply: Callable[[VariableStore, Variable, Any], Array],
        read_value: bool,
        merged: bool = True,
    ) -> Any:
        """The op changing the value: its new value, or with ``read_value=False``
        the op itself (eagerly: the new value, or None)."""
        if self._graph is None:
            local = VariableStore()
            local._values[self] = self._value
            self._value = apply(local, self, infer_array(value, self._dtype))
            fresh: Array = self._value.copy()
            return fresh if read_value else None
        graph = mode.building_graph() or self._graph
        source = graph_input(graph, value, self._dtype)
        if source.dtype != self._dtype:
            raise ValueError(
                f"Tensor conversion requested dtype {self._dtype.name} for Tensor with dtype "
                f"{source.dtype.name}: {source!r}"
            )
        if merged:
            # as TensorFlow's shape inference for AssignAdd/AssignSub: no broadcasting
            check_merge(self._shape, source.shape)
        elif not self._shape.is_compatible_with(source.shape):
            raise ValueError(f"Shapes {source.shape} and {self._shape} are incompatible")
        op = graph.create_op(
            name,
            [self._handle.outputs[0], source],
            [(self._dtype, self._shape)],
            lambda context, inputs: (apply(store_of(context), inputs[0], inputs[1]),),
            name=name,
        )
        return op.outputs[0] if read_value else op

    def __repr__(self) -> str:
        return f"<tf.Variable '{self._name}' shape={self._shape} dtype={self._dtype.name}>"

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other


class EagerHandle:
    """An eager variable's handle, as the eager training ops use it."""

    __slots__ = ("variable",)

    def __init__(self, variable: Variable) -> None:
        self.variable = variable

    @property
    def dtype(self) -> DType:
        return self.variable.dtype

    def read(self) -> Array:
        value: Array = self.variable._value
        return value

    def write(self, value: Array) -> None:
        self.variable._value = frozen(np.array(value, dtype=self.variable.dtype.numpy_dtype))

    def __repr__(self) -> str:
        return f"<handle of {self.variable!r}>"


def assign(
    ref: Variable,
    value: Any,
    validate_shape: Any = None,
    use_locking: Any = None,
    name: str | None = None,
) -> Any:
    """``ref.assign(value)``."""
    return ref.assign(value, name=name)


def assign_add(ref: Variable, value: Any, use_locking: Any = None, name: str | None = None) -> Any:
    """``ref.assign_add(value)``."""
    return ref.assign_add(value, name=name)


def assign_sub(ref: Variable, value: Any, use_locking: Any = None, name: str | None = None) -> Any:
    """``ref.assign_sub(value)``: subtract ``value`` (of the variable's shape) atomically."""
    return ref.assign_sub(value, name=name)


__all__ = [
    "Variable",
    "assign",
    "assign_add",
    "assign_sub",
]
