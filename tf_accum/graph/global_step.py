"""The global step: the int64 scalar variable a TF1 training loop counts its steps in.

It is the graph's ``GLOBAL_STEP`` collection's only item, or else the tensor
called ``global_step:0``, as in TensorFlow. A TF1 program's own
``tf.Variable(0, name="global_step", trainable=False)`` is found by that name
and returned (docs/departures.md T27).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from tf_accum.dtypes import int64
from tf_accum.graph import mode
from tf_accum.graph.graph import GLOBAL_STEP, GLOBAL_VARIABLES, Graph, Tensor
from tf_accum.graph.variables import Variable

_log = logging.getLogger(__name__)


def get_global_step(graph: Graph | None = None) -> Any:
    """The global step of ``graph`` (default: the default graph), or None.

    Returns the ``GLOBAL_STEP`` collection's item; with none there, the tensor
    ``global_step:0`` if there is one; None if neither, or (logged as an
    error) if the collection holds several.

    A variable called ``global_step`` outside the collection is found by
    its tensor ``global_step:0`` (its handle): the variable is returned, as
    TensorFlow returns a TF1 program's variable (a reference variable there).

    Raises:
        TypeError: what was found is not an integer scalar (a float variable
            called ``global_step``, a vector).
    """
    graph = graph or mode.get_default_graph()
    found = graph.get_collection(GLOBAL_STEP)
    if len(found) > 1:
        _log.error("Multiple tensors in global_step collection.")
        return None
    if found:
        step = found[0]
    else:
        try:
            step = graph.get_tensor_by_name("global_step:0")
        except KeyError:
            return None
        step = _variable_of(graph, step)
    _check_global_step(step)
    return step


def _variable_of(graph: Graph, tensor: Tensor) -> Variable | Tensor:
    """The variable whose handle ``tensor`` is, or ``tensor`` itself."""
    if tensor.op.type != "VarHandleOp":
        return tensor
    for key in graph.get_all_collection_keys():
        for item in graph.get_collection(key):
            if isinstance(item, Variable) and item.op is tensor.op:
                return item
    return tensor


def _check_global_step(step: Any) -> None:
    if not isinstance(step, (Variable, Tensor)):
        raise TypeError(f'Existing "global_step" must be a Variable or Tensor: {step}.')
    if not step.dtype.is_integer:
        raise TypeError(f'Existing "global_step" does not have integer type: {step.dtype!r}')
    if step.shape.rank != 0 and step.shape.is_fully_defined():
        raise TypeError(f'Existing "global_step" is not scalar: {step.shape}')


def create_global_step(graph: Graph | None = None) -> Variable:
    """Make the graph's global step: an int64 scalar variable ``global_step`` at 0,
    not trainable, in ``GLOBAL_VARIABLES`` and ``GLOBAL_STEP``.

    Raises:
        ValueError: the graph has a global step already.
        TypeError: something called ``global_step`` that is no integer scalar exists.
    """
    graph = graph or mode.get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    with graph.as_default(), graph.name_scope(None), graph.control_dependencies(None):
        return Variable(
            np.int64(0),
            trainable=False,
            name="global_step",
            dtype=int64,
            collections=[GLOBAL_VARIABLES, GLOBAL_STEP],
        )


def get_or_create_global_step(graph: Graph | None = None) -> Variable:
    """The graph's global step, made (see :func:`create_global_step`) if missing."""
    graph = graph or mode.get_default_graph()
    existing = get_global_step(graph)
    if existing is not None:
        step: Variable = existing
        return step
    return create_global_step(graph)


def global_step(sess: Any, global_step_tensor: Any) -> int:
    """The global step's value in ``sess``, as a Python int.

    ``global_step_tensor`` is the variable, a tensor of it, or a name.

    Raises:
        TypeError: the value is not a number.
    """
    if isinstance(global_step_tensor, Variable) and global_step_tensor.graph is None:
        return int(global_step_tensor.numpy())  # an eager variable
    return int(sess.run(global_step_tensor))


__all__ = ["create_global_step", "get_global_step", "get_or_create_global_step", "global_step"]
