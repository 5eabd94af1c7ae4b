"""``tf.compat.v1`` for accumulator programs: the accumulator classes, and the
TF1 graph machinery such programs use (graphs, sessions, placeholders,
variables), so that ``import tf_accum.compat.v1 as tf`` can replace
``import tensorflow.compat.v1 as tf``.

Eager by default, as in TensorFlow 2: ops act at once. After
``disable_eager_execution()``, or inside ``with Graph().as_default():``, the
raw ops and the classes' methods build ops that a ``Session`` runs. The
arithmetic of a synchronous-SGD step is here too (Tensor operators,
``multiply``, ``reduce_mean``, ``zeros_like``, ...); model code (layers,
autodiff, optimizers) stays with TensorFlow: only the names listed in
``__all__`` exist, and any other TensorFlow 1 name raises an AttributeError
saying so.
"""

import importlib
from typing import TYPE_CHECKING

from tf_accum import dtypes, errors
from tf_accum.compat.v1 import logging, queue, sparse, train
from tf_accum.compat.v1.accumulator_base import ConditionalAccumulatorBase
from tf_accum.compat.v1.conditional_accumulator import ConditionalAccumulator
from tf_accum.compat.v1.queues import FIFOQueue, QueueBase
from tf_accum.compat.v1.sparse_conditional_accumulator import SparseConditionalAccumulator
from tf_accum.compat.v1.v2_behavior import disable_v2_behavior, enable_v2_behavior
from tf_accum.dtypes import *  # noqa: F403 - TensorFlow exposes its dtypes here too
from tf_accum.dtypes import __all__ as _dtype_names
from tf_accum.graph.collections import (
    GraphKeys,
    add_to_collection,
    add_to_collections,
    get_collection,
    get_collection_ref,
    global_variables,
    global_variables_initializer,
    local_variables,
    local_variables_initializer,
    trainable_variables,
    variables_initializer,
)
from tf_accum.graph.devices import DeviceSpec, device
from tf_accum.graph.fill_ops import ones, ones_like, zeros, zeros_like
from tf_accum.graph.graph import Graph, Operation, Tensor
from tf_accum.graph.initialization import is_variable_initialized, report_uninitialized_variables
from tf_accum.graph.math_ops import add, divide, multiply, negative, square, subtract
from tf_accum.graph.mode import (
    disable_eager_execution,
    enable_eager_execution,
    executing_eagerly,
    get_default_graph,
    reset_default_graph,
)
from tf_accum.graph.ops import (
    cast,
    constant,
    control_dependencies,
    convert_to_tensor,
    group,
    identity,
    name_scope,
    no_op,
    placeholder,
    placeholder_with_default,
)
from tf_accum.graph.protos import ConfigProto, GPUOptions, GraphOptions, RunMetadata, RunOptions
from tf_accum.graph.reduce_ops import reduce_mean, reduce_sum
from tf_accum.graph.scatter import scatter_add, scatter_sub, scatter_update
from tf_accum.graph.session import InteractiveSession, Session, get_default_session
from tf_accum.graph.tensor_shape import Dimension, TensorShape
from tf_accum.graph.variables import (
    Variable,
    assign,
    assign_add,
    assign_sub,
)
from tf_accum.indexed_slices import IndexedSlices

# TensorFlow 1's older names
initialize_all_variables = global_variables_initializer
initialize_local_variables = local_variables_initializer

# Modules that need absl-py (the tf1 extra): imported when first used.
_ON_FIRST_USE = {"app": "tf_accum.compat.v1.app", "flags": "tf_accum.compat.v1.flags"}
if TYPE_CHECKING:
    from tf_accum.compat.v1 import app, flags

__all__ = [
    "ConditionalAccumulatorBase",
    "ConditionalAccumulator",
    "SparseConditionalAccumulator",
    "sparse",
    "train",
    "errors",
    "dtypes",
    "IndexedSlices",
    # graph mode
    "disable_eager_execution",
    "enable_eager_execution",
    "executing_eagerly",
    "Graph",
    "Operation",
    "Tensor",
    "TensorShape",
    "Dimension",
    "get_default_graph",
    "reset_default_graph",
    "Session",
    "InteractiveSession",
    "get_default_session",
    "RunOptions",
    "RunMetadata",
    "ConfigProto",
    "GPUOptions",
    "GraphOptions",
    "placeholder",
    "placeholder_with_default",
    "constant",
    "convert_to_tensor",
    "identity",
    "group",
    "no_op",
    "control_dependencies",
    "name_scope",
    "add",
    "cast",
    # math
    "multiply",
    "subtract",
    "divide",
    "negative",
    "square",
    "reduce_sum",
    "reduce_mean",
    "zeros",
    "ones",
    "zeros_like",
    "ones_like",
    "Variable",
    "assign",
    "assign_add",
    "global_variables",
    "trainable_variables",
    "variables_initializer",
    "global_variables_initializer",
    # variables and collections (issue 26)
    "assign_sub",
    "scatter_add",
    "scatter_sub",
    "scatter_update",
    "local_variables",
    "local_variables_initializer",
    "is_variable_initialized",
    "report_uninitialized_variables",
    "GraphKeys",
    "get_collection",
    "get_collection_ref",
    "add_to_collection",
    "add_to_collections",
    # placement on a TF1 cluster
    "device",
    "DeviceSpec",
    # what TF1 programs use around their training loop
    "app",
    "flags",
    "logging",
    "disable_v2_behavior",
    "enable_v2_behavior",
    "initialize_all_variables",
    "initialize_local_variables",
    # queues
    "FIFOQueue",
    "QueueBase",
    "queue",
    *_dtype_names,
]


if not TYPE_CHECKING:  # type checkers keep reporting unknown names as errors

    def __getattr__(name: str) -> object:
        # A TF1 program using a name we lack learns what graph mode covers, not just
        # that it failed.
        if name in _ON_FIRST_USE:
            return importlib.import_module(_ON_FIRST_USE[name])
        if name.startswith("__"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        raise AttributeError(
            f"module {__name__!r} has no attribute {name!r}: tf_accum's graph mode covers "
            "accumulator programs (the accumulators, graphs and sessions, placeholders, "
            "variables and the arithmetic of an SGD step), not the rest of TensorFlow 1. "
            "The names it has are tf_accum.compat.v1.__all__, listed in the README's "
            "section on graph mode."
        )
