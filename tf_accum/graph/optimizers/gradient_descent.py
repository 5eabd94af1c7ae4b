"""``tf.train.GradientDescentOptimizer``: ``var -= learning_rate * grad``."""

from __future__ import annotations

from typing import Any

from tf_accum import raw_ops
from tf_accum.graph.optimizers.optimizer import Optimizer, cast_to
from tf_accum.graph.scatter import scatter_add
from tf_accum.graph.variables import Variable


class GradientDescentOptimizer(Optimizer):
    """Plain gradient descent.

    Args:
        learning_rate: a float, a scalar Tensor (a schedule such as
            ``exponential_decay``) or a callable returning one.
        use_locking: accepted (updates are atomic either way).
        name: the name scope of its ops (default "GradientDescent").

    A sparse gradient subtracts ``learning_rate * rows`` from those rows
    (``ResourceScatterAdd`` of the negated rows, as TensorFlow does: a row
    named twice gets both).
    """

    _sums_repeated_rows = False

    def __init__(
        self, learning_rate: Any, use_locking: bool = False, name: str = "GradientDescent"
    ) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._learning_rate_tensor: Any = None

    def _prepare(self) -> None:
        self._learning_rate_tensor = self._tensor(self._learning_rate, "learning_rate")

    def _resource_apply_dense(self, grad: Any, var: Variable) -> Any:
        return raw_ops.ResourceApplyGradientDescent(
            var=var.handle,
            alpha=cast_to(self._learning_rate_tensor, var.dtype),
            delta=grad,
            use_locking=self._use_locking,
        )

    def _resource_apply_sparse(self, grad: Any, var: Variable, indices: Any) -> Any:
        return scatter_add(var, indices, -grad * cast_to(self._learning_rate_tensor, var.dtype))


__all__ = ["GradientDescentOptimizer"]
