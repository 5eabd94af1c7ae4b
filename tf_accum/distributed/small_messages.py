"""Small messages between a process and a host actor, pickled by us into one bytes object.

Ray serialises a call's argument or a method's result that holds numpy
values through its own out-of-band pickling, made for large arrays (they go
to the object store and are read without a copy). For a message of a few
kilobytes that path costs both ends more than the whole message is worth,
and a bytes object goes through Ray's cheapest path. So a message whose
arrays are small travels pickled, and one with a large array (a 1e6-element
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

# Types pickled as they are, at a size of their own (a number, a short string).
_PLAIN = frozenset({int, float, bool, str, type(None)})


def is_small(values: Iterable[Any]) -> bool:
    """Whether ``values`` are numbers, strings, numpy scalars and numpy arrays of
    ``SMALL_BYTES`` in all (anything else, an ObjectRef say, is left to Ray)."""
    total = 0
    for value in values:
        kind = type(value)
        if kind is np.ndarray:
            if value.dtype.hasobject:
                return False
            total += value.nbytes
        elif kind not in _PLAIN and not isinstance(value, np.generic):
            return False
    return total <= SMALL_BYTES


def pack(message: Any) -> bytes:
    """``message`` as one bytes object (the receiver calls ``unpack``)."""
    return pickle.dumps(message, pickle.HIGHEST_PROTOCOL)


def unpack(message: Any) -> Any:
    """A message as sent: a packed one unpickled, any other as it came."""
    if type(message) is bytes:
        return pickle.loads(message)
    return message
