"""``IndexedSlices``: a sparse gradient as rows of a dense tensor; SciPy conversions."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tf_accum.raw_ops.arguments import is_scipy_sparse, scipy_rows
from tf_accum.scipy_export import SCIPY_FORMATS, rows_to_scipy

__all__ = ["SCIPY_FORMATS", "IndexedSlices", "rows_to_scipy"]


class IndexedSlices(NamedTuple):
    """Rows ``values[i]`` of a dense tensor at row ``indices[i]``; immutable.

    Field names are TensorFlow's, so anything with ``.values``, ``.indices``
    and ``.dense_shape`` (TensorFlow's own IndexedSlices included) can stand
    where an IndexedSlices is expected. :meth:`from_scipy` and
    :meth:`to_scipy` convert from and to SciPy sparse matrices (the ``scipy``
    extra; SciPy is imported only by these).

    Args:
        values: array of shape ``[len(indices), ...]``.
        indices: integer vector.
        dense_shape: the dense tensor's shape, or None when unknown.
    """

    values: Any
    indices: Any
    dense_shape: Any = None

    @classmethod
    def from_scipy(cls, matrix: Any) -> IndexedSlices:
        """The stored rows of a 2-D SciPy sparse matrix or array (COO, CSR, CSC, ...).

        Each row with at least one stored entry becomes an index (int64,
        sorted) and its dense row the value (the matrix's dtype); duplicate
        entries add up; ``dense_shape`` is the matrix's shape (int64).

        Raises:
            TypeError: ``matrix`` is not a SciPy sparse matrix.
            InvalidArgumentError: it is not 2-D.
        """
        if not is_scipy_sparse(matrix):
            raise TypeError(f"Expected a scipy.sparse matrix or array, got {type(matrix).__name__}")
        indices, values = scipy_rows(matrix)
        return cls(values=values, indices=indices, dense_shape=np.array(matrix.shape, np.int64))

    def to_scipy(self, format: str = "csr") -> Any:
        """These rows as a SciPy sparse array of ``dense_shape``; see :func:`rows_to_scipy`."""
        return rows_to_scipy(self.indices, self.values, self.dense_shape, format)
