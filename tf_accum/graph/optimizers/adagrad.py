"""``tf.train.AdagradOptimizer``: ``accum += grad**2; var -= lr * grad / sqrt(accum)``."""

from __future__ import annotations

from typing import Any

from tf_accum import raw_ops
from tf_accum.graph.optimizers.optimizer import Optimizer, cast_to
from tf_accum.graph.variables import Variable


class AdagradOptimizer(Optimizer):
    """Adagrad: one slot ``"accumulator"`` per variable, at ``initial_accumulator_value``.

    Args:
        learning_rate: a float, a scalar Tensor or a callable.
        initial_accumulator_value: the accumulators' start, above zero.
        use_locking: accepted (updates are atomic either way).
        name: default "Adagrad".

    Raises:
        ValueError: ``initial_accumulator_value`` is not above zero.
    """

    def __init__(
        self,
        learning_rate: Any,
        initial_accumulator_value: float = 0.1,
        use_locking: bool = False,
        name: str = "Adagrad",
    ) -> None:
        if initial_accumulator_value <= 0.0:
            raise ValueError(
                f"initial_accumulator_value must be positive: {initial_accumulator_value}"
            )
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value
        self._learning_rate_tensor: Any = None

    def _create_slots(self, var_list: list[Variable]) -> None:
        for v in var_list:
            self._filled_slot(v, self._initial_accumulator_value, "accumulator")

    def _prepare(self) -> None:
        self._learning_rate_tensor = self._tensor(self._learning_rate, "learning_rate")

    def _hyper(self, var: Variable) -> dict[str, Any]:
        slot = self.get_slot(var, "accumulator")
        assert slot is not None
        return {
            "var": var.handle,
            "accum": slot.handle,
            "lr": cast_to(self._learning_rate_tensor, var.dtype),
            "use_locking": self._use_locking,
        }

    def _resource_apply_dense(self, grad: Any, var: Variable) -> Any:
        return raw_ops.ResourceApplyAdagrad(grad=grad, **self._hyper(var))

    def _resource_apply_sparse(self, grad: Any, var: Variable, indices: Any) -> Any:
        return raw_ops.ResourceSparseApplyAdagrad(grad=grad, indices=indices, **self._hyper(var))


__all__ = ["AdagradOptimizer"]
