"""``tf.train.AdamOptimizer``: Adam, with TensorFlow's placement of epsilon.

Per step t (counted by the variables ``beta1_power`` = beta1**t and
``beta2_power`` = beta2**t, kept beside the first variable by name):
``lr_t = lr * sqrt(1 - beta2**t) / (1 - beta1**t)``,
``m = beta1 * m + (1 - beta1) * g``, ``v = beta2 * v + (1 - beta2) * g**2``,
``var -= lr_t * m / (sqrt(v) + epsilon)``. A sparse gradient updates every
row's ``m`` and ``v`` (decayed) and every row of the variable, as TensorFlow 1
does, with the given rows added to the moments.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum import raw_ops
from tf_accum.graph import mode
from tf_accum.graph.elementwise_ops import sqrt as _sqrt
from tf_accum.graph.ops import cast, group
from tf_accum.graph.optimizers.optimizer import Optimizer, cast_to
from tf_accum.graph.optimizers.slots import colocated_with
from tf_accum.graph.scatter import scatter_add
from tf_accum.graph.variables import Variable


class AdamOptimizer(Optimizer):
    """Adam: slots ``"m"`` and ``"v"`` per variable (at zero), and ``beta1_power``,
    ``beta2_power`` of the optimizer's own.

    Args:
        learning_rate, beta1, beta2, epsilon: floats, scalar Tensors or callables.
        use_locking: accepted (updates are atomic either way).
        name: default "Adam".
        use_own_namescope_for_non_slot_vars: ``beta1_power`` and
            ``beta2_power`` named under a scope of the optimizer's name.
    """

    def __init__(
        self,
        learning_rate: Any = 0.001,
        beta1: Any = 0.9,
        beta2: Any = 0.999,
        epsilon: Any = 1e-8,
        use_locking: bool = False,
        name: str = "Adam",
        use_own_namescope_for_non_slot_vars: bool = False,
    ) -> None:
        super().__init__(use_locking, name, use_own_namescope_for_non_slot_vars)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon
        self._lr_t: Any = None
        self._beta1_t: Any = None
        self._beta2_t: Any = None
        self._epsilon_t: Any = None

    def _get_beta_accumulators(self) -> tuple[Variable, Variable]:
        graph = mode.building_graph()
        beta1_power = self._get_non_slot_variable("beta1_power", graph=graph)
        beta2_power = self._get_non_slot_variable("beta2_power", graph=graph)
        assert beta1_power is not None and beta2_power is not None
        return beta1_power, beta2_power

    def _create_slots(self, var_list: list[Variable]) -> None:
        first = min(var_list, key=lambda v: v.name)
        self._create_non_slot_variable(
            np.float32(self._call_if_callable(self._beta1)), "beta1_power", first
        )
        self._create_non_slot_variable(
            np.float32(self._call_if_callable(self._beta2)), "beta2_power", first
        )
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _prepare(self) -> None:
        self._lr_t = self._tensor(self._lr, "learning_rate")
        self._beta1_t = self._tensor(self._beta1, "beta1")
        self._beta2_t = self._tensor(self._beta2, "beta2")
        self._epsilon_t = self._tensor(self._epsilon, "epsilon")

    def _slots_of(self, var: Variable) -> tuple[Variable, Variable]:
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        assert m is not None and v is not None
        return m, v

    def _resource_apply_dense(self, grad: Any, var: Variable) -> Any:
        m, v = self._slots_of(var)
        beta1_power, beta2_power = self._get_beta_accumulators()
        dtype = var.dtype
        return raw_ops.ResourceApplyAdam(
            var=var.handle,
            m=m.handle,
            v=v.handle,
            beta1_power=cast_to(_value(beta1_power), dtype),
            beta2_power=cast_to(_value(beta2_power), dtype),
            lr=cast_to(self._lr_t, dtype),
            beta1=cast_to(self._beta1_t, dtype),
            beta2=cast_to(self._beta2_t, dtype),
            epsilon=cast_to(self._epsilon_t, dtype),
            grad=grad,
            use_locking=self._use_locking,
        )

    def _resource_apply_sparse(self, grad: Any, var: Variable, indices: Any) -> Any:
        m, v = self._slots_of(var)
        beta1_power, beta2_power = self._get_beta_accumulators()
        dtype = var.dtype
        b1p, b2p = cast_to(_value(beta1_power), dtype), cast_to(_value(beta2_power), dtype)
        lr_t, beta1_t = cast_to(self._lr_t, dtype), cast_to(self._beta1_t, dtype)
        beta2_t, epsilon_t = cast_to(self._beta2_t, dtype), cast_to(self._epsilon_t, dtype)
        if mode.building_graph() is None:
            return _sparse_step_eagerly(var, m, v, grad, indices, b1p, b2p, lr_t, beta1_t,
                                        beta2_t, epsilon_t)  # fmt: skip
        graph = mode.get_default_graph()
        lr = lr_t * _sqrt(1 - b2p) / (1 - b1p)
        m_t = m.assign(m.read_value() * beta1_t)
        with graph.control_dependencies([m_t]):
            m_t = scatter_add(m, indices, grad * (1 - beta1_t))
        v_t = v.assign(v.read_value() * beta2_t)
        with graph.control_dependencies([v_t]):
            v_t = scatter_add(v, indices, (grad * grad) * (1 - beta2_t))
        var_update = var.assign_sub(lr * m_t / (_sqrt(v_t) + epsilon_t))
        return group(var_update, m_t, v_t)

    def _finish(self, update_ops: list[Any], name_scope: str) -> Any:
        beta1_power, beta2_power = self._get_beta_accumulators()
        graph = mode.building_graph()
        if graph is None:
            beta1_power.assign(beta1_power.numpy() * np.float32(self._beta1_t))
            beta2_power.assign(beta2_power.numpy() * np.float32(self._beta2_t))
            return None
        with graph.control_dependencies(update_ops), colocated_with(beta1_power):
            update_beta1 = beta1_power.assign(
                beta1_power.read_value() * cast(self._beta1_t, beta1_power.dtype)
            )
            update_beta2 = beta2_power.assign(
                beta2_power.read_value() * cast(self._beta2_t, beta2_power.dtype)
            )
        return group(*update_ops, update_beta1, update_beta2, name=name_scope)


def _value(variable: Variable) -> Any:
    """A variable's value now: a new read in graph mode, an array eagerly."""
    return variable.read_value()


def _sparse_step_eagerly(
    var: Variable, m: Variable, v: Variable, grad: Any, indices: Any, *hyper: Any
) -> None:
    b1p, b2p, lr_t, beta1_t, beta2_t, epsilon_t = hyper
    g = np.asarray(grad)
    rows = np.asarray(indices)
    one = np.ones((), var.dtype.numpy_dtype)
    lr = lr_t * np.sqrt(one - b2p) / (one - b1p)
    new_m = m.numpy() * beta1_t
    np.add.at(new_m, rows, g * (one - beta1_t))
    new_v = v.numpy() * beta2_t
    np.add.at(new_v, rows, (g * g) * (one - beta2_t))
    m.assign(new_m)
    v.assign(new_v)
    var.assign(var.numpy() - lr * new_m / (np.sqrt(new_v) + epsilon_t))


__all__ = ["AdamOptimizer"]
