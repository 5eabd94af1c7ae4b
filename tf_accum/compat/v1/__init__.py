"""``tf.compat.v1`` for accumulator programs: the accumulator classes, and the
TF1 graph machinery such programs use (graphs, sessions, placeholders,
variables), so that ``import tf_accum.compat.v1 as tf`` can replace
``import tensorflow.compat.v1 as tf``.

Eager by default, as in TensorFlow 2: ops act at once. After
``disable_eager_execution()``, or inside ``with Graph().as_default():``, the
raw ops and the classes' methods build ops that a ``Session`` runs. Model code
(math, layers, autodiff) stays with TensorFlow: only the names listed in
``__all__`` exist.
"""

from tf_accum import dtypes, errors
from tf_accum.compat.v1 import sparse, train
from tf_accum.compat.v1.accumulator_base import ConditionalAccumulatorBase
from tf_accum.compat.v1.conditional_accumulator import ConditionalAccumulator
from tf_accum.compat.v1.sparse_conditional_accumulator import SparseConditionalAccumulator
from tf_accum.dtypes import *  # noqa: F403 - TensorFlow exposes its dtypes here too
from tf_accum.dtypes import __all__ as _dtype_names
from tf_accum.graph.devices import DeviceSpec, device
from tf_accum.graph.graph import Graph, Operation, Tensor
from tf_accum.graph.mode import (
    disable_eager_execution,
    enable_eager_execution,
    executing_eagerly,
    get_default_graph,
    reset_default_graph,
)
from tf_accum.graph.ops import (
    add,
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
from tf_accum.graph.session import InteractiveSession, Session, get_default_session
from tf_accum.graph.tensor_shape import Dimension, TensorShape
from tf_accum.graph.variables import (
    Variable,
    assign,
    assign_add,
    global_variables,
    global_variables_initializer,
    trainable_variables,
    variables_initializer,
)
from tf_accum.indexed_slices import IndexedSlices

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
    "Variable",
    "assign",
    "assign_add",
    "global_variables",
    "trainable_variables",
    "variables_initializer",
    "global_variables_initializer",
    # placement on a TF1 cluster
    "device",
    "DeviceSpec",
    *_dtype_names,
]
