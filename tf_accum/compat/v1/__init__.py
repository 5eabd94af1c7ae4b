"""``tf.compat.v1`` for accumulator programs: the accumulator classes, and the
TF1 graph machinery such programs use (graphs, sessions, placeholders,
variables), so that ``import tf_accum.compat.v1 as tf`` can replace
``import tensorflow.compat.v1 as tf``.

Eager by default, as in TensorFlow 2: ops act at once. After
``disable_eager_execution()``, or inside ``with Graph().as_default():``, the
raw ops and the classes' methods build ops that a ``Session`` runs. The
math of a model is here too (Tensor operators and indexing, ``matmul``,
reductions, array ops) with ``gradients``, and ``nn``, ``losses``, the clip
ops, ``get_variable`` and ``variable_scope``, initializers and seeded random
ops. Only the names listed in ``__all__`` exist, and any other TensorFlow 1
name raises an AttributeError saying so.
"""

import importlib
from typing import TYPE_CHECKING

from tf_accum import dtypes, errors
from tf_accum.compat.v1 import (
    initializers,
    linalg,
    logging,
    losses,
    math,
    nn,
    queue,
    random,
    sparse,
    summary,
    train,
)
from tf_accum.compat.v1.accumulator_base import ConditionalAccumulatorBase
from tf_accum.compat.v1.conditional_accumulator import ConditionalAccumulator
from tf_accum.compat.v1.queues import FIFOQueue, QueueBase
from tf_accum.compat.v1.sparse_conditional_accumulator import SparseConditionalAccumulator
from tf_accum.compat.v1.v2_behavior import disable_v2_behavior, enable_v2_behavior
from tf_accum.dtypes import *  # noqa: F403 - TensorFlow exposes its dtypes here too
from tf_accum.dtypes import __all__ as _dtype_names
from tf_accum.graph.array_ops import (
    broadcast_to,
    concat,
    expand_dims,
    fill,
    gather,
    invert_permutation,
    one_hot,
    rank,
    reshape,
    setdiff1d,
    shape,
    shape_n,
    size,
    slice,
    split,
    squeeze,
    stack,
    stop_gradient,
    tile,
    transpose,
    unsorted_segment_sum,
    unstack,
    where,
    where_v2,
)
from tf_accum.graph.array_ops import range_ as range  # noqa: A004 - TensorFlow's name
from tf_accum.graph.clip_ops import clip_by_global_norm, clip_by_norm, clip_by_value, global_norm
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
from tf_accum.graph.elementwise_ops import (
    add_n,
    ceil,
    div,
    equal,
    exp,
    floor,
    floordiv,
    floormod,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    not_equal,
    pow,  # noqa: A004 - TensorFlow's name
    realdiv,
    reciprocal,
    round,  # noqa: A004 - TensorFlow's name
    rsqrt,
    sign,
    sqrt,
    truediv,
)
from tf_accum.graph.fill_ops import ones, ones_like, zeros, zeros_like
from tf_accum.graph.gradient_registry import (
    NoGradient,
    NotDifferentiable,
    RegisterGradient,
    no_gradient,
)
from tf_accum.graph.gradients import AggregationMethod, UnconnectedGradients, gradients
from tf_accum.graph.graph import Graph, Operation, Tensor
from tf_accum.graph.indexing import strided_slice
from tf_accum.graph.initialization import is_variable_initialized, report_uninitialized_variables
from tf_accum.graph.initializers import (
    constant_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    ones_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    truncated_normal_initializer,
    variance_scaling_initializer,
    zeros_initializer,
)
from tf_accum.graph.linalg_ops import matmul
from tf_accum.graph.math_ops import absolute as abs  # noqa: A004 - TensorFlow's name
from tf_accum.graph.math_ops import add, divide, multiply, negative, square, subtract
from tf_accum.graph.mode import (
    disable_eager_execution,
    enable_eager_execution,
    executing_eagerly,
    get_default_graph,
    reset_default_graph,
)
from tf_accum.graph.nn_ops import sigmoid, tanh
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
    to_double,
    to_float,
    to_int32,
    to_int64,
)
from tf_accum.graph.padding_ops import boolean_mask, cumsum, pad, reverse, sequence_mask
from tf_accum.graph.protos import ConfigProto, GPUOptions, GraphOptions, RunMetadata, RunOptions
from tf_accum.graph.random_ops import random_normal, random_uniform, truncated_normal
from tf_accum.graph.random_seed import set_random_seed
from tf_accum.graph.reduce_ops import (
    argmax,
    argmin,
    reduce_all,
    reduce_any,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
)
from tf_accum.graph.scatter import scatter_add, scatter_sub, scatter_update
from tf_accum.graph.session import InteractiveSession, Session, get_default_session
from tf_accum.graph.tensor_shape import Dimension, TensorShape
from tf_accum.graph.variable_scope import (
    AUTO_REUSE,
    VariableAggregation,
    VariableScope,
    VariableSynchronization,
    get_variable,
    get_variable_scope,
    variable_scope,
)
from tf_accum.graph.variables import (
    Variable,
    assign,
    assign_add,
    assign_sub,
)
from tf_accum.indexed_slices import IndexedSlices

