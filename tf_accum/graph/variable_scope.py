"""``tf.get_variable`` and ``tf.variable_scope``: variables by name, shared on request.

Each graph keeps its variables by full name (the variable scopes' names
joined by ``/``) and a stack of open variable scopes. ``get_variable`` makes
a variable under the current scope, or, where the scope reuses
(``reuse=True``, or ``AUTO_REUSE`` when it exists), returns the one of that
name; a variable that exists where the scope does not reuse, or one that
does not exist where it must, is TensorFlow's ValueError. A variable scope
also opens a name scope of its name for the ops built inside (made unique,
so a scope entered twice builds ``a/...`` and then ``a_1/...``), while its
variables keep the scope's own name.

Eagerly, as in TensorFlow 2, every ``get_variable`` makes a new variable.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import weakref
from typing import Any

from tf_accum.dtypes import DType, as_dtype, float32
from tf_accum.graph import mode
from tf_accum.graph.collections import GraphKeys
from tf_accum.graph.graph import Graph, is_symbolic
from tf_accum.graph.tensor_shape import TensorShape, as_shape
from tf_accum.graph.variables import Variable


class _ReuseMode(enum.Enum):
    AUTO_REUSE = 1


AUTO_REUSE = _ReuseMode.AUTO_REUSE


class VariableSynchronization(enum.Enum):
    """When a distributed variable's copies are brought together (accepted; a
    tf_accum variable has one copy)."""

    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


class VariableAggregation(enum.Enum):
    """How a distributed variable's updates combine (accepted; a tf_accum
    variable has one copy)."""

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3


class VariableScope:
    """A variable scope: its ``name``, whether it ``reuse``s variables, and the
    defaults (``initializer``, ``dtype``, ``regularizer``) its variables get."""

    def __init__(
        self,
        reuse: Any,
        name: str = "",
        initializer: Any = None,
        regularizer: Any = None,
        dtype: Any = float32,
        name_scope: str = "",
    ) -> None:
        self._reuse = reuse
        self._name = name
        self._initializer = initializer
        self._regularizer = regularizer
        self._dtype = as_dtype(dtype)
        self._name_scope = name_scope

    @property
    def name(self) -> str:
        return self._name

    @property
    def original_name_scope(self) -> str:
        return self._name_scope

    @property
    def reuse(self) -> Any:
        return self._reuse

    @property
    def initializer(self) -> Any:
        return self._initializer

    @property
    def regularizer(self) -> Any:
        return self._regularizer

    @property
    def dtype(self) -> DType:
        return self._dtype

    def reuse_variables(self) -> None:
        """Reuse variables from now on in this scope."""
        self._reuse = True

    def set_initializer(self, initializer: Any) -> None:
        self._initializer = initializer

    def set_dtype(self, dtype: Any) -> None:
        self._dtype = as_dtype(dtype)

    def set_regularizer(self, regularizer: Any) -> None:
        self._regularizer = regularizer

    def get_variable(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``get_variable`` with this scope's name, reuse and defaults."""
        with variable_scope(self):
            return get_variable(name, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<VariableScope name={self._name!r} reuse={self._reuse!r}>"


class _Store:
    """One graph's variables by full name, its open variable scopes, and how
    many times each scope name was opened (for unique default names)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.variables: dict[str, Variable] = {}
        self.scopes: list[VariableScope] = [VariableScope(False)]
        self.opened: dict[str, int] = {}


_stores: weakref.WeakKeyDictionary[Graph, _Store] = weakref.WeakKeyDictionary()
_stores_lock = threading.Lock()
_eager_store = _Store()


def _store() -> _Store:
    graph = mode.building_graph()
    if graph is None:
        return _eager_store
    with _stores_lock:
        found = _stores.get(graph)
        if found is None:
            found = _stores[graph] = _Store()
        return found


def get_variable_scope() -> VariableScope:
    """The variable scope open now (the root scope, named ``""``, outside any)."""
    return _store().scopes[-1]


def _unique_scope_name(store: _Store, prefix: str, base: str) -> str:
    full = f"{prefix}/{base}" if prefix else base
    count = store.opened.get(full, 0)
    name = base if count == 0 else f"{base}_{count}"
    while (f"{prefix}/{name}" if prefix else name) in store.opened:
        count += 1
        name = f"{base}_{count}"
    return name


class variable_scope:  # noqa: N801 - TensorFlow's name
    """Open a variable scope (and a name scope of the same name) for a ``with`` block.

    Args:
        name_or_scope: a name, or a VariableScope to enter again.
        default_name: the name (made unique) when ``name_or_scope`` is None.
        initializer, regularizer, dtype: defaults for the scope's variables.
        reuse: True to share existing variables, ``AUTO_REUSE`` to share or
            make them; None or False inherit the enclosing scope's.
        auxiliary_name_scope: False to open no name scope.

    Raises:
        TypeError: neither a name nor a default name, or a name that is
            neither a string nor a VariableScope.
        ValueError: ``default_name`` with ``reuse=True``.
    """

    def __init__(
        self,
        name_or_scope: Any,
        default_name: str | None = None,
        values: Any = None,
        initializer: Any = None,
        regularizer: Any = None,
        caching_device: Any = None,
        partitioner: Any = None,
        custom_getter: Any = None,
        reuse: Any = None,
        dtype: Any = None,
        use_resource: Any = None,
        constraint: Any = None,
        auxiliary_name_scope: bool = True,
    ) -> None:
        if name_or_scope is None and default_name is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if reuse is False:
            reuse = None
        if name_or_scope is None and reuse is True:
            raise ValueError("reuse=True cannot be used without a name_or_scope")
        if name_or_scope is not None and not isinstance(name_or_scope, (str, VariableScope)):
            raise TypeError("VariableScope: name_or_scope must be a string or VariableScope.")
        _refuse_unsupported(partitioner=partitioner, custom_getter=custom_getter)
        self._name_or_scope = name_or_scope
        self._default_name = default_name
        self._initializer = initializer
        self._regularizer = regularizer
        self._reuse = reuse
        self._dtype = dtype
        self._auxiliary_name_scope = auxiliary_name_scope
        self._exits = contextlib.ExitStack()
        self._scope: VariableScope | None = None
        self._store = _eager_store

    def __enter__(self) -> VariableScope:
        name_or_scope, reuse = self._name_or_scope, self._reuse
        store = _store()
        graph = mode.building_graph()
        with store.lock:
            parent = store.scopes[-1]
            if isinstance(name_or_scope, VariableScope):
                full_name = name_or_scope.name
                inherited = name_or_scope
                scope_reuse = reuse if reuse is not None else name_or_scope.reuse
                short = full_name.rsplit("/", 1)[-1]
            else:
                short = (
                    name_or_scope
                    if name_or_scope is not None
                    else _unique_scope_name(store, parent.name, str(self._default_name))
                )
                full_name = f"{parent.name}/{short}" if parent.name else short
                inherited = parent
                scope_reuse = reuse or parent.reuse
            store.opened[full_name] = store.opened.get(full_name, 0) + 1
        name_scope = ""
        if graph is not None and self._auxiliary_name_scope:
            if isinstance(name_or_scope, VariableScope) and name_or_scope.original_name_scope:
                # as TensorFlow: a new name scope named as the scope's first one
                entered = graph.name_scope(name_or_scope.original_name_scope.rstrip("/"))
            else:
                entered = graph.name_scope(short)
            name_scope = self._exits.enter_context(entered)
            if isinstance(name_or_scope, VariableScope) and name_or_scope.original_name_scope:
                name_scope = name_or_scope.original_name_scope
        scope = VariableScope(
            scope_reuse,
            name=full_name,
            initializer=(
                self._initializer if self._initializer is not None else inherited.initializer
            ),
            regularizer=(
                self._regularizer if self._regularizer is not None else inherited.regularizer
            ),
            dtype=self._dtype if self._dtype is not None else inherited.dtype,
            name_scope=name_scope,
        )
        with store.lock:
            store.scopes.append(scope)
        self._scope, self._store = scope, store
        return scope

    def __exit__(self, *exc_info: Any) -> None:
        with self._store.lock:
            if self._scope in self._store.scopes:
                self._store.scopes.remove(self._scope)
        self._exits.close()


def _refuse_unsupported(**arguments: Any) -> None:
    """NotImplementedError for an argument tf_accum does not act on, rather than ignoring it."""
    given = [name for name, value in arguments.items() if value is not None]
    if given:
        raise NotImplementedError(
            f"tf_accum's get_variable and variable_scope do not support {', '.join(given)}"
        )


def _default_initializer(name: str, dtype: DType) -> Any:
    from tf_accum.graph import initializers

    if dtype.is_floating:
        return initializers.glorot_uniform_initializer()
    if dtype.is_integer or dtype.name in ("bool", "string"):
        return initializers.zeros_initializer()
    raise ValueError(f"An initializer for variable {name} of {dtype.name} is required")


def get_variable(
    name: str,
    shape: Any = None,
    dtype: Any = None,
    initializer: Any = None,
    regularizer: Any = None,
    trainable: Any = None,
    collections: Any = None,
    caching_device: Any = None,
    partitioner: Any = None,
    validate_shape: bool = True,
    use_resource: Any = None,
    custom_getter: Any = None,
    constraint: Any = None,
    synchronization: Any = VariableSynchronization.AUTO,
    aggregation: Any = VariableAggregation.NONE,
) -> Variable:
    """The variable ``name`` of the current variable scope: made, or (where
    the scope reuses) the existing one.

    A new variable's initial value is ``initializer`` (a value or Tensor, or
    an initializer called with ``shape`` and ``dtype``); without one, the
    scope's, else ``glorot_uniform_initializer`` for floats and zeros for
    integers. ``dtype`` defaults to the scope's (float32).

    Raises:
        ValueError: the variable exists and the scope does not reuse; it does not
            exist and the scope reuses (not ``AUTO_REUSE``); a shared variable
            of another shape or dtype; the shape of a new variable is not fully
            defined; a shape given with a value as initializer.
        NotImplementedError: a ``partitioner``, ``custom_getter`` or ``constraint``.
    """
    _refuse_unsupported(partitioner=partitioner, custom_getter=custom_getter, constraint=constraint)
    store = _store()
    scope = store.scopes[-1]
    full_name = f"{scope.name}/{name}" if scope.name else name
    wanted = as_dtype(dtype) if dtype is not None else scope.dtype
    static = TensorShape(None) if shape is None else as_shape(shape)
    graph = mode.building_graph()
    with store.lock:
        found = store.variables.get(full_name) if graph is not None else None
        if found is not None:
            if scope.reuse is None or scope.reuse is False:
                raise ValueError(
                    f"Variable {full_name} already exists, disallowed. Did you mean to set "
                    "reuse=True or reuse=tf.AUTO_REUSE in VarScope?"
                )
            if shape is not None and not static.is_compatible_with(found.shape):
                raise ValueError(
                    f"Trying to share variable {full_name}, but specified shape {static} and "
                    f"found shape {found.shape}."
                )
            if dtype is not None and wanted != found.dtype:
                raise ValueError(
                    f"Trying to share variable {full_name}, but specified dtype {wanted.name} and "
                    f"found dtype {found.dtype.name}."
                )
            return found
        if scope.reuse is True:
            raise ValueError(
                f"Variable {full_name} does not exist, or was not created with tf.get_variable(). "
                "Did you mean to set reuse=tf.AUTO_REUSE in VarScope?"
            )
        variable = _new_variable(
            graph, full_name, static, shape, wanted,
            initializer if initializer is not None else scope.initializer,
            trainable, collections, validate_shape,
        )  # fmt: skip
        if graph is not None:
            store.variables[full_name] = variable
    chosen_regularizer = regularizer if regularizer is not None else scope.regularizer
    if chosen_regularizer is not None and graph is not None:
        with graph.name_scope(f"{full_name}/Regularizer/"):
            loss = chosen_regularizer(variable)
        if loss is not None:
            graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return variable


def _new_variable(
    graph: Graph | None,
    full_name: str,
    static: TensorShape,
    shape: Any,
    dtype: DType,
    initializer: Any,
    trainable: Any,
    collections: Any,
    validate_shape: bool,
) -> Variable:
    from_value = initializer is not None and (is_symbolic(initializer) or not callable(initializer))
    if from_value and shape is not None:
        raise ValueError("If initializer is a constant, do not specify shape.")
    if not from_value and static.rank is None:
        if initializer is None:
            raise ValueError(
                f"Variable {full_name} did not get an initializer, so its `shape` argument must "
                "be specified."
            )
        raise ValueError(
            f"Shape of a new variable ({full_name}) must be fully defined, but instead was "
            f"{static}."
        )
    if not from_value and not static.is_fully_defined():
        raise ValueError(
            "The initializer passed is not valid. It should be a callable with no arguments and "
            "the shape should not be provided or an instance of `tf.keras.initializers.*' and "
            "`shape` should be fully defined."
        )
    if initializer is None:
        initializer = _default_initializer(full_name, dtype)
    if isinstance(initializer, type):
        initializer = initializer()

    def initial_value() -> Any:
        if from_value:
            return initializer
        return initializer(static.as_list(), dtype=dtype)

    value_dtype = None if from_value else dtype
    if graph is None:
        return Variable(initial_value(), trainable=trainable, collections=collections,
                        name=full_name, dtype=value_dtype)  # fmt: skip
    # as TensorFlow: outside any name scope or control dependency, the initial
    # value's ops under "<name>/Initializer/"
    with graph.as_default(), graph.name_scope(""), graph.control_dependencies(None):
        with graph.name_scope(f"{full_name}/Initializer/"):
            value = initial_value()
        return Variable(
            value,
            trainable=trainable,
            collections=collections,
            validate_shape=validate_shape,
            name=full_name,
            dtype=value_dtype,
        )
