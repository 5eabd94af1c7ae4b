"""``IndexedSlices``: a sparse gradient as rows of a dense tensor."""

from __future__ import annotations

from typing import Any, NamedTuple


class IndexedSlices(NamedTuple):
    """Rows ``values[i]`` of a dense tensor at row ``indices[i]``; immutable.

    Field names are TensorFlow's, so anything with ``.values``, ``.indices``
    and ``.dense_shape`` (TensorFlow's own IndexedSlices included) can stand
    where an IndexedSlices is expected.

    Args:
        values: array of shape ``[len(indices), ...]``.
        indices: integer vector.
        dense_shape: the dense tensor's shape, or None when unknown.
    """

    values: Any
    indices: Any
    dense_shape: Any = None
