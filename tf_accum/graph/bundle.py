"""Small arrays of a request to a task's host, sent in one buffer.

Ray serialises every numpy array of a call's arguments as a buffer of its
own, at a fixed cost per buffer on both sides; a worker's apply request
carries many small gradients (and one large one). The small ones go as one
byte buffer and a layout, and the host takes views of it: one copy of a few
kilobytes on the worker instead of a buffer's handling per array. Large
arrays stay separate, so Ray still moves them without a copy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# Arrays up to this many bytes share the buffer; larger ones travel on their own.
SMALL_ARRAY_BYTES = 1 << 16
ALIGNMENT = 64  # bytes; every array of the buffer starts aligned for any dtype
NUMERIC_KINDS = frozenset("biufc")

Bundle = tuple[np.ndarray[Any, Any], tuple[tuple[int, str, tuple[int, ...], int], ...]]


def bundle_small_arrays(values: list[Any]) -> Bundle | None:
    """Move the small numeric arrays of ``values`` into one buffer (their places in
    ``values`` become None); returns (buffer, layout), or None if fewer than two are small."""
    small = [
        i
        for i, value in enumerate(values)
        if type(value) is np.ndarray
        and value.nbytes <= SMALL_ARRAY_BYTES
        and value.dtype.kind in NUMERIC_KINDS
    ]
    if len(small) < 2:
        return None
    offsets = []
    total = 0
    for i in small:
        total = -(-total // ALIGNMENT) * ALIGNMENT
        offsets.append(total)
        total += values[i].nbytes
    buffer = np.empty(total, np.uint8)
    layout = []
    for i, offset in zip(small, offsets, strict=True):
        array = values[i]
        flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        buffer[offset : offset + flat.size] = flat
        layout.append((i, array.dtype.str, array.shape, offset))
        values[i] = None
    return buffer, tuple(layout)


def unbundle(values: list[Any], bundle: Bundle) -> list[Any]:
    """``values`` with the bundled arrays back in their places (read-only views of the
    buffer, as Ray hands over arrays)."""
    buffer, layout = bundle
    found = list(values)
    for i, dtype, shape, offset in layout:
        array = np.frombuffer(buffer, dtype=dtype, count=math.prod(shape), offset=offset)
        array.flags.writeable = False
        found[i] = array.reshape(shape)
    return found
