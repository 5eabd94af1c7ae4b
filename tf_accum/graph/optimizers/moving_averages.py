"""``tf.train.ExponentialMovingAverage``: shadow variables that follow variables slowly.

``apply(var_list)`` makes, once per variable, a shadow variable named
``<variable>/ExponentialMovingAverage`` on the variable's device, starting at
the variable's value (its initial value where it is not initialized yet), and
returns the op that moves every shadow towards its variable:
``shadow -= (shadow - variable) * (1 - decay)``. With ``num_updates`` the
decay is ``min(decay, (1 + num_updates) / (10 + num_updates))``, so that
averages move faster early on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum.dtypes import bfloat16, float16, float32, float64
from tf_accum.graph import mode
from tf_accum.graph.collections import get_collection, global_variables, trainable_variables
from tf_accum.graph.elementwise_ops import minimum
from tf_accum.graph.graph import GLOBAL_VARIABLES
from tf_accum.graph.ops import cast, convert_to_tensor, group
from tf_accum.graph.optimizers.slots import colocated_with
from tf_accum.graph.variables import Variable

MOVING_AVERAGE_VARIABLES = "moving_average_variables"


class ExponentialMovingAverage:
    """Moving averages of variables.

    Args:
        decay: the decay, a float (typically close to 1: 0.999).
        num_updates: a count of updates so far (a global step), or None.
        zero_debias: not supported: raises NotImplementedError when True.
        name: the shadow variables' suffix and the name scope of the update
            (default "ExponentialMovingAverage").
    """

    def __init__(
        self,
        decay: Any,
        num_updates: Any = None,
        zero_debias: bool = False,
        name: str = "ExponentialMovingAverage",
    ) -> None:
        if zero_debias:
            raise NotImplementedError(
                "ExponentialMovingAverage(zero_debias=True) is not supported by tf_accum"
            )
        self._decay = decay
        self._num_updates = num_updates
        self._zero_debias = zero_debias
        self._name = name
        self._averages: dict[Variable, Variable] = {}

    @property
    def name(self) -> str:
        return self._name

    def apply(self, var_list: Any = None) -> Any:
        """Make the shadows of ``var_list`` (default: the trainable variables) not made
        yet, and return the op that updates all of theirs (None eagerly: updated now).

        Raises:
            TypeError: a variable that is not of a float type.
        """
        variables = list(trainable_variables() if var_list is None else var_list)
        for var in variables:
            if var.dtype not in (bfloat16, float16, float32, float64):
                raise TypeError(f"The variables must be half, float, or double: {var.name}")
            if var not in self._averages:
                self._averages[var] = self._shadow(var)
        graph = mode.building_graph()
        if graph is None:
            self._update_eagerly(variables)
            return None
        with graph.name_scope(self._name) as scope:
            decay_tensor = convert_to_tensor(self._decay, dtype=float32, name="decay")
            if self._num_updates is not None:
                count = cast(self._num_updates, float32, name="num_updates")
                decay_tensor = minimum(decay_tensor, (1.0 + count) / (10.0 + count))
            updates = [self._update(graph, var, decay_tensor) for var in variables]
            return group(*updates, name=scope)

    def _update_eagerly(self, variables: list[Variable]) -> None:
        decay = np.float32(self._decay)
        if self._num_updates is not None:
            given = self._num_updates
            count = np.float32(given.numpy() if hasattr(given, "numpy") else given)
            decay = min(decay, (np.float32(1.0) + count) / (np.float32(10.0) + count))
        complement = np.float32(1.0) - decay
        for var in variables:
            average = self._averages[var]
            factor = var.dtype.numpy_dtype.type(complement)
            average.assign(average.numpy() - (average.numpy() - var.numpy()) * factor)

    def _shadow(self, var: Variable) -> Variable:
        graph = var.graph
        name = f"{var.name.split(':')[0]}/{self._name}"
        if graph is None:
            return Variable(var.numpy(), trainable=False, name=name)
        with (
            graph.as_default(),
            graph.name_scope(None),
            graph.control_dependencies(None),
            colocated_with(var),
        ):
            shadow = Variable(
                var.initialized_value(),
                trainable=False,
                name=name,
                dtype=var.dtype,
                collections=[GLOBAL_VARIABLES],
            )
        graph.add_to_collection(MOVING_AVERAGE_VARIABLES, var)
        return shadow

    def _update(self, graph: Any, var: Variable, decay: Any) -> Any:
        average = self._averages[var]
        with graph.name_scope("AssignMovingAvg"), colocated_with(average):
            complement = convert_to_tensor(1.0 - decay, name="decay")
            if complement.dtype != var.dtype:
                complement = cast(complement, var.dtype)
            return average.assign_sub(
                (average.read_value() - var.read_value()) * complement, read_value=False
            )

    def average(self, var: Variable) -> Variable | None:
        """The shadow variable of ``var``, or None."""
        return self._averages.get(var)

    def average_name(self, var: Variable) -> str:
        """The name of ``var``'s shadow (what a checkpoint of averages names it)."""
        found = self._averages.get(var)
        if found is not None:
            return found.name.split(":")[0]
        return f"{var.name.split(':')[0]}/{self._name}"

    def variables_to_restore(self, moving_avg_variables: Any = None) -> dict[str, Variable]:
        """Names to restore each variable from: the shadow's name for the averaged
        ones (default: trainable and moving-average variables), the variable's own
        for the other global variables."""
        if moving_avg_variables is None:
            chosen = list(trainable_variables()) + list(get_collection(MOVING_AVERAGE_VARIABLES))
        else:
            chosen = list(moving_avg_variables)
        found: dict[str, Variable] = {}
        for v in dict.fromkeys(chosen):
            found[self.average_name(v)] = v
        names = {v.name for v in chosen}
        for v in global_variables():
            own = v.name.split(":")[0]
            if v.name not in names and own not in found:
                found[own] = v
        return found


__all__ = ["ExponentialMovingAverage"]
