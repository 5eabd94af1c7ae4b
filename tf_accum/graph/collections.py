"""Graph collections: named lists a TF1 program keeps in its graph (``GraphKeys``).

Variables add themselves to ``GLOBAL_VARIABLES`` (or the collections they
were given) and, when trainable, to ``TRAINABLE_VARIABLES``; the global step
is in ``GLOBAL_STEP``. ``global_variables()`` and the others read these lists,
so a program may add or look up anything itself with ``add_to_collection``
and ``get_collection``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from tf_accum.graph import mode
from tf_accum.graph.graph import (
    GLOBAL_STEP,
    GLOBAL_VARIABLES,
    LOCAL_VARIABLES,
    TRAINABLE_VARIABLES,
    Operation,
)
from tf_accum.graph.ops import group


class GraphKeys:
    """The standard collection names, the strings TensorFlow uses."""

    GLOBAL_VARIABLES = GLOBAL_VARIABLES
    LOCAL_VARIABLES = LOCAL_VARIABLES
    METRIC_VARIABLES = "metric_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = TRAINABLE_VARIABLES
    GLOBAL_STEP = GLOBAL_STEP
    VARIABLES = GLOBAL_VARIABLES  # TensorFlow's old name for GLOBAL_VARIABLES
    UPDATE_OPS = "update_ops"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    TRAIN_OP = "train_op"
    SUMMARIES = "summaries"
    LOSSES = "losses"
    REGULARIZATION_LOSSES = "regularization_losses"
    QUEUE_RUNNERS = "queue_runners"
    RESOURCES = "resources"
    LOCAL_RESOURCES = "local_resources"


def add_to_collection(name: Hashable, value: Any) -> None:
    """Append ``value`` to the default graph's collection ``name``.

    Raises:
        TypeError: ``name`` is not hashable (a list, say).
    """
    mode.get_default_graph().add_to_collection(name, value)  # type: ignore[arg-type]


def add_to_collections(names: Any, value: Any) -> None:
    """Append ``value`` to each of the collections ``names`` (one name or an iterable)."""
    for name in _names(names):
        add_to_collection(name, value)


def get_collection(key: Hashable, scope: str | None = None) -> list[Any]:
    """A copy of the default graph's collection ``key`` ([] when there is none).

    With ``scope``, only the items whose ``name`` starts with a match of the
    regular expression ``scope`` (items without a name are left out).
    """
    return mode.get_default_graph().get_collection(key, scope)  # type: ignore[arg-type]


def get_collection_ref(key: Hashable) -> list[Any]:
    """The default graph's collection ``key`` itself: changing the list changes the graph's."""
    return mode.get_default_graph().get_collection_ref(key)  # type: ignore[arg-type]


def _names(names: Any) -> Iterable[Any]:
    if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
        return (names,)
    return tuple(dict.fromkeys(names))


def global_variables(scope: str | None = None) -> list[Any]:
    """The default graph's global variables (its ``GLOBAL_VARIABLES`` collection).

    With ``scope``, those whose name starts with a match of that regular expression.
    """
    return mode.get_default_graph().get_collection(GLOBAL_VARIABLES, scope)


def trainable_variables(scope: str | None = None) -> list[Any]:
    """The default graph's trainable variables (its ``TRAINABLE_VARIABLES`` collection)."""
    return mode.get_default_graph().get_collection(TRAINABLE_VARIABLES, scope)


def local_variables(scope: str | None = None) -> list[Any]:
    """The default graph's local variables (made with ``collections=[LOCAL_VARIABLES]``)."""
    return mode.get_default_graph().get_collection(LOCAL_VARIABLES, scope)


def variables_initializer(var_list: list[Any], name: str = "init") -> Operation | None:
    """An op that runs the initializers of ``var_list``."""
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer() -> Operation | None:
    """An op that initializes every global variable of the default graph (None eagerly)."""
    if mode.building_graph() is None:
        return None
    return variables_initializer(global_variables(), name="init")


def local_variables_initializer() -> Operation | None:
    """An op that initializes every local variable of the default graph (None eagerly)."""
    if mode.building_graph() is None:
        return None
    return variables_initializer(local_variables(), name="init")


__all__ = [
    "GraphKeys",
    "add_to_collection",
    "add_to_collections",
    "get_collection",
    "get_collection_ref",
    "global_variables",
    "local_variables",
    "trainable_variables",
    "variables_initializer",
    "global_variables_initializer",
    "local_variables_initializer",
]
