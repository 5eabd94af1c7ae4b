"""``tf.compat.v1.random``: the seeded random ops under their ``tf.random`` names."""

from tf_accum.graph.random_ops import random_normal as normal
from tf_accum.graph.random_ops import random_uniform as uniform
from tf_accum.graph.random_ops import truncated_normal
from tf_accum.graph.random_seed import get_seed, set_random_seed

__all__ = ["get_seed", "normal", "set_random_seed", "truncated_normal", "uniform"]
