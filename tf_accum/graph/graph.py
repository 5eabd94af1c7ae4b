"""``Graph``, ``Operation`` and ``Tensor``: ops built now, run later by a Session.

An Operation holds what to compute (a kernel: a Python function of its input
values) and where its inputs come from; building one runs nothing. Graphs
only grow: an operation never changes once built, which is what lets a
Session cache how to run a set of fetches.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tf_accum.dtypes import DType
from tf_accum.graph import mode
from tf_accum.graph.operators import TensorOperators
from tf_accum.graph.tensor_shape import TensorShape, as_shape

if TYPE_CHECKING:
    from tf_accum.graph.executor import RunContext

# kernel(context, input values) -> output values (a sequence, one per output)
Kernel = Callable[["RunContext", list[Any]], Sequence[Any]]

GLOBAL_VARIABLES = "variables"
TRAINABLE_VARIABLES = "trainable_variables"
LOCAL_VARIABLES = "local_variables"
GLOBAL_STEP = "global_step"

_VALID_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$")


class Operation:
    """A node of a graph: its type, name, inputs and outputs.

    Built by the graph's op constructors (raw ops, ``placeholder``,
    ``constant``, ...), never directly. ``run()`` executes it in a session.
    """

    def __init__(
        self,
        graph: Graph,
        op_type: str,
        name: str,
        inputs: Sequence[Tensor],
        outputs: Sequence[tuple[DType, TensorShape]],
        kernel: Kernel,
        control_inputs: Sequence[Operation] = (),
        attrs: dict[str, Any] | None = None,
        blocking: bool = False,
        effects: bool = True,
    ) -> None:
        self._graph = graph
        self._type = op_type
        self._name = name
        self._inputs = tuple(inputs)
        self._control_inputs = tuple(control_inputs)
        self._outputs = tuple(
            Tensor(self, i, dtype, shape) for i, (dtype, shape) in enumerate(outputs)
        )
        self.kernel = kernel
        self._attrs = dict(attrs or {})
        # A blocking op (a take) may wait for ops of the same run: a session
        # runs it on a thread of its own when anything else is still to do.
        self.blocking = blocking
        # False for an op whose kernel changes nothing and calls nothing outside: a
        # cluster run may run it again (see remote_run's reads ahead)
        self.effects = effects
        self._device = ""

    @property
    def name(self) -> str:
        return self._name

    @property
    def type(self) -> str:
        return self._type

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return self._inputs

    @property
    def device(self) -> str:
        """The op's device, as TensorFlow spells it (``"/job:ps/task:0"``; "" when unplaced)."""
        return self._device

    def _set_device(self, device: str) -> None:
        self._device = device

    @property
    def control_inputs(self) -> tuple[Operation, ...]:
        return self._control_inputs

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return self._outputs

    def get_attr(self, name: str) -> Any:
        """An attribute the op was built with (``dtype``, ``shape``, ``shared_name``, ...).

        Raises:
            ValueError: the op has no such attribute.
        """
        if name not in self._attrs:
            raise ValueError(f"Operation '{self._name}' has no attr named '{name}'.")
        return self._attrs[name]

    @property
    def node_def(self) -> Any:
        """This op as TensorFlow's NodeDef protocol buffer (name, op, inputs with
        ``^`` control inputs, device, attributes); needs protobuf."""
        from tf_accum.graph.node_def import node_def

        return node_def(self)

    def run(self, feed_dict: Any = None, session: Any = None) -> None:
        """Run this op in ``session`` (default: the default session).

        Raises:
            ValueError: no session given and no default session.
        """
        from tf_accum.graph.session import session_for

        session_for(self._graph, session, "operation", "run").run(self, feed_dict)

    def __repr__(self) -> str:
        return f"<tf.Operation '{self._name}' type={self._type}>"


