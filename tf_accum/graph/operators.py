"""The arithmetic operators of graph tensors: ``t * 0.1``, ``0.1 * t``, ``t - u``, ``-t``, ``abs(t)``.

Each builds an op in the tensor's graph, with TensorFlow's dtype rules and
errors (see ``tf_accum.graph.math_ops``). A class holding a graph tensor
(its ``graph_element``) gets them by inheriting :class:`TensorOperators`.
"""

from __future__ import annotations

from typing import Any


def _operator(name: str, tensor: Any, other: Any, reflected: bool = False) -> Any:
    from tf_accum.graph.math_ops import binary_operator

    return binary_operator(name, tensor, other, reflected)


class TensorOperators:
    """``+ - * / // % **`` (and their reflected forms), unary ``-`` and ``abs``.

    Raises (when the op is built):
        TypeError: the operands' dtypes differ and the non-tensor one does not convert.
        ValueError: None, or static shapes that do not broadcast.
    """

    __slots__ = ()

    def __add__(self, other: Any) -> Any:
        return _operator("add", self, other)

    def __radd__(self, other: Any) -> Any:
        return _operator("add", self, other, reflected=True)

    def __sub__(self, other: Any) -> Any:
        return _operator("sub", self, other)

    def __rsub__(self, other: Any) -> Any:
        return _operator("sub", self, other, reflected=True)

    def __mul__(self, other: Any) -> Any:
        return _operator("mul", self, other)

    def __rmul__(self, other: Any) -> Any:
        return _operator("mul", self, other, reflected=True)

    def __truediv__(self, other: Any) -> Any:
        return _operator("truediv", self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _operator("truediv", self, other, reflected=True)

    def __floordiv__(self, other: Any) -> Any:
        return _operator("floordiv", self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return _operator("floordiv", self, other, reflected=True)

    def __mod__(self, other: Any) -> Any:
        return _operator("mod", self, other)

    def __rmod__(self, other: Any) -> Any:
        return _operator("mod", self, other, reflected=True)

    def __pow__(self, other: Any) -> Any:
        return _operator("pow", self, other)

    def __rpow__(self, other: Any) -> Any:
        return _operator("pow", self, other, reflected=True)

    def __neg__(self) -> Any:
        from tf_accum.graph.math_ops import unary

        return unary("Neg", self, None)

    def __abs__(self) -> Any:
        from tf_accum.graph.math_ops import unary

        return unary("Abs", self, None)
