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

    # numpy defers ``array * tensor`` (every binary operator, comparisons too) to
    # the reflected method here instead of treating the tensor as an element
    __array_priority__ = 100

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

    def __getitem__(self, key: Any) -> Any:
        """``t[i]``, ``t[:, 1:3]``, ``t[..., ::2, None]``: a StridedSlice op."""
        from tf_accum.graph.indexing import getitem

        return getitem(self, key)

    def __iter__(self) -> Any:
        """The tensors along the first dimension, when its length is known."""
        dims = self.shape.as_list() if self.shape.rank else None  # type: ignore[attr-defined]
        if not dims or dims[0] is None:
            raise TypeError(
                "Tensor objects are only iterable when eager execution is enabled or the "
                "first dimension's length is known. To iterate over this tensor use tf.map_fn "
                "or tf.unstack."
            )
        return (self[i] for i in range(dims[0]))

    def __matmul__(self, other: Any) -> Any:
        from tf_accum.graph.linalg_ops import matmul

        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        from tf_accum.graph.linalg_ops import matmul

        return matmul(other, self)

    def __lt__(self, other: Any) -> Any:
        from tf_accum.graph.elementwise_ops import less

        return less(self, other)

    def __le__(self, other: Any) -> Any:
        from tf_accum.graph.elementwise_ops import less_equal

        return less_equal(self, other)

    def __gt__(self, other: Any) -> Any:
        from tf_accum.graph.elementwise_ops import greater

        return greater(self, other)

    def __ge__(self, other: Any) -> Any:
        from tf_accum.graph.elementwise_ops import greater_equal

        return greater_equal(self, other)

    def __and__(self, other: Any) -> Any:
        from tf_accum.graph.elementwise_ops import logical_and

        return logical_and(self, other)

    def __rand__(self, other: Any) -> Any:
        from tf_accum.graph.elementwise_ops import logical_and

        return logical_and(other, self)

    def __or__(self, other: Any) -> Any:
        from tf_accum.graph.elementwise_ops import logical_or

        return logical_or(self, other)

    def __ror__(self, other: Any) -> Any:
        from tf_accum.graph.elementwise_ops import logical_or

        return logical_or(other, self)

    def __xor__(self, other: Any) -> Any:
        from tf_accum.graph.elementwise_ops import logical_xor

        return logical_xor(self, other)

    def __rxor__(self, other: Any) -> Any:
        from tf_accum.graph.elementwise_ops import logical_xor

        return logical_xor(other, self)

    def __invert__(self) -> Any:
        from tf_accum.graph.elementwise_ops import logical_not

        return logical_not(self)
