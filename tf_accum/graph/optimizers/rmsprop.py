"""``tf.train.RMSPropOptimizer``: a moving mean square of the gradient divides each step.

``ms = decay * ms + (1 - decay) * g**2``, ``mom = momentum * mom + lr * g /
sqrt(ms + epsilon)``, ``var -= mom``; centered, ``mg`` (the moving mean of
the gradient) is kept too and ``ms - mg**2`` is used in place of ``ms``.
"""

from __future__ import annotations

from typing import Any

from tf_accum import raw_ops
from tf_accum.graph.optimizers.optimizer import Optimizer, cast_to
from tf_accum.graph.variables import Variable


class RMSPropOptimizer(Optimizer):
    """RMSProp: slots ``"rms"`` (at one), ``"momentum"`` (at zero) and, centered, ``"mg"``
    (at zero) per variable.

    Args:
        learning_rate, decay, momentum, epsilon: floats, scalar Tensors or callables.
        use_locking: accepted (updates are atomic either way).
        centered: normalise by the gradient's estimated variance, not its second moment.
        name: default "RMSProp".
    """

    def __init__(
        self,
        learning_rate: Any,
        decay: Any = 0.9,
        momentum: Any = 0.0,
        epsilon: Any = 1e-10,
        use_locking: bool = False,
        centered: bool = False,
        name: str = "RMSProp",
    ) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = centered
        self._tensors: dict[str, Any] = {}

    def _create_slots(self, var_list: list[Variable]) -> None:
        for v in var_list:
            self._filled_slot(v, 1.0, "rms")
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self) -> None:
        self._tensors = {
            "lr": self._tensor(self._learning_rate, "learning_rate"),
            "rho": self._tensor(self._decay, "decay"),
            "momentum": self._tensor(self._momentum, "momentum"),
            "epsilon": self._tensor(self._epsilon, "epsilon"),
        }

    def _hyper(self, var: Variable) -> dict[str, Any]:
        rms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        assert rms is not None and mom is not None
        found = {key: cast_to(value, var.dtype) for key, value in self._tensors.items()}
        found.update(var=var.handle, ms=rms.handle, mom=mom.handle, use_locking=self._use_locking)
        if self._centered:
            mg = self.get_slot(var, "mg")
            assert mg is not None
            found["mg"] = mg.handle
        return found

    def _resource_apply_dense(self, grad: Any, var: Variable) -> Any:
        if self._centered:
            return raw_ops.ResourceApplyCenteredRMSProp(grad=grad, **self._hyper(var))
        return raw_ops.ResourceApplyRMSProp(grad=grad, **self._hyper(var))

    def _resource_apply_sparse(self, grad: Any, var: Variable, indices: Any) -> Any:
        if self._centered:
            return raw_ops.ResourceSparseApplyCenteredRMSProp(
                grad=grad, indices=indices, **self._hyper(var)
            )
        return raw_ops.ResourceSparseApplyRMSProp(grad=grad, indices=indices, **self._hyper(var))


__all__ = ["RMSPropOptimizer"]
