"""TensorFlow's ``compat`` namespace: ``tf_accum.compat.v1``."""

from tf_accum.compat import v1

__all__ = ["v1"]
