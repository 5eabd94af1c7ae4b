"""``IndexedSlices``: a sparse gradient as rows of a dense tensor; SciPy conversions."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tf_accum.raw_ops._convert import is_scipy_sparse, scipy_rows

SCIPY_FORMATS = ("csr", "csc", "coo")


def rows_to_scipy(indices: Any, values: Any, dense_shape: Any, format: str = "csr") -> Any:
    """Rows ``values[i]`` at row ``indices[i]`` as a SciPy sparse array of ``dense_shape``.

    Every element of every given row is stored (zeros included), so the stored
    rows are exactly ``indices``; duplicate indices add up. scipy is imported
    here, on first use.

    Args:
        indices: integer vector.
        values: 2-D array, one row per index.
        dense_shape: the 2-D dense shape; a dimension 0 of -1 or None (unknown,
            as a sparse take reports an undeclared one) becomes the largest
            index plus one.
        format: "csr", "csc" or "coo".

    Returns:
        A ``scipy.sparse.csr_array`` (or csc/coo) of the values' dtype.

    Raises:
        ValueError: values that are not 2-D, an unknown dimension 1, a format
            SciPy has no name for here, or rows that do not match indices.
        ImportError: SciPy is not installed (the ``scipy`` extra).
    """
    if format not in SCIPY_FORMATS:
        raise ValueError(f"format must be one of {SCIPY_FORMATS}, got {format!r}")
    index = np.asarray(indices, np.int64)
    rows = np.asarray(values)
    if rows.ndim != 2 or index.ndim != 1 or rows.shape[0] != index.shape[0]:
        raise ValueError(
            f"A SciPy matrix needs one 2-D row per index: got indices of shape "
            f"{index.shape} and values of shape {rows.shape}"
        )
    given = [None, None] if dense_shape is None else list(dense_shape)
    if len(given) != 2:
        raise ValueError(f"A SciPy matrix is 2-D, but dense_shape is {given}")
    shape = [None if d is None or d == -1 else int(d) for d in given]
    if shape[1] is None:
        shape[1] = rows.shape[1]
    if shape[0] is None:
        shape[0] = int(index.max()) + 1 if index.size else 0
    import scipy.sparse

    width = rows.shape[1]
    coo = scipy.sparse.coo_array(
        (rows.ravel(), (np.repeat(index, width), np.tile(np.arange(width), index.size))),
        shape=tuple(shape),
    )
    return coo.asformat(format)


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
