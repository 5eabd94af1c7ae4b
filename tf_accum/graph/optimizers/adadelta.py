"""``tf.train.AdadeltaOptimizer``: steps scaled by the ratio of two moving root mean squares."""

from __future__ import annotations

from typing import Any

from tf_accum import raw_ops
from tf_accum.graph.optimizers.optimizer import Optimizer, cast_to
from tf_accum.graph.variables import Variable


class AdadeltaOptimizer(Optimizer):
    """Adadelta: slots ``"accum"`` and ``"accum_update"`` per variable, at zero.

    Args:
        learning_rate, rho, epsilon: floats, scalar Tensors or callables.
        use_locking: accepted (updates are atomic either way).
        name: default "Adadelta".
    """

    def __init__(
        self,
        learning_rate: Any = 0.001,
        rho: Any = 0.95,
        epsilon: Any = 1e-8,
        use_locking: bool = False,
        name: str = "Adadelta",
    ) -> None:
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._rho = rho
        self._epsilon = epsilon
        self._tensors: dict[str, Any] = {}

    def _create_slots(self, var_list: list[Variable]) -> None:
        for v in var_list:
            self._zeros_slot(v, "accum", self._name)
            self._zeros_slot(v, "accum_update", self._name)

    def _prepare(self) -> None:
        self._tensors = {
            "lr": self._tensor(self._lr, "lr"),
            "rho": self._tensor(self._rho, "rho"),
            "epsilon": self._tensor(self._epsilon, "epsilon"),
        }

    def _hyper(self, var: Variable) -> dict[str, Any]:
        accum, update = self.get_slot(var, "accum"), self.get_slot(var, "accum_update")
        assert accum is not None and update is not None
        found = {key: cast_to(value, var.dtype) for key, value in self._tensors.items()}
        found.update(
            var=var.handle,
            accum=accum.handle,
            accum_update=update.handle,
            use_locking=self._use_locking,
        )
        return found

    def _resource_apply_dense(self, grad: Any, var: Variable) -> Any:
        return raw_ops.ResourceApplyAdadelta(grad=grad, **self._hyper(var))

    def _resource_apply_sparse(self, grad: Any, var: Variable, indices: Any) -> Any:
        return raw_ops.ResourceSparseApplyAdadelta(grad=grad, indices=indices, **self._hyper(var))


__all__ = ["AdadeltaOptimizer"]
