"""The steps of a request to a task's host: how a session writes them, and how the
host runs those of the graph's own kinds.

A request is a list of steps in dependency order, pickled once per shape of
request (see tf_accum.graph.remote_run): ``(MAKE, op_type, op_name, attrs)``
makes an accumulator, ``(RAW, op_type, input_names, attrs, sources,
n_outputs)`` calls a raw op (both run by every host: see
tf_accum.distributed.steps), ``(VAR, method, variable_name, dtype_name,
sources)`` reads or updates a variable, ``(TRAIN, op_type, variables,
(input_names, attrs), sources)`` runs a training op on variables (a
variable and its slots) by name, ``(KERNEL, op_type, op_name, kernel,
sources)`` calls a graph op's own kernel (a cheap op without state that the
session moved to the host, see ``HOST_KERNEL_TYPES``). Each source says where an input
comes from: ``(VALUE, value)`` in the steps, ``(STEP, index, output)`` an
earlier step's output, or ``(SLOT, index)`` the request's values (what
changes from run to run). The steps travel pickled together with the
indices of those whose outputs no op outside the request uses and the run
does not fetch (their answer leaves them out). The host decodes a request's
steps once (a session sends the same ones every run) and runs them
(tf_accum.distributed.host, with tf_accum.graph.task_host for the graph's kinds).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tf_accum import errors
from tf_accum.distributed.steps import MAKE, RAW, SLOT, STEP, VALUE
from tf_accum.dtypes import DType, as_dtype
from tf_accum.graph.scatter import CHANGES, changed_rows
from tf_accum.graph.scatter import METHODS as SCATTER_METHODS
from tf_accum.raw_ops.op_table import OPS as NODE_SPECS
from tf_accum.raw_ops.training import TRAINING_OPS, check_kernel_dtype, updated_values

if TYPE_CHECKING:
    from tf_accum.graph.graph import Operation, Tensor

# Step kinds of the graph's own (a task's host runs them through tf_accum.graph.task_host).
VAR, TRAIN, KERNEL = "var", "train", "kernel"

# Op types of variables that run on the variable's task, and what they do there.
VARIABLE_METHODS = {
    "ReadVariableOp": "read",
    "AssignVariableOp": "assign",
    "AssignAddVariableOp": "assign_add",
    "AssignSubVariableOp": "assign_sub",
    "VarIsInitializedOp": "initialized",
    "ResourceGather": "gather",
    **SCATTER_METHODS,
}


# Ops without state, cheap, whose kernels read nothing of the run but their inputs: one
# whose inputs all come from one host's ops (or constants) and whose users all run on
# that host runs there too (a KERNEL step), saving the round trip that running it
# here between two requests would cost. TensorFlow places them there too: an
# optimizer's beta-power updates and the sync-replicas tokens are colocated with
# their variables.
HOST_KERNEL_TYPES = frozenset({"NoOp", "Identity", "Mul", "AddV2", "Sub", "Fill"})
# A kernel travels pickled by value in its request's steps; one that pickles larger
# than this (a closure holding much) stays in the session's process.
HOST_KERNEL_BYTES = 16 * 1024


@dataclass(frozen=True)
class _Op:
    name: str


@dataclass(frozen=True)
class VariableKey:
    """A variable as the host knows it: by name (shared by every session) and dtype."""

    name: str
    dtype_name: str

    @property
    def op(self) -> _Op:
        return _Op(self.name)

    @property
    def dtype(self) -> DType:
        return as_dtype(self.dtype_name)


def variable_step(store: Any, step: tuple[Any, ...], values: list[Any]) -> tuple[Any, ...]:
    """Run a VAR step on ``store`` (a VariableStore) with its input ``values``.

    Raises:
        what the store's operation raises (FailedPreconditionError for an
        uninitialised variable, say); UnimplementedError for an unknown method.
    """
    _, method, name, dtype_name, _sources = step
    # the store only asks a variable for its name and dtype, which a key has
    key = VariableKey(name, dtype_name)
    if method == "read":
        return (store.read(key),)
    if method == "initialized":
        try:
            store.read(key)
        except errors.FailedPreconditionError:
            return (np.bool_(False),)
        return (np.bool_(True),)
    if method == "gather":
        from tf_accum.graph.array_ops import gathered_rows

        return (gathered_rows(store.read(key), values[0]),)
    if method == "assign":
        return (store.assign(key, values[0]),)
    if method == "assign_add":
        return (store.assign_add(key, values[0]),)
    if method == "assign_sub":
        subtract = getattr(store, "assign_sub", None)
        if subtract is not None:
            return (subtract(key, values[0]),)
        return (store.assign_add(key, np.negative(np.asarray(values[0]))),)
    if method in CHANGES:
        indices, updates = values
        changed = functools.partial(changed_rows, indices=indices, updates=updates, method=method)
        return (store.update(key, changed),)
    raise errors.UnimplementedError(None, None, f"No variable operation {method!r} on a task")


def kernel_step(step: tuple[Any, ...], values: list[Any]) -> tuple[Any, ...]:
    """Run a KERNEL step (a graph op's own kernel) on its input ``values``.

    Raises:
        what the kernel raises.
    """
    return tuple(step[3](_kernel_context(), values))


@functools.cache
def _kernel_context() -> Any:
    """The run context of every KERNEL step: these kernels ask nothing of the run
    (no session here), so one serves them all."""
    from tf_accum.accumulators.attempts import Cancellation
    from tf_accum.graph.executor import RunContext

    return RunContext(None, None, Cancellation())  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1024)
def _training_variables(op_type: str, variables: tuple[tuple[str, str], ...]) -> list[VariableKey]:
    """A TRAIN step's variables as the host's store knows them, once their dtype is
    checked (a host runs the same steps every run)."""
    keys = [VariableKey(name, dtype_name) for name, dtype_name in variables]
    check_kernel_dtype(op_type, keys[0].dtype)
    return keys


def training_step(store: Any, step: tuple[Any, ...], values: list[Any]) -> tuple[Any, ...]:
    """Run a TRAIN step on ``store`` (a VariableStore) with its other inputs ``values``.

    Raises:
        what the training op raises (FailedPreconditionError for an
        uninitialised variable, InvalidArgumentError for bad shapes).
    """
    _, op_type, variables, (names, attrs), _sources = step
    keys = _training_variables(op_type, variables)
    given = {name: np.asarray(value) for name, value in zip(names, values, strict=True)}
    fresh = store.update_together(
        keys, lambda current: updated_values(op_type, current, given, attrs)
    )
    return () if TRAINING_OPS[op_type].resource else (fresh[0],)


# --- writing a request (the session's side) ---


def write_steps(
    ops: list[Operation],
    values: dict[Tensor, Any],
    computed: dict[Operation, Any],
    slots: list[Tensor],
) -> list[tuple[Any, ...]]:
    """The steps of a request of ``ops`` (in dependency order); the tensors whose values
    each run sends are appended to ``slots``."""
    index = {op: i for i, op in enumerate(ops)}
    steps: list[tuple[Any, ...]] = []
    for op in ops:
        if op.type in HOST_KERNEL_TYPES:
            sources = tuple(_source(t, index, values, computed, slots) for t in op.inputs)
            steps.append((KERNEL, op.type, op.name, op.kernel, sources))
            continue
        attrs = dict(op._attrs)
        if op.type in VARIABLE_METHODS:
            handle_op = op.inputs[0].op
            # the variable's dtype: an update's value, a read's output, or (for
            # VarIsInitializedOp, whose output is a bool) the attr it records
            dtype = (
                attrs["dtype"].name
                if "dtype" in attrs
                else (op.inputs[1] if len(op.inputs) > 1 else op.outputs[0]).dtype.name
            )
            steps.append(
                (
                    VAR,
                    VARIABLE_METHODS[op.type],
                    handle_op.name,
                    dtype,
                    tuple(_source(t, index, values, computed, slots) for t in op.inputs[1:]),
                )
            )
            continue
        if op.type in TRAINING_OPS:
            steps.append(_training_step(op, attrs, index, values, computed, slots))
            continue
        spec = NODE_SPECS[op.type]
        if spec.constructor:
            steps.append((MAKE, op.type, op.name, attrs))
            continue
        names = tuple(arg for arg, _ in spec.inputs)
        sources = tuple(_source(t, index, values, computed, slots) for t in op.inputs)
        steps.append((RAW, op.type, names, attrs, sources, len(spec.outputs)))
    return steps


def _training_step(
    op: Operation,
    attrs: dict[str, Any],
    index: dict[Operation, int],
    values: dict[Tensor, Any],
    computed: dict[Operation, Any],
    slots: list[Tensor],
) -> tuple[Any, ...]:
    """A training op's TRAIN step: its variables by name, the other inputs as sources."""
    spec = TRAINING_OPS[op.type]
    dtype_name = attrs["T"].name
    named = dict(zip(spec.arguments, op.inputs, strict=True))
    variables = tuple((named[name].op.name, dtype_name) for name in spec.variables)
    others = tuple(a for a in spec.arguments if a not in spec.variables)
    flags = {k: v for k, v in attrs.items() if k not in ("T", "Tindices")}
    sources = tuple(_source(named[a], index, values, computed, slots) for a in others)
    return (TRAIN, op.type, variables, (others, flags), sources)


def _source(
    tensor: Tensor,
    index: dict[Operation, int],
    values: dict[Tensor, Any],
    computed: dict[Operation, Any],
    slots: list[Tensor],
) -> tuple[Any, ...]:
    """Where a step's input comes from: an earlier step of the request, a constant (the
    same every run: inline), or a slot of the values each run sends."""
    position = index.get(tensor.op)
    if position is not None and tensor not in values:
        return (STEP, position, tensor.value_index)
    if tensor.op.type == "Const" and tensor.op in computed:
        # the constant's own value, the same every run; a fed one (a plan runs a fed
        # constant when something waits for it through control_dependencies) goes in
        # a slot, as the plan is the same for every value fed
        # (a replayed run may have skipped it: its value was inline before)
        constant = tensor.op.get_attr("value")
        value = values.get(tensor, constant)
        if value is constant and value.dtype != object:
            return (VALUE, value)
    slots.append(tensor)
    return (SLOT, len(slots) - 1)
