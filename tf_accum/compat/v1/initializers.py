"""``tf.compat.v1.initializers``: the initializers under their short names, and
the variable initializer ops."""

from tf_accum.graph.collections import global_variables_initializer as global_variables
from tf_accum.graph.collections import local_variables_initializer as local_variables
from tf_accum.graph.collections import variables_initializer as variables
from tf_accum.graph.initializers import constant_initializer as constant
from tf_accum.graph.initializers import glorot_normal_initializer as glorot_normal
from tf_accum.graph.initializers import glorot_uniform_initializer as glorot_uniform
from tf_accum.graph.initializers import he_normal, he_uniform, lecun_normal, lecun_uniform
from tf_accum.graph.initializers import ones_initializer as ones
from tf_accum.graph.initializers import random_normal_initializer as random_normal
from tf_accum.graph.initializers import random_uniform_initializer as random_uniform
from tf_accum.graph.initializers import truncated_normal_initializer as truncated_normal
from tf_accum.graph.initializers import variance_scaling_initializer as variance_scaling
from tf_accum.graph.initializers import zeros_initializer as zeros

__all__ = [
    "constant",
    "global_variables",
    "glorot_normal",
    "glorot_uniform",
    "he_normal",
    "he_uniform",
    "lecun_normal",
    "lecun_uniform",
    "local_variables",
    "ones",
    "random_normal",
    "random_uniform",
    "truncated_normal",
    "variables",
    "variance_scaling",
    "zeros",
]
