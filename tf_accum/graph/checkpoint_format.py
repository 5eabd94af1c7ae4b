"""TensorFlow's checkpoint files (format V2), written and read without TensorFlow.

A checkpoint with prefix ``P`` is two files:

- ``P.data-00000-of-00001``: the tensors' bytes one after another
  (little-endian; a string tensor as its lengths, their checksum, then its bytes);
- ``P.index``: a sorted string table (LevelDB's table layout, as TensorFlow's
  ``lib/io/table`` writes it, uncompressed) mapping ``""`` to a
  ``BundleHeaderProto`` and each tensor's name to a ``BundleEntryProto`` (dtype,
  shape, shard, offset, size, masked CRC32C of the bytes).

So TensorFlow reads what tf_accum writes (``tf.train.load_checkpoint``,
``tf.compat.v1.train.Saver().restore``) and tf_accum reads TensorFlow's. The
messages come from ``tf_accum.graph.proto_messages``; the checksums from the
``google-crc32c`` package (the ``tf1`` extra), imported when first used.
Tensors saved as slices of a partitioned variable are not read (UnimplementedError).
"""

from __future__ import annotations

import functools
import os
import struct
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, as_dtype, string
from tf_accum.graph.proto_messages import message_class

Array = np.ndarray[Any, Any]

INDEX_SUFFIX = ".index"
# TensorFlow's table options for a bundle's index: 256 KiB blocks, a restart point every
# 16 keys (every key in the block of block handles), no compression
BLOCK_SIZE = 262144
RESTART_INTERVAL = 16
NO_COMPRESSION = 0
TABLE_MAGIC = 0xDB4775248B80FB57
HANDLE_SPACE = 40  # two block handles, padded
FOOTER_LENGTH = HANDLE_SPACE + 8
CRC_MASK_DELTA = 0xA282EAD8
BUNDLE_VERSION = 1


def data_path(prefix: str, shard: int = 0, num_shards: int = 1) -> str:
    """The file of shard ``shard`` of a checkpoint's tensors."""
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


# --- checksums ---


@functools.lru_cache(maxsize=1)
def _crc_module() -> Any:
    try:
        import google_crc32c
    except ImportError:
        raise errors.UnimplementedError(
            None,
            None,
            "TensorFlow's checkpoint format needs the google-crc32c package: "
            "pip install 'tf-accum[tf1]'",
        ) from None
    return google_crc32c


def crc32c(data: bytes, start: int = 0) -> int:
    """CRC32C of ``data``, continuing from ``start`` (the CRC of what came before)."""
    module = _crc_module()
    return int(module.extend(start, data))


