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
import struct
from collections.abc import Iterable
from typing import Any

import numpy as np

from tf_accum.distributed.bulk import Bulk

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

# A split message's header: the length of the pickled rest of it, before its arrays'
# memory, each starting at a multiple of _ALIGN bytes.
_LENGTH = struct.Struct("<Q")
_ALIGN = 16

# Types pickled as they are, at a size of their own (a number, a short string).
_PLAIN = frozenset({int, float, bool, str, type(None)})


def array_bytes(values: Iterable[Any]) -> int | None:
    """The bytes of ``values``' arrays, when all are numbers, strings, numpy scalars,
    numpy arrays and descriptors of arrays in shared memory (a few bytes each); None
    otherwise (an ObjectRef, say, is left to Ray)."""
    total = 0
    for value in values:
        kind = type(value)
        if kind is np.ndarray:
            if value.dtype.hasobject:
                return None
            total += value.nbytes
        elif kind not in _PLAIN and kind is not Bulk and not isinstance(value, np.generic):
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


def split(message: Any, count: int | None = None) -> tuple[bytes, ...]:
    """``message`` pickled in ``count`` pieces of equal size (by default as many as
    ``pieces_for`` says; the last ones are short or empty when it does not fill
    them); ``unpack`` takes them back. One piece is ``pack(message)``.

    Its arrays' memory is copied once, straight into the pieces (pickled out of
    band, after a header holding the rest of the message), and the receiver's
    arrays are views of the one buffer it joins the pieces into: no further copy
    on either side.
    """
    if count == 1:
        return (pack(message),)
    buffers: list[pickle.PickleBuffer] = []
    stream = pickle.dumps(message, pickle.HIGHEST_PROTOCOL, buffer_callback=buffers.append)
    raws = [buffer.raw() for buffer in buffers]
    sizes = [len(raw) for raw in raws]
    head = pickle.dumps((stream, sizes), pickle.HIGHEST_PROTOCOL)
    parts: list[Any] = [_LENGTH.pack(len(head)), head]
    offset = _LENGTH.size + len(head)
    for raw in raws:
        pad = -offset % _ALIGN  # each array starts aligned in the receiver's buffer
        parts.append(bytes(pad))
        parts.append(raw)
        offset += pad + len(raw)
    if count is None:
        count = pieces_for(offset)
        if count == 1:
            return (pack(message),)
    size = -(-offset // count)
    pieces: list[bytes] = []
    chunk: list[Any] = []
    room = size
    for part in parts:
        view = memoryview(part)
        while len(view):
            taken = view[:room]
            chunk.append(taken)
            view = view[len(taken) :]
            room -= len(taken)
            if not room:
                pieces.append(b"".join(chunk))
                chunk, room = [], size
    if chunk:
        pieces.append(b"".join(chunk))
    pieces.extend(b"" for _ in range(count - len(pieces)))
    return tuple(pieces)


def pack(message: Any) -> bytes:
    """``message`` as one bytes object (the receiver calls ``unpack``)."""
    return pickle.dumps(message, pickle.HIGHEST_PROTOCOL)


def unpack(message: Any, *pieces: bytes) -> Any:
    """A message as sent: a packed one, or a split one (``message`` and then its other
    ``pieces``), unpickled; any other as it came."""
    if pieces:
        return _unsplit((message, *pieces))
    if type(message) is bytes:
        return pickle.loads(message)
    return message


def _unsplit(pieces: tuple[bytes, ...]) -> Any:
    view = memoryview(bytearray().join(pieces))
    (length,) = _LENGTH.unpack_from(view)
    stream, sizes = pickle.loads(view[_LENGTH.size : _LENGTH.size + length])
    offset = _LENGTH.size + length
    buffers = []
    for size in sizes:
        offset += -offset % _ALIGN
        buffers.append(view[offset : offset + size])  # writable: the arrays are the caller's
        offset += size
    return pickle.loads(stream, buffers=buffers)
