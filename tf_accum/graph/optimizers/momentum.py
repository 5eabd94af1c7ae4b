"""``tf.train.MomentumOptimizer``: ``accum = momentum * accum + grad; var -= lr * accum``."""

from __future__ import annotations

from typing import Any

from tf_accum import raw_ops
from tf_accum.graph.optimizers.optimizer import Optimizer, cast_to
from tf_accum.graph.variables import Variable


class MomentumOptimizer(Optimizer):
    """Gradient descent with momentum; one slot ``"momentum"`` per variable, at zero.

    Args:
        learning_rate, momentum: floats, scalar Tensors or callables.
        use_locking: accepted (updates are atomic either way).
        name: default "Momentum".
        use_nesterov: Nesterov momentum, as TensorFlow's kernels compute it
            (``var -= lr * grad + lr * momentum * accum``).
    """

    def __init__(
        self,
        learning_rate: Any,
        momentum: Any,
        use_locking: bool = False,
        name: str = "Momentum",
        use_nesterov: bool = False,
    ) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov
        self._learning_rate_tensor: Any = None
        self._momentum_tensor: Any = None

    def _create_slots(self, var_list: list[Variable]) -> None:
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self) -> None:
        self._learning_rate_tensor = self._tensor(self._learning_rate, "learning_rate")
        self._momentum_tensor = self._tensor(self._momentum, "momentum")

    def _hyper(self, var: Variable) -> dict[str, Any]:
        slot = self.get_slot(var, "momentum")
        assert slot is not None
        return {
            "var": var.handle,
            "accum": slot.handle,
            "lr": cast_to(self._learning_rate_tensor, var.dtype),
            "momentum": cast_to(self._momentum_tensor, var.dtype),
            "use_locking": self._use_locking,
            "use_nesterov": self._use_nesterov,
        }

    def _resource_apply_dense(self, grad: Any, var: Variable) -> Any:
        return raw_ops.ResourceApplyMomentum(grad=grad, **self._hyper(var))

    def _resource_apply_sparse(self, grad: Any, var: Variable, indices: Any) -> Any:
        return raw_ops.ResourceSparseApplyMomentum(grad=grad, indices=indices, **self._hyper(var))


__all__ = ["MomentumOptimizer"]
