"""``Variable``: the state a TF1 program keeps beside its accumulators.

A graph-mode variable is a set of ops (a handle, an initializer, reads,
assignments); its value lives in each Session separately, as TensorFlow's
resource variables do, and reading it before its initializer ran is a
FailedPreconditionError. In eager mode a Variable simply holds a numpy array.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, int64, resource
from tf_accum.graph import mode
from tf_accum.graph.graph import (
    GLOBAL_STEP,
    GLOBAL_VARIABLES,
    TRAINABLE_VARIABLES,
    Graph,
    Operation,
    Tensor,
)
from tf_accum.graph.ops import dtype_of_array, graph_input, group, infer_array
from tf_accum.graph.tensor_shape import TensorShape, as_shape

Array = np.ndarray[Any, Any]


class VariableStore:
    """One session's variable values. Values are replaced, never changed in place,
    so a value handed to a reader stays what it read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[Variable, Array] = {}

    def read(self, variable: Variable) -> Array:
        found = self._values.get(variable)
        if found is None:
            raise errors.FailedPreconditionError(
                None,
                None,
                f"Could not find variable {variable.op.name}. This could mean that the variable "
                "has been deleted. In TF1, it can also mean the variable is uninitialized. Debug "
                f"info: container=localhost, status error message=Resource localhost/"
                f"{variable.op.name}/N10tensorflow3VarE does not exist.",
            )
        return found

    def assign(self, variable: Variable, value: Any) -> Array:
        array = _frozen(np.array(value, dtype=variable.dtype.numpy_dtype))
        with self._lock:
            self._values[variable] = array
        return array

    def assign_add(self, variable: Variable, delta: Any) -> Array:
        with self._lock:
            array = _frozen(np.add(self.read(variable), delta, dtype=variable.dtype.numpy_dtype))
            self._values[variable] = array
        return array

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


def _frozen(array: Array) -> Array:
    array.setflags(write=False)
    return array


def _initialize(context: Any, inputs: list[Any]) -> tuple[()]:
    _store(context).assign(inputs[0], inputs[1])
    return ()


def _store(context: Any) -> VariableStore:
    store: VariableStore = context.session.variables
    return store


class Variable:
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
        if callable(initial_value):
            initial_value = initial_value()
        self._trainable = True if trainable is None else bool(trainable)
        graph = mode.building_graph()
        self._graph = graph
        if graph is None:
            self._value = _frozen(np.array(infer_array(initial_value, dtype)))
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
        )
        self._handle = handle
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
        for key in collections if collections is not None else [GLOBAL_VARIABLES]:
            graph.add_to_collection(key, self)
        if self._trainable and collections is None:
            graph.add_to_collection(TRAINABLE_VARIABLES, self)

    def _read_op(self, graph: Graph, name: str) -> Tensor:
        op = graph.create_op(
            "ReadVariableOp",
            [self._handle.outputs[0]],
            [(self._dtype, self._shape)],
            lambda context, inputs: (_store(context).read(inputs[0]),),
            name=name,
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
    def op(self) -> Operation:
        """The variable's handle op (graph mode only)."""
        return self._graph_only()._handle

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
        with self._graph.name_scope(f"{self._handle.name}/"):
            return self._read_op(self._graph, "Read/ReadVariableOp")

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
        """Set the value; returns the new value (a Tensor in graph mode)."""
        return self._update(
            value, name or "AssignVariableOp", lambda store, v, x: store.assign(v, x)
        )

    def assign_add(
        self, delta: Any, use_locking: Any = None, name: str | None = None, read_value: bool = True
    ) -> Any:
        """Add ``delta`` atomically; returns the new value (a Tensor in graph mode)."""
        return self._update(
            delta, name or "AssignAddVariableOp", lambda store, v, x: store.assign_add(v, x)
        )

    def _update(
        self, value: Any, name: str, apply: Callable[[VariableStore, Variable, Any], Array]
    ) -> Any:
        if self._graph is None:
            local = VariableStore()
            local._values[self] = self._value
            self._value = apply(local, self, infer_array(value, self._dtype))
            fresh: Array = self._value.copy()
            return fresh
        graph = mode.building_graph() or self._graph
        source = graph_input(graph, value, self._dtype)
        if source.dtype != self._dtype:
            raise ValueError(
                f"Tensor conversion requested dtype {self._dtype.name} for Tensor with dtype "
                f"{source.dtype.name}: {source!r}"
            )
        if not self._shape.is_compatible_with(source.shape):
            raise ValueError(f"Shapes {source.shape} and {self._shape} are incompatible")
        op = graph.create_op(
            name,
            [self._handle.outputs[0], source],
            [(self._dtype, self._shape)],
            lambda context, inputs: (apply(_store(context), inputs[0], inputs[1]),),
            name=name,
        )
        return op.outputs[0]

    def __repr__(self) -> str:
        return f"<tf.Variable '{self._name}' shape={self._shape} dtype={self._dtype.name}>"

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    def __add__(self, other: Any) -> Any:
        from tf_accum.graph.ops import add

        return add(self, other, name="add")

    def __radd__(self, other: Any) -> Any:
        from tf_accum.graph.ops import add

        return add(other, self, name="add")


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


def global_variables(scope: str | None = None) -> list[Variable]:
    """The default graph's global variables."""
    found = mode.get_default_graph().get_collection(GLOBAL_VARIABLES)
    return [v for v in found if scope is None or v.name.startswith(scope)]


def trainable_variables(scope: str | None = None) -> list[Variable]:
    found = mode.get_default_graph().get_collection(TRAINABLE_VARIABLES)
    return [v for v in found if scope is None or v.name.startswith(scope)]


def variables_initializer(var_list: list[Variable], name: str = "init") -> Operation | None:
    """An op that runs the initializers of ``var_list``."""
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer() -> Operation | None:
    """An op that initializes every global variable of the default graph (None eagerly)."""
    if mode.building_graph() is None:
        return None
    return variables_initializer(global_variables(), name="init")


def get_global_step(graph: Graph | None = None) -> Variable | None:
    """The graph's global-step variable, or None."""
    found = (graph or mode.get_default_graph()).get_collection(GLOBAL_STEP)
    return found[0] if found else None


def get_or_create_global_step(graph: Graph | None = None) -> Variable:
    """The graph's int64 scalar ``global_step`` variable, made (at 0) if missing."""
    graph = graph or mode.get_default_graph()
    existing = get_global_step(graph)
    if existing is not None:
        return existing
    with graph.as_default(), graph.name_scope(None), graph.control_dependencies(None):
        step = Variable(
            np.int64(0),
            trainable=False,
            name="global_step",
            dtype=int64,
            collections=[GLOBAL_VARIABLES, GLOBAL_STEP],
        )
    return step


__all__ = [
    "Variable",
    "assign",
    "assign_add",
    "global_variables",
    "trainable_variables",
    "variables_initializer",
    "global_variables_initializer",
    "get_global_step",
    "get_or_create_global_step",
]
