"""Large arrays between a process and a host on the same machine, through shared memory.

Ray sends an argument or result over 100 KiB through its object store, which
costs bookkeeping with the node's raylet per array (most of a large apply's
time). When caller and host share a machine, each calling
thread instead keeps one shared-memory buffer: it copies the gradient in and
passes a descriptor, the host adds straight from its mapping of the same
pages, and a take's result comes back the same way. Calls still go through
Ray, and still wait for their answer, so a thread's buffer is never used by
two calls at once. A TF1 cluster's request puts each large value it sends at
an offset of its own, and the host writes the answer's large outputs after
them (see tf_accum.graph.remote_run).

The buffer's file lives in /dev/shm only until the host has mapped it: the
name is then removed, so nothing is left behind when either process dies
after that. Its name carries the process id of its maker: a process making a
buffer removes those of makers that ended before their host mapped them.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

SHM_DIR = "/dev/shm"
# Below this, Ray sends an array inside the call itself, which is cheaper.
THRESHOLD = 100 * 1024
# Arrays several share a buffer with start at multiples of this.
ALIGN = 64
PREFIX = "tf_accum-"


def worth_sharing(value: Any) -> bool:
    """Whether ``value`` is an array worth a buffer: large, and of numbers."""
    return type(value) is np.ndarray and value.nbytes >= THRESHOLD and not value.dtype.hasobject


def remove_left_behind() -> None:
    """Remove the buffer files of processes that ended before their host mapped them
    (their names, ``tf_accum-PID-...``, say which process made them)."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    for name in names:
        maker = name[len(PREFIX) :].split("-", 1)[0]
        # a process id is at most 7 digits (Linux's pid_max is 2**22)
        if not name.startswith(PREFIX) or not (maker.isdigit() and len(maker) <= 7):
            continue
        if not _alive(int(maker)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(SHM_DIR, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: alive, or not ours to judge
    return True


def available() -> bool:
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)


@dataclass(frozen=True)
class Bulk:
    """Where an array is: in the caller's buffer ``name``, from byte ``offset`` (or,
    without a dtype, the room from there on for results)."""

    name: str
    capacity: int
    owner: str
    dtype: Any = None
    shape: tuple[int, ...] = ()
    offset: int = 0


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to where the next array in a buffer may start."""
    return -(-nbytes // ALIGN) * ALIGN


class CallerBuffer:
    """One calling thread's buffer (the caller's side)."""

    def __init__(self, size: int, owner: str) -> None:
        remove_left_behind()
        self.owner = owner
        self.name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
        self.path = os.path.join(SHM_DIR, self.name)
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, size)
            self.map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.size = size
        self.mapped_by_host = False

    def put(self, array: Array, offset: int = 0) -> Bulk:
        """Copy ``array`` in at ``offset``; returns its descriptor."""
        view: Array = np.ndarray(array.shape, array.dtype, buffer=self.map, offset=offset)
        np.copyto(view, array)
        return Bulk(self.name, self.size, self.owner, array.dtype, array.shape, offset)

    def describe(self, offset: int = 0) -> Bulk:
        """A descriptor with room for results from ``offset`` on and no array in it."""
        return Bulk(self.name, self.size, self.owner, offset=offset)

    def take_out(self, bulk: Bulk) -> Array:
        """A copy of the array the host wrote (the buffer is reused by the next call)."""
        view: Array = np.ndarray(bulk.shape, bulk.dtype, buffer=self.map, offset=bulk.offset)
        copy: Array = view.copy()
        return copy

    def host_mapped(self) -> None:
        """The host holds the pages now: drop the name."""
        if not self.mapped_by_host:
            self.mapped_by_host = True
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def close(self) -> None:
        self.host_mapped()
        _close(self.map)


class HostMappings:
    """The host's mappings of its callers' buffers."""

    def __init__(self) -> None:
        self._maps: dict[str, tuple[str, mmap.mmap]] = {}

    def _map(self, bulk: Bulk) -> mmap.mmap:
        found = self._maps.get(bulk.name)
        if found is None:
            # the name is checked: only our own buffer files, never a path
            if "/" in bulk.name or not bulk.name.startswith("tf_accum-"):
                raise ValueError(f"not a tf_accum buffer: {bulk.name!r}")
            fd = os.open(os.path.join(SHM_DIR, bulk.name), os.O_RDWR)
            try:
                found = (bulk.owner, mmap.mmap(fd, bulk.capacity))
            finally:
                os.close(fd)
            self._maps[bulk.name] = found
        return found[1]

    def attach(self, bulk: Bulk) -> None:
        """Map a caller's new buffer (the caller then removes its name)."""
        self._map(bulk)

    def array(self, bulk: Bulk) -> Array:
        """A read-only view of the array a caller put in its buffer."""
        view: Array = np.ndarray(bulk.shape, bulk.dtype, buffer=self._map(bulk), offset=bulk.offset)
        view.flags.writeable = False
        return view

    def give(self, result: Array, bulk: Bulk) -> Bulk | None:
        """Write ``result`` into the caller's buffer at the room's offset if it is large
        and fits; its descriptor."""
        if not worth_sharing(result) or bulk.offset + result.nbytes > bulk.capacity:
            return None
        mapping = self._map(bulk)
        view: Array = np.ndarray(result.shape, result.dtype, buffer=mapping, offset=bulk.offset)
        np.copyto(view, result)
        return Bulk(bulk.name, bulk.capacity, bulk.owner, result.dtype, result.shape, bulk.offset)

    def count(self) -> int:
        return len(self._maps)

    def release(self, name: str) -> None:
        found = self._maps.pop(name, None)
        if found is not None:
            _close(found[1])

    def release_caller(self, caller: str) -> None:
        for name, (owner, _) in list(self._maps.items()):
            if owner == caller:
                self.release(name)


def _close(mapping: mmap.mmap) -> None:
    # a view still using it raises BufferError: it is unmapped when the view goes
    with contextlib.suppress(BufferError):
        mapping.close()