class Tensor(TensorOperators):
    """An output of an Operation: a value that exists only while a session runs.

    Use it as an input of other ops, fetch it with ``Session.run``, or
    ``eval()`` it in the default session.
    """

    def __init__(self, op: Operation, value_index: int, dtype: DType, shape: TensorShape) -> None:
        self._op = op
        self._value_index = value_index
        self._dtype = dtype
        self._shape = shape

    @property
    def op(self) -> Operation:
        return self._op

    @property
    def value_index(self) -> int:
        return self._value_index

    @property
    def name(self) -> str:
        return f"{self._op.name}:{self._value_index}"

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def device(self) -> str:
        """Its op's device, as TensorFlow spells it ("" when unplaced)."""
        return self._op.device

    @property
    def graph(self) -> Graph:
        return self._op.graph

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape: Any) -> None:
        """Refine the static shape.

        Raises:
            ValueError: ``shape`` contradicts what is known.
        """
        self._shape = self._shape.merge_with(as_shape(shape))

    def eval(self, feed_dict: Any = None, session: Any = None) -> Any:
        """This tensor's value in ``session`` (default: the default session).

        Raises:
            ValueError: no session given and no default session.
        """
        from tf_accum.graph.session import session_for

        return session_for(self.graph, session, "tensor", "eval").run(self, feed_dict)

    def consumers(self) -> list[Operation]:
        return [op for op in self.graph.get_operations() if self in op.inputs]

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise NotImplementedError(
            f"Cannot convert a symbolic tf.Tensor ({self.name}) to a numpy array: it has a "
            "value only while a Session runs it (fetch it with session.run)."
        )

    def __bool__(self) -> bool:
        raise TypeError(
            "Using a `tf.Tensor` as a Python `bool` is not allowed in Graph execution: it "
            "has no value until a Session runs it."
        )

    def __len__(self) -> int:
        raise TypeError(f"len is not well defined for a symbolic Tensor ({self.name}).")

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        # TF1 semantics: graph tensors compare by identity, so they can be dict keys.
        return self is other

    def __repr__(self) -> str:
        return f"<tf.Tensor '{self.name}' shape={self._shape} dtype={self._dtype.name}>"

    def __str__(self) -> str:
        return f'Tensor("{self.name}", shape={self._shape}, dtype={self._dtype.name})'


class _BuildState(threading.local):
    """What ``name_scope`` and ``control_dependencies`` set up, per thread."""

    def __init__(self) -> None:
        self.scope = ""
        self.control: list[list[Operation] | None] = []
        self.devices: list[Any] = []  # see tf_accum.graph.devices
        self.gradient_overrides: dict[str, str] = {}


