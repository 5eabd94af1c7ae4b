"""``tf.train.Optimizer``: the base every TF1 optimizer shares.

``minimize(loss)`` is ``compute_gradients(loss)`` (``tf.gradients`` of the
loss with respect to the trainable variables) followed by
``apply_gradients(grads_and_vars)``, which creates the optimizer's slots
beside each variable, builds one update per variable (a training op, dense or,
for an ``IndexedSlices`` gradient, sparse with repeated indices summed first)
under the name scope ``<optimizer name>/update_<variable>``, on the
variable's device, and groups them; with a ``global_step`` it then adds 1 to
it. A subclass supplies its slots (``_create_slots``), its hyperparameters as
tensors (``_prepare``) and its dense and sparse updates.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from tf_accum.dtypes import DType, bfloat16, float16, float32, float64
from tf_accum.graph import mode
from tf_accum.graph.collections import get_collection_ref, trainable_variables
from tf_accum.graph.graph import Graph, Operation, Tensor, is_symbolic
from tf_accum.graph.ops import cast, convert_to_tensor, graph_input, group, identity
from tf_accum.graph.optimizers.slots import colocated_with, create_non_slot, create_slot
from tf_accum.graph.variables import Variable, store_of
from tf_accum.indexed_slices import IndexedSlices

TRAIN_OP = "train_op"
_VALID_DTYPES = (float16, bfloat16, float32, float64)


class Optimizer:
    """The base of the TF1 optimizers; not used directly.

    Args:
        use_locking: passed to the training ops (updates of one variable are
            atomic in tf_accum either way).
        name: the optimizer's name: the name scope of its ops and the suffix
            of its slots' names.
        use_own_namescope_for_non_slot_vars: name the optimizer's own variables
            (Adam's ``beta1_power``) under a scope of its name (``Adam/beta1_power``)
            instead of the name scope ``apply_gradients`` is called in.

    Raises:
        ValueError: an empty name.
    """

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    # a sparse gradient's rows that name one index are summed before the update
    # (False: the update adds each row, as gradient descent's scatter does)
    _sums_repeated_rows = True

    def __init__(
        self, use_locking: bool, name: str, use_own_namescope_for_non_slot_vars: bool = False
    ) -> None:
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name
        self._non_slot_scope: str | None = None
        if use_own_namescope_for_non_slot_vars:
            graph = mode.building_graph()
            with contextlib.ExitStack() as stack:
                if graph is not None:
                    stack.enter_context(graph.name_scope(None))
                    self._non_slot_scope = graph.unique_name(name) + "/"
                else:
                    self._non_slot_scope = name + "/"
        # slot name -> variable -> slot variable
        self._slots: dict[str, dict[Variable, Variable]] = {}
        # (name, graph) -> variable of the optimizer's own (Adam's beta1_power)
        self._non_slot_dict: dict[tuple[str, Any], Variable] = {}

    def get_name(self) -> str:
        return self._name

    # --- the three steps ---------------------------------------------------------------

    def minimize(
        self,
        loss: Any,
        global_step: Any = None,
        var_list: Any = None,
        gate_gradients: int = GATE_OP,
        aggregation_method: Any = None,
        colocate_gradients_with_ops: bool = False,
        name: str | None = None,
        grad_loss: Any = None,
    ) -> Any:
        """Add the ops that update ``var_list`` (default: the trainable variables) to
        lower ``loss``, and, with ``global_step``, add 1 to it after them.

        Returns:
            The Operation that makes one step (None eagerly).

        Raises:
            ValueError: no variables, or no gradient for any of them.
        """
        grads_and_vars = self.compute_gradients(
            loss,
            var_list=var_list,
            gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
            grad_loss=grad_loss,
        )
        if not [v for g, v in grads_and_vars if g is not None]:
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops that do not "
                f"support gradients, between variables {[str(v) for _, v in grads_and_vars]} "
                f"and loss {loss}."
            )
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(
        self,
        loss: Any,
        var_list: Any = None,
        gate_gradients: int = GATE_OP,
        aggregation_method: Any = None,
        colocate_gradients_with_ops: bool = False,
        grad_loss: Any = None,
    ) -> list[tuple[Any, Variable]]:
        """``[(gradient, variable), ...]`` of ``loss`` for ``var_list`` (default: the
        trainable variables); a gradient is None where the loss does not depend on it.

        Raises:
            ValueError: a bad ``gate_gradients``, a loss that is no float, no variables.
            NotImplementedError: eagerly (``tf.gradients`` differentiates graphs;
                tf_accum has no GradientTape).
        """
        if callable(loss):
            loss = loss()
        if mode.building_graph() is None:
            graph = getattr(loss, "graph", None)
            if graph is None:
                raise NotImplementedError(
                    "compute_gradients and minimize need graph mode in tf_accum: tf.gradients "
                    "differentiates a graph and there is no GradientTape; build the model in a "
                    "tf.Graph, or compute the gradients elsewhere and call apply_gradients"
                )
            with graph.as_default():
                return self.compute_gradients(
                    loss, var_list, gate_gradients, aggregation_method,
                    colocate_gradients_with_ops, grad_loss,
                )  # fmt: skip
        if gate_gradients not in (self.GATE_NONE, self.GATE_OP, self.GATE_GRAPH):
            raise ValueError(
                "gate_gradients must be one of: Optimizer.GATE_NONE, Optimizer.GATE_OP, "
                f"Optimizer.GATE_GRAPH.  Not {gate_gradients}"
            )
        self._assert_valid_dtypes([loss])
        if grad_loss is not None:
            self._assert_valid_dtypes([grad_loss])
        if var_list is None:
            variables = list(trainable_variables())
        else:
            variables = list(var_list) if isinstance(var_list, (list, tuple)) else [var_list]
        if not variables:
            raise ValueError("No variables to optimize.")
        gradients = _gradients_function()

        options = {
            "grad_ys": grad_loss,
            "gate_gradients": gate_gradients == self.GATE_OP,
            "aggregation_method": aggregation_method,
            "colocate_gradients_with_ops": colocate_gradients_with_ops,
        }
        accepted = inspect.signature(gradients).parameters
        grads = gradients(loss, variables, **{k: v for k, v in options.items() if k in accepted})
        if gate_gradients == self.GATE_GRAPH:
            grads = _gated_together(list(grads))
        grads_and_vars = list(zip(grads, variables, strict=True))
        self._assert_valid_dtypes([v for g, v in grads_and_vars if g is not None])
        return grads_and_vars

    def apply_gradients(
        self,
        grads_and_vars: Any,
        global_step: Any = None,
        name: str | None = None,
        skip_gradients_aggregation: bool = False,
    ) -> Any:
        """Add the ops that update each variable by its gradient; then, with
        ``global_step``, add 1 to it.

        Args:
            grads_and_vars: ``(gradient, variable)`` pairs; a gradient may be a
                Tensor, a value, an ``IndexedSlices`` (a sparse update of its
                rows; rows named twice are summed first) or None (skipped).
            global_step: a variable to increment once the updates are done.
            name: the name of the returned op (default: the optimizer's).
            skip_gradients_aggregation: accepted (TensorFlow's distribution
                strategies use it; tf_accum has none).

        Returns:
            The Operation that makes one step, also added to the graph's
            ``train_op`` collection (None eagerly).

        Raises:
            ValueError: no pairs, or no gradient in any of them.
            TypeError: a gradient that is no Tensor, value or IndexedSlices.
            NotImplementedError: something other than a Variable to update.
        """
        pairs = tuple(grads_and_vars)
        if not pairs:
            raise ValueError("No variables provided.")
        converted: list[tuple[Any, Variable]] = []
        for grad, var in pairs:
            if not isinstance(var, Variable):
                raise NotImplementedError(f"Trying to update a Tensor {var}")
            converted.append((None if grad is None else _gradient(grad, var), var))
        var_list = [v for g, v in converted if g is not None]
        if not var_list:
            raise ValueError(
                f"No gradients provided for any variable: {[str(v) for _, v in converted]}."
            )
        graph = mode.building_graph()
        if graph is None and var_list[0].graph is not None:
            # graph variables, and no graph being built: build in theirs
            with var_list[0].graph.as_default():
                return self.apply_gradients(pairs, global_step, name)
        self._create_slots_outside(var_list)
        if graph is None:
            self._prepare()
            for grad, var in converted:
                if grad is not None:
                    self._update(grad, var)
            self._finish([], self._name)
            if global_step is not None:
                global_step.assign_add(1)
            return None
        with graph.name_scope(name or self._name) as scope:
            self._prepare()
            update_ops: list[Any] = []
            for grad, var in converted:
                if grad is None:
                    continue
                with graph.name_scope(f"update_{var.op.name}"), colocated_with(var):
                    update_ops.append(self._update(grad, var))
            if global_step is None:
                apply_updates = self._finish(update_ops, scope)
            else:
                with (
                    graph.control_dependencies([self._finish(update_ops, "update")]),
                    _colocated_with_step(global_step),
                ):
                    apply_updates = _increment(graph, global_step, scope)
        if isinstance(apply_updates, Tensor):
            apply_updates = apply_updates.op
        train_ops = get_collection_ref(TRAIN_OP)
        if apply_updates not in train_ops:
            train_ops.append(apply_updates)
        return apply_updates

    def _create_slots_outside(self, var_list: list[Variable]) -> None:
        graph = mode.building_graph()
        if graph is None:
            self._create_slots(var_list)
            return
        with graph.control_dependencies(None):
            self._create_slots(var_list)

    def _update(self, grad: Any, var: Variable) -> Any:
        if isinstance(grad, IndexedSlices):
            if not self._sums_repeated_rows:
                return self._resource_apply_sparse(grad.values, var, grad.indices)
            values, indices = _summed_rows(grad.values, grad.indices)
            return self._resource_apply_sparse(values, var, indices)
        return self._resource_apply_dense(grad, var)

    # --- what the subclasses supply ------------------------------------------------------

    def _create_slots(self, var_list: list[Variable]) -> None:
        """Make the slots of each variable (none by default)."""

    def _prepare(self) -> None:
        """Make the hyperparameters tensors (inside the optimizer's name scope)."""

    def _resource_apply_dense(self, grad: Any, var: Variable) -> Any:
        raise NotImplementedError()

    def _resource_apply_sparse(self, grad: Any, var: Variable, indices: Any) -> Any:
        """The update of the rows ``indices`` (unique) of ``var`` by the rows ``grad``."""
        raise NotImplementedError()

    def _finish(self, update_ops: list[Any], name_scope: str) -> Any:
        """The op that makes the step: by default one that groups the updates."""
        return group(*update_ops, name=name_scope)

    # --- slots ---------------------------------------------------------------------------

    def get_slot(self, var: Variable, name: str) -> Variable | None:
        """The slot ``name`` of ``var`` (``"m"`` of Adam, ...), or None."""
        named = self._slots.get(name)
        if not named:
            return None
        return named.get(var)

    def get_slot_names(self) -> list[str]:
        """The names of the slots this optimizer makes, sorted."""
        return sorted(self._slots)

    def variables(self) -> list[Variable]:
        """The optimizer's variables of the default graph (slots and its own), sorted by name."""
        graph = mode.building_graph()
        found = [
            v
            for (_, owner), v in self._non_slot_dict.items()
            if owner is graph and v.graph is graph
        ]
        for named in self._slots.values():
            found.extend(slot for slot in named.values() if slot.graph is graph)
        return sorted(found, key=lambda v: v.name)

    def _slot_dict(self, slot_name: str) -> dict[Variable, Variable]:
        return self._slots.setdefault(slot_name, {})

    def _get_or_make_slot(
        self, var: Variable, initial: Any, slot_name: str, op_name: str
    ) -> Variable:
        named = self._slot_dict(slot_name)
        if var not in named:
            named[var] = create_slot(var, initial, op_name)
        return named[var]

    def _zeros_slot(self, var: Variable, slot_name: str, op_name: str) -> Variable:
        return self._get_or_make_slot(var, _filled(var, 0), slot_name, op_name)

    def _filled_slot(
        self, var: Variable, number: float, slot_name: str, op_name: str | None = None
    ) -> Variable:
        return self._get_or_make_slot(var, _filled(var, number), slot_name, op_name or self._name)

    def _create_non_slot_variable(
        self, initial_value: Any, name: str, colocate_with: Variable
    ) -> Variable:
        key = (name, colocate_with.graph)
        found = self._non_slot_dict.get(key)
        if found is None:
            found = create_non_slot(initial_value, name, colocate_with, self._non_slot_scope)
            self._non_slot_dict[key] = found
        return found

    def _get_non_slot_variable(self, name: str, graph: Any = None) -> Variable | None:
        return self._non_slot_dict.get((name, graph))

    # --- helpers ---------------------------------------------------------------------------

    def _call_if_callable(self, param: Any) -> Any:
        return param() if callable(param) else param

    def _tensor(self, value: Any, name: str) -> Any:
        """A hyperparameter as a tensor (a Python float becomes a float32 constant)."""
        value = self._call_if_callable(value)
        if mode.building_graph() is None:
            return value
        return convert_to_tensor(value, name=name)

    def _assert_valid_dtypes(self, tensors: Sequence[Any]) -> None:
        for t in tensors:
            dtype: DType | None = getattr(t, "dtype", None)
            if dtype is not None and dtype not in _VALID_DTYPES:
                raise ValueError(
                    f"Invalid type {dtype!r} for {getattr(t, 'name', t)}, expected: "
                    f"{list(_VALID_DTYPES)}."
                )


def _gradients_function() -> Callable[..., Any]:
    """``tf.gradients`` (tf_accum/graph/gradients.py), found when first needed."""
    module = importlib.import_module("tf_accum.graph.gradients")
    found: Callable[..., Any] = module.gradients
    return found


def cast_to(value: Any, dtype: DType) -> Any:
    """A hyperparameter in a variable's dtype (eagerly a numpy scalar)."""
    if mode.building_graph() is None:
        return dtype.numpy_dtype.type(value)
    return cast(value, dtype)


def _filled(var: Variable, number: float) -> Any:
    import numpy as np

    shape = var.shape.as_list()
    if shape is None or None in shape:
        raise ValueError(f"A slot of {var.name} needs its variable's full shape, not {var.shape}")
    return np.full(shape, number, var.dtype.numpy_dtype)


def _gradient(grad: Any, var: Variable) -> Any:
    if isinstance(grad, IndexedSlices):
        return grad
    if mode.building_graph() is None:
        return grad
    try:
        return convert_to_tensor(grad)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"Gradient must be convertible to a Tensor or IndexedSlices, or None: {grad}"
        ) from error


def _gated_together(grads: list[Any]) -> list[Any]:
    """Each gradient available only once all are (``GATE_GRAPH``)."""
    tensors = [g for g in grads if is_symbolic(g)]
    if not tensors:
        return grads
    done = group(*tensors)
    gated = []
    for g in grads:
        if is_symbolic(g) and done is not None:
            with mode.get_default_graph().control_dependencies([done]):
                gated.append(identity(g))
        else:
            gated.append(g)
    return gated


def _increment(graph: Graph, global_step: Any, name: str) -> Operation:
    """``global_step += 1``: an AssignAddVariableOp named ``name`` exactly (the train op)."""
    if not isinstance(global_step, Variable):
        raise TypeError(f"global_step must be a Variable, not {global_step!r}")
    one = graph_input(graph, 1, global_step.dtype)
    return graph.create_op(
        "AssignAddVariableOp",
        [global_step.op.outputs[0], one],
        [],
        lambda context, inputs: (store_of(context).assign_add(inputs[0], inputs[1]), ())[1],
        name=name,  # ends in "/": exact
        attrs={"dtype": global_step.dtype},
    )


def _colocated_with_step(global_step: Any) -> Any:
    if isinstance(global_step, Variable):
        return colocated_with(global_step)
    import contextlib

    return contextlib.nullcontext()


def _summed_rows(values: Any, indices: Any) -> tuple[Any, Any]:
    """(the rows summed per index, the distinct indices): TensorFlow's sparse
    training ops update a row named twice twice, an optimizer once by the sum."""
    from tf_accum.graph.array_ops import shape, unique, unsorted_segment_sum

    distinct, positions = unique(indices)
    return unsorted_segment_sum(values, positions, shape(distinct)[0]), distinct


__all__ = ["Optimizer", "cast_to"]