def mask(crc: int) -> int:
    """A CRC as TensorFlow stores it: rotated and offset, so a CRC of data holding CRCs is sound."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + CRC_MASK_DELTA) & 0xFFFFFFFF


def unmask(masked: int) -> int:
    rotated = (masked - CRC_MASK_DELTA) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF


# --- varints ---


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """The varint at ``position`` and the position after it.

    Raises:
        DataLossError: the data ends inside the varint.
    """
    result = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise errors.DataLossError(None, None, "corrupted checkpoint index: bad varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


# --- the sorted string table ---


class _BlockBuilder:
    """One block of a table: keys sharing a prefix with the previous key store only the
    rest, and every ``restart_interval`` keys one is stored whole (a restart point)."""

    def __init__(self, restart_interval: int) -> None:
        self._interval = restart_interval
        self._buffer = bytearray()
        self._restarts = [0]
        self._count = 0
        self._last = b""

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self._count < self._interval:
            limit = min(len(key), len(self._last))
            while shared < limit and key[shared] == self._last[shared]:
                shared += 1
        else:
            self._restarts.append(len(self._buffer))
            self._count = 0
        self._buffer += varint(shared) + varint(len(key) - shared) + varint(len(value))
        self._buffer += key[shared:] + value
        self._last = key
        self._count += 1

    def size_estimate(self) -> int:
        return len(self._buffer) + 4 * len(self._restarts) + 4

    @property
    def empty(self) -> bool:
        return not self._buffer

    def finish(self) -> bytes:
        restarts = struct.pack(f"<{len(self._restarts)}I", *self._restarts)
        return bytes(self._buffer) + restarts + struct.pack("<I", len(self._restarts))


def _shortest_separator(start: bytes, limit: bytes) -> bytes:
    """A short key >= ``start`` and < ``limit`` (the index's key for a full block)."""
    common = 0
    end = min(len(start), len(limit))
    while common < end and start[common] == limit[common]:
        common += 1
    if common < end:
        byte = start[common]
        if byte < 0xFF and byte + 1 < limit[common]:
            return start[:common] + bytes([byte + 1])
    return start


def _short_successor(key: bytes) -> bytes:
    """A short key >= ``key`` (the index's key for the last block)."""
    for position, byte in enumerate(key):
        if byte != 0xFF:
            return key[:position] + bytes([byte + 1])
    return key


def _handle(offset: int, size: int) -> bytes:
    return varint(offset) + varint(size)


def table_bytes(entries: list[tuple[bytes, bytes]]) -> bytes:
    """A sorted string table of ``entries`` (sorted by key), as TensorFlow's table builder lays it out."""
    out = bytearray()
    index = _BlockBuilder(1)
    block = _BlockBuilder(RESTART_INTERVAL)
    pending: tuple[bytes, bytes] | None = None  # (last key of a written block, its handle)

    def write_block(builder: _BlockBuilder) -> bytes:
        contents = builder.finish() + bytes([NO_COMPRESSION])
        handle = _handle(len(out), len(contents) - 1)
        out.extend(contents + struct.pack("<I", mask(crc32c(contents))))
        return handle

    last = b""
    for key, value in entries:
        if pending is not None:
            index.add(_shortest_separator(pending[0], key), pending[1])
            pending = None
        block.add(key, value)
        last = key
        if block.size_estimate() >= BLOCK_SIZE:
            pending = (last, write_block(block))
            block = _BlockBuilder(RESTART_INTERVAL)
    if not block.empty:
        pending = (last, write_block(block))
    meta_handle = write_block(_BlockBuilder(RESTART_INTERVAL))
    if pending is not None:
        index.add(_short_successor(pending[0]), pending[1])
    index_handle = write_block(index)
    handles = meta_handle + index_handle
    out += handles + bytes(HANDLE_SPACE - len(handles))
    out += struct.pack("<II", TABLE_MAGIC & 0xFFFFFFFF, TABLE_MAGIC >> 32)
    return bytes(out)


def _block(data: bytes, offset: int, size: int, path: str) -> bytes:
    end = offset + size
    if end + 5 > len(data):
        raise errors.DataLossError(
            None, None, f"corrupted checkpoint index {path}: truncated block"
        )
    contents = data[offset : end + 1]
    (stored,) = struct.unpack_from("<I", data, end + 1)
    if mask(crc32c(contents)) != stored:
        raise errors.DataLossError(
            None, None, f"corrupted checkpoint index {path}: block checksum mismatch"
        )
    if data[end] != NO_COMPRESSION:
        raise errors.UnimplementedError(
            None,
            None,
            f"checkpoint index {path} has a compressed block, which tf_accum cannot read",
        )
    return data[offset:end]


def _block_entries(block: bytes, path: str) -> Iterator[tuple[bytes, bytes]]:
    (num_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * num_restarts
    position = 0
    key = b""
    while position < end:
        shared, position = read_varint(block, position)
        unshared, position = read_varint(block, position)
        length, position = read_varint(block, position)
        if shared > len(key) or position + unshared + length > end:
            raise errors.DataLossError(None, None, f"corrupted checkpoint index {path}: bad entry")
        key = key[:shared] + block[position : position + unshared]
        position += unshared
        yield key, block[position : position + length]
        position += length


def table_entries(data: bytes, path: str) -> Iterator[tuple[bytes, bytes]]:
    """The (key, value) pairs of a sorted string table, in order.

    Raises:
        DataLossError: not a table, or a block whose checksum does not match.
    """
    if len(data) < FOOTER_LENGTH:
        raise errors.DataLossError(None, None, f"not an sstable (file too short): {path}")
    low, high = struct.unpack_from("<II", data, len(data) - 8)
    if low | (high << 32) != TABLE_MAGIC:
        raise errors.DataLossError(None, None, f"not an sstable (bad magic number): {path}")
    footer = data[len(data) - FOOTER_LENGTH :]
    _, position = read_varint(footer, 0)
    _, position = read_varint(footer, position)  # the meta index, which holds nothing we need
    index_offset, position = read_varint(footer, position)
    index_size, _ = read_varint(footer, position)
    for _, handle in _block_entries(_block(data, index_offset, index_size, path), path):
        offset, position = read_varint(handle, 0)
        size, _ = read_varint(handle, position)
        yield from _block_entries(_block(data, offset, size, path), path)


# --- tensors and their entries ---


@functools.lru_cache(maxsize=1)
def _enum_numbers() -> dict[DType, int]:
    numbers: dict[DType, int] = {}
    for number in range(1, 24):
        try:
            numbers[as_dtype(number)] = number
        except TypeError:
            continue
    return numbers


def _enum_of(dtype: DType) -> int:
    number = _enum_numbers().get(dtype)
    if number is None:
        raise errors.UnimplementedError(
            None, None, f"tf_accum cannot save a tensor of dtype {dtype.name} in a checkpoint"
        )
    return number


def _length_bytes(length: int) -> bytes:
    # TensorFlow's checksum of a string's length covers it as a 32-bit integer
    return struct.pack("<I", length) if length < 2**32 else struct.pack("<Q", length)


def _string_bytes(array: Array) -> tuple[bytes, int]:
    """A string tensor's bytes (lengths, their masked CRC, the strings) and its CRC."""
    items = [item.encode() if isinstance(item, str) else bytes(item) for item in array.reshape(-1)]
    lengths = b"".join(varint(len(item)) for item in items)
    crc = 0
    for item in items:
        crc = crc32c(_length_bytes(len(item)), crc)
    length_check = struct.pack("<I", mask(crc))
    crc = crc32c(length_check, crc)
    for item in items:
        if item:
            crc = crc32c(item, crc)
    return lengths + length_check + b"".join(items), crc


def tensor_bytes(array: Array, dtype: DType) -> tuple[bytes, int]:
    """What a checkpoint stores of a tensor, and its (unmasked) CRC32C."""
    if dtype == string:
        return _string_bytes(array)
    raw = np.ascontiguousarray(array, dtype=dtype.numpy_dtype.newbyteorder("<")).tobytes()
    return raw, crc32c(raw)


def write_checkpoint(prefix: str, tensors: Mapping[str, tuple[Array, DType]]) -> None:
    """Write ``tensors`` (name -> (value, dtype)) as the checkpoint ``prefix``.

    Both files are written under temporary names and then renamed, data first:
    a reader never sees an index without its data.

    Raises:
        NotFoundError: the directory does not exist.
        PermissionDeniedError: it cannot be written.
    """
    header_class = message_class("BundleHeaderProto")
    entry_class = message_class("BundleEntryProto")
    header = header_class(num_shards=1)
    header.version.producer = BUNDLE_VERSION
    entries: list[tuple[bytes, bytes]] = [(b"", header.SerializeToString())]
    data_file = data_path(prefix)
    temporary = f".tempstate{uuid.uuid4().int % 10**19}"
    with _opened(data_file + temporary, "wb") as out:
        offset = 0
        for name in sorted(tensors, key=lambda n: n.encode()):
            array, dtype = tensors[name]
            raw, crc = tensor_bytes(np.asarray(array), dtype)
            entry = entry_class(dtype=_enum_of(dtype), offset=offset, size=len(raw))
            entry.crc32c = mask(crc)
            entry.shape.SetInParent()  # a scalar's empty shape is written too, as TensorFlow does
            for size in np.shape(array):
                entry.shape.dim.add(size=int(size))
            out.write(raw)
            offset += len(raw)
            entries.append((name.encode(), entry.SerializeToString()))
    with _opened(prefix + INDEX_SUFFIX + temporary, "wb") as out:
        out.write(table_bytes(entries))
    os.replace(data_file + temporary, data_file)
    os.replace(prefix + INDEX_SUFFIX + temporary, prefix + INDEX_SUFFIX)


class _opened:
    """``open``, with the OSError as TensorFlow's error class."""

    def __init__(self, path: str, mode: str) -> None:
        self._path = path
        self._mode = mode

    def __enter__(self) -> Any:
        try:
            self._file = open(self._path, self._mode)  # noqa: SIM115 - closed in __exit__
        except FileNotFoundError:
            raise errors.NotFoundError(
                None, None, f"{self._path}; No such file or directory"
            ) from None
        except PermissionError:
            raise errors.PermissionDeniedError(
                None, None, f"{self._path}; Permission denied"
            ) from None
        return self._file

    def __exit__(self, *exc: object) -> None:
        self._file.close()


class CheckpointReader:
    """The tensors of checkpoint ``prefix``: names, shapes, dtypes, values.

    Raises:
        NotFoundError: no ``prefix.index`` file.
        DataLossError: an index that is not a checkpoint's, or damaged.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        index = prefix + INDEX_SUFFIX
        try:
            with open(index, "rb") as file:
                data = file.read()
        except IsADirectoryError:
            raise errors.DataLossError(
                None, None, f"Unable to open table file {index}: Is a directory"
            ) from None
        except (FileNotFoundError, NotADirectoryError):
            raise errors.NotFoundError(
                None,
                None,
                "Unsuccessful TensorSliceReader constructor: Failed to find any matching files "
                f"for {prefix}",
            ) from None
        header_class = message_class("BundleHeaderProto")
        entry_class = message_class("BundleEntryProto")
        self._entries: dict[str, Any] = {}
        self._num_shards = 1
        for key, value in table_entries(data, index):
            if key == b"":
                header = header_class.FromString(value)
                if header.endianness != 0:
                    raise errors.UnimplementedError(
                        None, None, f"checkpoint {prefix} is big-endian, which tf_accum cannot read"
                    )
                self._num_shards = max(1, header.num_shards)
                continue
            self._entries[key.decode(errors="replace")] = entry_class.FromString(value)

    def names(self) -> list[str]:
        return sorted(self._entries)

    # --- TensorFlow's CheckpointReader methods ---

    def get_tensor(self, tensor_str: str) -> Any:
        """The value of tensor ``tensor_str`` as TensorFlow's reader gives it: an array,
        or for a scalar a numpy scalar (bytes for a string). See ``tensor``."""
        value = self.tensor(tensor_str)
        return value[()] if value.shape == () else np.array(value)

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {name: self.shape(name) for name in self._entries}

    def get_variable_to_dtype_map(self) -> dict[str, DType]:
        return {name: self.dtype(name) for name in self._entries}

    def has_tensor(self, name: str) -> bool:
        return name in self._entries

    def _entry(self, name: str) -> Any:
        entry = self._entries.get(name)
        if entry is None:
            raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint")
        return entry

    def dtype(self, name: str) -> DType:
        return as_dtype(self._entry(name).dtype)

    def shape(self, name: str) -> list[int]:
        return [dim.size for dim in self._entry(name).shape.dim]

    def tensor(self, name: str) -> Array:
        """The value of tensor ``name`` (read-only).

        Raises:
            NotFoundError: no such tensor, or its data file is missing.
            DataLossError: its bytes do not match their checksum.
            UnimplementedError: it was saved as slices of a partitioned variable.
        """
        entry = self._entry(name)
        if entry.slices:
            raise errors.UnimplementedError(
                None,
                None,
                f"{name} is saved in slices (a partitioned variable): tf_accum cannot read it",
            )
        dtype = as_dtype(entry.dtype)
        shape = tuple(dim.size for dim in entry.shape.dim)
        stored = dtype.numpy_dtype.newbyteorder("<") if dtype != string else np.dtype(np.uint8)
        if dtype != string and entry.size != int(np.prod(shape, dtype=np.int64)) * stored.itemsize:
            raise errors.DataLossError(
                None, None, f"Checkpoint entry of {name} has the wrong size in {self.prefix}"
            )
        with _opened(data_path(self.prefix, entry.shard_id, self._num_shards), "rb") as file:
            file.seek(entry.offset)
            raw = file.read(entry.size)
        if len(raw) != entry.size:
            raise errors.DataLossError(
                None, None, f"Checkpoint data for {name} is truncated in {self.prefix}"
            )
        if dtype == string:
            value, crc = _strings_from(raw, int(np.prod(shape, dtype=np.int64)), name)
            value = value.reshape(shape)
        else:
            crc = crc32c(raw)
            # a read-only view of the bytes read, not a copy (a restore copies it into the variable)
            value = np.frombuffer(raw, dtype=stored).astype(dtype.numpy_dtype, copy=False)
            value = value.reshape(shape)
        if mask(crc) != entry.crc32c:
            raise errors.DataLossError(
                None,
                None,
                f"Checksum does not match: stored {entry.crc32c} vs. calculated on the restored "
                f"bytes {mask(crc)} (tensor {name} of checkpoint {self.prefix})",
            )
        return value


def _strings_from(raw: bytes, count: int, name: str) -> tuple[Array, int]:
    lengths = []
    position = 0
    crc = 0
    for _ in range(count):
        length, position = read_varint(raw, position)
        lengths.append(length)
        crc = crc32c(_length_bytes(length), crc)
    crc = crc32c(raw[position : position + 4], crc)
    position += 4
    items = np.empty(count, dtype=object)
    for i, length in enumerate(lengths):
        items[i] = raw[position : position + length]
        if length:
            crc = crc32c(items[i], crc)
        position += length
    return items, crc


__all__ = [
    "CheckpointReader",
    "INDEX_SUFFIX",
    "data_path",
    "write_checkpoint",
]
