"""``tf.train.FtrlOptimizer``: follow-the-regularized-leader with L1 and L2 terms
(``ApplyFtrl``; ``ApplyFtrlV2`` with an L2 shrinkage)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum import raw_ops
from tf_accum.graph import mode
from tf_accum.graph.elementwise_ops import maximum
from tf_accum.graph.optimizers.optimizer import Optimizer, cast_to
from tf_accum.graph.variables import Variable


class FtrlOptimizer(Optimizer):
    """FTRL-proximal: slots ``"accum"`` (at ``initial_accumulator_value``) and
    ``"linear"`` (at zero) per variable.

    Args:
        learning_rate: a float, a scalar Tensor or a callable.
        learning_rate_power: at most zero (-0.5: the square root).
        initial_accumulator_value: the accumulators' start, at least zero.
        l1_regularization_strength, l2_regularization_strength: at least zero.
        use_locking: accepted (updates are atomic either way).
        name: default "Ftrl".
        accum_name, linear_name: the slots' name suffixes (default ``name``).
        l2_shrinkage_regularization_strength: at least zero; above zero the
            update is ``ApplyFtrlV2``'s.
        beta: added to the L2 strength as ``beta / (2 * learning_rate)``.

    Raises:
        ValueError: a strength or value outside its range.
    """

    def __init__(
        self,
        learning_rate: Any,
        learning_rate_power: float = -0.5,
        initial_accumulator_value: float = 0.1,
        l1_regularization_strength: float = 0.0,
        l2_regularization_strength: float = 0.0,
        use_locking: bool = False,
        name: str = "Ftrl",
        accum_name: str | None = None,
        linear_name: str | None = None,
        l2_shrinkage_regularization_strength: float = 0.0,
        beta: float | None = None,
    ) -> None:
        super().__init__(use_locking, name)
        checks = [
            (initial_accumulator_value < 0.0, "initial_accumulator_value %f needs to be be "
             "positive or zero", initial_accumulator_value),
            (learning_rate_power > 0.0, "learning_rate_power %f needs to be negative or zero",
             learning_rate_power),
            (l1_regularization_strength < 0.0, "l1_regularization_strength %f needs to be "
             "positive or zero", l1_regularization_strength),
            (l2_regularization_strength < 0.0, "l2_regularization_strength %f needs to be "
             "positive or zero", l2_regularization_strength),
            (l2_shrinkage_regularization_strength < 0.0, "l2_shrinkage_regularization_strength "
             "%f needs to be positive or zero", l2_shrinkage_regularization_strength),
        ]  # fmt: skip
        for failed, message, value in checks:
            if failed:
                raise ValueError(message % value)
        self._learning_rate = learning_rate
        self._learning_rate_power = learning_rate_power
        self._initial_accumulator_value = initial_accumulator_value
        self._l1 = l1_regularization_strength
        self._l2 = l2_regularization_strength
        self._beta = 0.0 if beta is None else beta
        self._l2_shrinkage = l2_shrinkage_regularization_strength
        self._accum_name = accum_name
        self._linear_name = linear_name
        self._tensors: dict[str, Any] = {}

    def _create_slots(self, var_list: list[Variable]) -> None:
        for v in var_list:
            self._filled_slot(
                v, self._initial_accumulator_value, "accum", self._accum_name or self._name
            )
            self._zeros_slot(v, "linear", self._linear_name or self._name)

    def _prepare(self) -> None:
        lr = self._tensor(self._learning_rate, "learning_rate")
        if self._beta == 0.0:
            adjusted: Any = self._l2  # l2 + 0 / (2 * lr), as TensorFlow computes it
        elif mode.building_graph() is None or not hasattr(lr, "op"):
            wide = np.float32(2.0) * np.maximum(np.float32(lr), np.float32(1e-36))
            adjusted = np.float32(self._l2) + np.float32(self._beta) / wide
        else:
            adjusted = self._l2 + self._beta / (2.0 * maximum(lr, 1e-36))
        self._tensors = {
            "lr": lr,
            "l1": self._tensor(self._l1, "l1_regularization_strength"),
            "l2": self._tensor(adjusted, "adjusted_l2_regularization_strength"),
            "l2_shrinkage": self._tensor(
                self._l2_shrinkage, "l2_shrinkage_regularization_strength"
            ),
            "lr_power": self._tensor(self._learning_rate_power, "learning_rate_power"),
        }

    def _hyper(self, var: Variable) -> dict[str, Any]:
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        assert accum is not None and linear is not None
        found = {key: cast_to(value, var.dtype) for key, value in self._tensors.items()}
        if self._l2_shrinkage <= 0.0:
            del found["l2_shrinkage"]
        found.update(
            var=var.handle, accum=accum.handle, linear=linear.handle, use_locking=self._use_locking
        )
        return found

    def _resource_apply_dense(self, grad: Any, var: Variable) -> Any:
        if self._l2_shrinkage <= 0.0:
            return raw_ops.ResourceApplyFtrl(grad=grad, **self._hyper(var))
        return raw_ops.ResourceApplyFtrlV2(grad=grad, **self._hyper(var))

    def _resource_apply_sparse(self, grad: Any, var: Variable, indices: Any) -> Any:
        if self._l2_shrinkage <= 0.0:
            return raw_ops.ResourceSparseApplyFtrl(grad=grad, indices=indices, **self._hyper(var))
        return raw_ops.ResourceSparseApplyFtrlV2(grad=grad, indices=indices, **self._hyper(var))


__all__ = ["FtrlOptimizer"]
