"""Small messages between a process and a host actor, pickled by us into bytes objects.

Ray serialises a call's argument or a method's result that holds numpy
values through its own out-of-band pickling, made for large arrays (they go
to the object store and are read without a copy). For a message of a few
kilobytes that path costs both ends more than the whole message is worth,
and a bytes object goes through Ray's cheapest path. So a message whose
arrays are small travels pickled, one of a few hundred kilobytes pickled in
pieces that Ray sends inline, and one with a large array (a 1e6-element
gradient, say) is left to Ray.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from typing import Any

import numpy as np

# Past this many bytes of arrays a message is left to Ray: far below Ray's limit for
# arguments sent inline (100 KiB), so a pickled message never goes to the object store.
SMALL_BYTES = 64 * 1024

# Up to this many bytes of arrays, a message still travels pickled, in pieces of at
# most PIECE_BYTES, each an argument (or a result) of its own: Ray sends each inline,
# where one argument over 100 KiB would go through the object store (a store write
# and read, and work for the node's raylet, per message). Larger messages (a
# 1e6-element gradient) are left to Ray, whose store reads them without a copy.
MEDIUM_BYTES = 1024 * 1024
PIECE_BYTES = 96 * 1024  # under Ray's 100 KiB, with room for its framing

# Types pickled as they are, at a size of their own (a number, a short string).
_PLAIN = frozenset({int, float, bool, str, type(None)})


def array_bytes(values: Iterable[Any]) -> int | None:
    """The bytes of ``values``' arrays, when all are numbers, strings, numpy scalars
    and numpy arrays; None otherwise (an ObjectRef, say, is left to Ray)."""
    total = 0
    for value in values:
        kind = type(value)
        if kind is np.ndarray:
            if value.dtype.hasobject:
                return None
            total += value.nbytes
        elif kind not in _PLAIN and not isinstance(value, np.generic):
            return None
    return total


def is_small(values: Iterable[Any]) -> bool:
    """Whether ``values`` are numbers, strings, numpy scalars and numpy arrays of
    ``SMALL_BYTES`` in all (anything else, an ObjectRef say, is left to Ray)."""
    total = array_bytes(values)
    return total is not None and total <= SMALL_BYTES


def pieces_for(size: int) -> int:
    """How many pieces a pickled message of about ``size`` bytes travels in."""
    return max(1, -(-size // PIECE_BYTES))


def split(data: bytes, count: int | None = None) -> tuple[bytes, ...]:
    """``data`` in ``count`` pieces of equal size (by default as many as ``pieces_for``
    says); the last ones are short or empty when ``data`` does not fill them."""
    count = pieces_for(len(data)) if count is None else count
    if count == 1:
        return (data,)
    size = -(-len(data) // count)
    return tuple(data[i * size : (i + 1) * size] for i in range(count))


def pack(message: Any) -> bytes:
    """``message`` as one bytes object (the receiver calls ``unpack``)."""
    return pickle.dumps(message, pickle.HIGHEST_PROTOCOL)


def unpack(message: Any, *pieces: bytes) -> Any:
    """A message as sent: a packed one (in ``pieces`` after the first, if split)
    unpickled, any other as it came."""
    if pieces:
        return pickle.loads(b"".join((message, *pieces)))
    if type(message) is bytes:
        return pickle.loads(message)
    return message
