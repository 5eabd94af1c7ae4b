"""Slot variables: an optimizer's state beside each variable (Adam's ``m`` and ``v``, ...).

A slot is a non-trainable variable of its variable's shape and dtype, named
``<variable's op name>/<optimizer name>`` (``Variable/Adam``, then
``Variable/Adam_1`` for the next slot), and placed on its variable's device,
ignoring the device functions around it (a ``replica_device_setter``), as
TensorFlow colocates it: on a TF1 cluster a slot lives on its variable's ps task.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from tf_accum.graph.graph import GLOBAL_VARIABLES
from tf_accum.graph.variables import Variable


@contextlib.contextmanager
def colocated_with(variable: Variable) -> Iterator[None]:
    """Build the ops inside on ``variable``'s device (device functions around are not asked)."""
    graph = variable.graph
    if graph is None:
        yield
        return
    with graph.device(None), graph.device(variable.op.device or None):
        yield


def create_slot(primary: Variable, initial: Any, optimizer_name: str) -> Variable:
    """A slot of ``primary`` holding ``initial`` (an array of its shape and dtype at first)."""
    graph = primary.graph
    value = np.asarray(initial, primary.dtype.numpy_dtype)
    if graph is None:
        own = primary.name.split(":")[0]
        return Variable(value, trainable=False, name=f"{own}/{optimizer_name}")
    name = f"{primary.op.name}/{optimizer_name}"  # made unique by the graph: Variable/Adam_1
    with (
        graph.as_default(),
        graph.name_scope(None),
        graph.control_dependencies(None),
        colocated_with(primary),
    ):
        return Variable(
            value,
            trainable=False,
            name=name,
            dtype=primary.dtype,
            collections=[GLOBAL_VARIABLES],
        )


def create_non_slot(
    initial: Any, name: str, colocate_with: Variable, scope: str | None = None
) -> Variable:
    """A variable of the optimizer's own (Adam's ``beta1_power``), beside ``colocate_with``;
    named in the current name scope, or in ``scope`` (ending in "/") if given."""
    graph = colocate_with.graph
    if graph is None:
        return Variable(initial, trainable=False, name=f"{scope or ''}{name}")
    with (
        graph.as_default(),
        graph.name_scope(scope) if scope else contextlib.nullcontext(),
        graph.control_dependencies(None),
        colocated_with(colocate_with),
    ):
        return Variable(initial, trainable=False, name=name, collections=[GLOBAL_VARIABLES])


__all__ = ["colocated_with", "create_non_slot", "create_slot"]