newaxis = None  # ``t[:, tf.newaxis]``: a new dimension of length 1

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
    "summary",
    "train",
    "nn",
    "losses",
    "random",
    "initializers",
    "math",
    "linalg",
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
    "sigmoid",
    "tanh",
    "clip_by_value",
    "clip_by_norm",
    "clip_by_global_norm",
    "global_norm",
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
    # variables by name, and their initial values
    "get_variable",
    "variable_scope",
    "get_variable_scope",
    "VariableScope",
    "AUTO_REUSE",
    "VariableSynchronization",
    "VariableAggregation",
    "zeros_initializer",
    "ones_initializer",
    "constant_initializer",
    "random_normal_initializer",
    "truncated_normal_initializer",
    "random_uniform_initializer",
    "glorot_uniform_initializer",
    "glorot_normal_initializer",
    "variance_scaling_initializer",
    "random_normal",
    "truncated_normal",
    "random_uniform",
    "set_random_seed",
    # placement on a TF1 cluster
    "device",
    "DeviceSpec",
    # automatic differentiation
    "gradients",
    "UnconnectedGradients",
    "AggregationMethod",
    "RegisterGradient",
    "no_gradient",
    "NoGradient",
    "NotDifferentiable",
    "stop_gradient",
    # model math
    "matmul",
    "abs",
    "sqrt",
    "rsqrt",
    "exp",
    "log",
    "log1p",
    "sign",
    "reciprocal",
    "maximum",
    "minimum",
    "pow",
    "div",
    "truediv",
    "realdiv",
    "floordiv",
    "floormod",
    "add_n",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_any",
    "reduce_all",
    "floor",
    "ceil",
    "round",
    "to_float",
    "to_double",
    "to_int32",
    "to_int64",
    "argmax",
    "argmin",
    # array ops
    "reshape",
    "transpose",
    "concat",
    "stack",
    "unstack",
    "expand_dims",
    "squeeze",
    "shape",
    "shape_n",
    "size",
    "rank",
    "fill",
    "one_hot",
    "gather",
    "tile",
    "slice",
    "split",
    "pad",
    "reverse",
    "cumsum",
    "boolean_mask",
    "sequence_mask",
    "strided_slice",
    "newaxis",
    "where",
    "where_v2",
    "range",
    "broadcast_to",
    "invert_permutation",
    "unsorted_segment_sum",
    "setdiff1d",
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
            "variables, model math with tf.gradients), not all of TensorFlow 1. "
            "The names it has are tf_accum.compat.v1.__all__, listed in the README's "
            "section on graph mode."
        )