class Graph:
    """A TensorFlow 1 graph: the ops built while it is the default.

    Building is thread-safe; name scopes and control dependencies are per
    thread (``switch_to_thread_local`` is accepted and changes nothing).
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._ops: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._collections: dict[str, list[Any]] = {}
        self._finalized = False
        self._build = _BuildState()

    # --- the default graph -----------------------------------------------------

    @contextlib.contextmanager
    def as_default(self) -> Iterator[Graph]:
        """Make this the graph ops build into, on this thread, inside the block."""
        mode.push_graph(self)
        try:
            yield self
        finally:
            mode.pop_graph(self)

    def switch_to_thread_local(self) -> None:
        """Accepted for compatibility: name scopes and control dependencies are per thread already."""

    # --- building --------------------------------------------------------------

    def finalize(self) -> None:
        """Make the graph read-only: building any further op raises RuntimeError."""
        self._finalized = True

    @property
    def finalized(self) -> bool:
        return self._finalized

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """``name`` under the current name scope, with ``_1``, ``_2``... if taken."""
        full = f"{self._build.scope}{name}" if self._build.scope else name
        with self._lock:
            key = full.lower()
            count = self._names_in_use.get(key, 0)
            candidate = full
            if count:
                while True:
                    candidate = f"{full}_{count}"
                    if candidate.lower() not in self._names_in_use:
                        break
                    count += 1
            if mark_as_used:
                self._names_in_use[key] = count + 1
                self._names_in_use.setdefault(candidate.lower(), 1)
            return candidate

    def create_op(
        self,
        op_type: str,
        inputs: Sequence[Tensor],
        outputs: Sequence[tuple[DType, TensorShape]],
        kernel: Kernel,
        name: str | None = None,
        attrs: dict[str, Any] | None = None,
        blocking: bool = False,
        control_inputs: Sequence[Operation] = (),
        effects: bool = True,
    ) -> Operation:
        """Add an op built under the current name scope and control dependencies.

        Raises:
            RuntimeError: the graph is finalized.
            ValueError: an input belongs to another graph, or the name is invalid.
        """
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")
        base = name if name else op_type
        if not _VALID_NAME.match(base.rstrip("/")):
            raise ValueError(f"'{base}' is not a valid node name")
        for tensor in inputs:
            if tensor.graph is not self:
                raise ValueError(
                    f"Tensor {tensor.name} must be from the same graph as the op being built "
                    f"({op_type})."
                )
        override = self._build.gradient_overrides.get(op_type)
        if override is not None:
            attrs = {**(attrs or {}), "_gradient_op_type": override}
        controls = list(control_inputs)
        for group in self._build.control:
            if group is None:
                controls = list(control_inputs)
                continue
            controls.extend(group)
        with self._lock:
            if self._finalized:
                raise RuntimeError("Graph is finalized and cannot be modified.")
            op_name = base[:-1] if base.endswith("/") else self.unique_name(base)
            op = Operation(
                self,
                op_type,
                op_name,
                inputs,
                outputs,
                kernel,
                _unique(controls),
                attrs,
                blocking,
                effects,
            )
            self._ops[op_name] = op
        if self._build.devices:
            from tf_accum.graph.devices import apply_device_stack

            apply_device_stack(op, self._build.devices)
        return op

    @contextlib.contextmanager
    def name_scope(self, name: str | None) -> Iterator[str]:
        """Prefix the names of ops built inside with ``name/`` (made unique)."""
        previous = self._build.scope
        if not name:
            scope = ""
        elif name.endswith("/"):
            scope = name
        else:
            scope = self.unique_name(name) + "/"
        self._build.scope = scope
        try:
            yield scope
        finally:
            self._build.scope = previous

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict[str, str]) -> Iterator[None]:
        """Ops of the given types built inside take their gradient from the function
        registered under the mapped name (``{"Identity": "MyIdentityGrad"}``).

        Raises:
            TypeError: a key or value that is not a string.
        """
        for key, value in op_type_map.items():
            if not (isinstance(key, str) and isinstance(value, str)):
                raise TypeError("op_type_map must be a dictionary mapping strings to strings")
        previous = self._build.gradient_overrides
        self._build.gradient_overrides = {**previous, **op_type_map}
        try:
            yield
        finally:
            self._build.gradient_overrides = previous

    def device(self, device_name_or_function: Any) -> Any:
        """Place the ops built inside (see ``tf_accum.graph.devices.device``)."""
        from tf_accum.graph.devices import device_scope

        return device_scope(self, device_name_or_function)

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs: Any) -> Iterator[None]:
        """Ops built inside run only after ``control_inputs`` (ops or tensors).

        ``None`` clears the dependencies of enclosing blocks.
        """
        group: list[Operation] | None
        if control_inputs is None:
            group = None
        else:
            group = []
            for item in control_inputs:
                group.append(_as_operation(self, item))
        self._build.control.append(group)
        try:
            yield
        finally:
            self._build.control.pop()

    # --- finding ---------------------------------------------------------------

    def get_operations(self) -> list[Operation]:
        with self._lock:
            return list(self._ops.values())

    def as_graph_def(self, from_version: Any = None, add_shapes: bool = False) -> Any:
        """The graph as TensorFlow's GraphDef protocol buffer: every op's
        ``node_def``, in the order they were made; needs protobuf."""
        from tf_accum.graph.node_def import graph_def

        return graph_def(self)

    def get_operation_by_name(self, name: str) -> Operation:
        """The op called ``name``.

        Raises:
            KeyError: no such op.
            TypeError: ``name`` is not a string.
        """
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings (or similar), not {type(name).__name__}.")
        found = self._ops.get(name)
        if found is None:
            raise KeyError(f"The name '{name}' refers to an Operation not in the graph.")
        return found

    def get_tensor_by_name(self, name: str) -> Tensor:
        """The tensor called ``name`` (``"op_name:index"``).

        Raises:
            ValueError: ``name`` is an op's name, not a tensor's.
            KeyError: no such tensor.
        """
        if not isinstance(name, str):
            raise TypeError(f"Tensor names are strings (or similar), not {type(name).__name__}.")
        op_name, sep, index = name.rpartition(":")
        if not sep or not index.isdigit():
            if name in self._ops:
                raise ValueError(
                    f"The name '{name}' refers to an Operation, not a Tensor. Tensor names must "
                    'be of the form "<op_name>:<output_index>".'
                )
            raise ValueError(
                f"The name '{name}' looks a like a Tensor name, but is not a valid one. Tensor "
                'names must be of the form "<op_name>:<output_index>".'
            )
        op = self._ops.get(op_name)
        if op is None:
            raise KeyError(
                f"The name '{name}' refers to a Tensor which does not exist. The operation, "
                f"'{op_name}', does not exist in the graph."
            )
        position = int(index)
        if position >= len(op.outputs):
            raise KeyError(
                f"The name '{name}' refers to a Tensor which does not exist. The operation, "
                f"'{op_name}', exists but only has {len(op.outputs)} outputs."
            )
        return op.outputs[position]

    def as_graph_element(self, obj: Any) -> Tensor | Operation:
        """``obj`` (a Tensor, Operation, Variable or name) as this graph's element.

        Raises:
            ValueError: it belongs to another graph.
            TypeError: it is none of those.
            KeyError: no element of that name.
        """
        if isinstance(obj, str):
            return self.get_tensor_by_name(obj) if ":" in obj else self.get_operation_by_name(obj)
        element = getattr(obj, "graph_element", None)
        if element is not None:
            obj = element
        if isinstance(obj, (Tensor, Operation)):
            if obj.graph is not self:
                kind = "Tensor" if isinstance(obj, Tensor) else "Operation"
                raise ValueError(f"{kind} {obj} is not an element of this graph.")
            return obj
        raise TypeError(f"Can not convert a {type(obj).__name__} into a Tensor or Operation.")

    # --- collections -----------------------------------------------------------

    def add_to_collection(self, name: str, value: Any) -> None:
        with self._lock:
            self._collections.setdefault(name, []).append(value)

    def get_collection(self, name: str, scope: str | None = None) -> list[Any]:
        """A copy of collection ``name``; with ``scope``, the items whose name matches it."""
        with self._lock:
            items = list(self._collections.get(name, ()))
        if scope is None:
            return items
        pattern = re.compile(scope)
        return [
            i for i in items if isinstance(getattr(i, "name", None), str) and pattern.match(i.name)
        ]

    def get_collection_ref(self, name: str) -> list[Any]:
        """Collection ``name`` itself (made empty if missing): changes to it are the graph's."""
        with self._lock:
            return self._collections.setdefault(name, [])

    def get_all_collection_keys(self) -> list[str]:
        with self._lock:
            return list(self._collections)


def _as_operation(graph: Graph, item: Any) -> Operation:
    element = getattr(item, "graph_element", item)
    if isinstance(element, Tensor):
        return element.op
    if isinstance(element, Operation):
        return element
    raise TypeError(
        f"Can not convert a {type(item).__name__} into an Operation for control_dependencies."
    )


def _unique(ops: list[Operation]) -> list[Operation]:
    seen: set[int] = set()
    kept = []
    for op in ops:
        if id(op) not in seen:
            seen.add(id(op))
            kept.append(op)
    return kept


def is_symbolic(value: Any) -> bool:
    """Whether ``value`` is a graph Tensor (or a Variable standing for one)."""
    return isinstance(value, Tensor) or hasattr(value, "graph_element")
