"""Which variables a session has initialized: ``is_variable_initialized``, ``report_uninitialized_variables``.

A variable's value lives in each session (or, for a variable on a ps task,
in that task's host, shared by every session of the cluster), so whether it
is initialized is a question a session answers when the op runs. The
per-variable ops run where their variable lives; the report that gathers
their answers runs in the session's own process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_accum.dtypes import bool as bool_dtype
from tf_accum.dtypes import string
from tf_accum.graph import mode
from tf_accum.graph.collections import global_variables, local_variables
from tf_accum.graph.graph import Tensor
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.graph.variables import Variable, store_of


def is_variable_initialized(variable: Any) -> Any:
    """Whether ``variable`` has a value in the session that runs it: a bool scalar Tensor.

    Eagerly a variable always has a value: ``numpy.True_``.

    Raises:
        AttributeError: ``variable`` is not a Variable (as TensorFlow).
    """
    if not isinstance(variable, Variable):
        raise AttributeError(
            f"is_variable_initialized expects a Variable, not {type(variable).__name__!r} "
            f"({variable!r})"
        )
    return variable.is_initialized()


def initialized_op(variable: Variable, name: str | None = None) -> Tensor:
    """The graph op behind ``Variable.is_initialized``."""
    graph = mode.building_graph() or variable.graph
    assert graph is not None
    op = graph.create_op(
        "VarIsInitializedOp",
        [variable.op.outputs[0]],
        [(bool_dtype, TensorShape([]))],
        lambda context, inputs: (np.bool_(store_of(context).read_or(inputs[0], None) is not None),),
        name=name or "VarIsInitializedOp",
        attrs={"dtype": variable.dtype},  # its variable's, which a task host keys values by
    )
    return op.outputs[0]


def report_uninitialized_variables(
    var_list: Any = None, name: str = "report_uninitialized_variables"
) -> Any:
    """The names of the variables the running session has not initialized.

    Args:
        var_list: the variables to ask about (default: the default graph's
            global variables, then its local ones).
        name: the op's name scope.

    Returns:
        A 1-D string Tensor: each uninitialized variable's op name as bytes,
        in ``var_list``'s order (an empty array when all are initialized).
        Eagerly, every variable has a value: an empty array.

    Raises:
        AttributeError: an item of ``var_list`` is not a Variable.
    """
    graph = mode.building_graph()
    if graph is None:
        return np.array([], dtype=object)
    variables = list(var_list) if var_list is not None else global_variables() + local_variables()
    with graph.name_scope(name):
        if not variables:
            empty = graph.create_op(
                "Const",
                [],
                [(string, TensorShape([0]))],
                lambda context, inputs: (np.array([], dtype=object),),
                name="Const",
            )
            return empty.outputs[0]
        answers = [is_variable_initialized(v) for v in variables]
        names = [v.op.name.encode() for v in variables]
        with graph.name_scope("boolean_mask"):
            report = graph.create_op(
                "GatherV2",
                answers,
                [(string, TensorShape([None]))],
                lambda context, inputs: (
                    np.array([n for n, ok in zip(names, inputs, strict=True) if not ok], object),
                ),
                name="GatherV2",
            )
    return report.outputs[0]


__all__ = ["is_variable_initialized", "report_uninitialized_variables"]
