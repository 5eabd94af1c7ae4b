"""Loading optional compiled loops (numba) once per process, lazily and safely.

A :class:`Loader` wraps a function that imports numba and compiles a set of
loops. The first :meth:`Loader.load` calls it (concurrent first calls wait for
one compilation; the loaders compile one at a time); any failure gives None for
good, and the callers use numpy.
Used by half_kernel (float16/bfloat16 sums) and sparse_kernel (sparse row
adds): each loads its own loops, so a process compiles only what it uses.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Loader(Generic[T]):
    """The loops ``compile()`` makes, made at most once (None if it fails).

    ``tried`` and ``kernels`` are the state :meth:`load` settles; tests may
    set them to act as if numba were missing (tried, no kernels) or as if
    nothing had been loaded yet.
    """

    def __init__(self, compile: Callable[[], T]) -> None:
        self._compile = compile
        self.kernels: T | None = None
        self.tried = False
        _loaders.add(self)

    def load(self) -> T | None:
        """The compiled loops, or None when numba is not available.

        The first call compiles (once per process; concurrent first calls wait
        for one compilation); later calls return at once. Any failure (numba
        missing, an incompatible numba or numpy, a compiler error) gives None,
        for good.
        """
        if self.tried:
            return self.kernels
        with _lock:
            if not self.tried:
                try:
                    self.kernels = self._compile()
                except Exception:  # whatever goes wrong, numpy still gives the same bits
                    self.kernels = None
                self.tried = True
        return self.kernels

    def loaded(self) -> T | None:
        """The loops if an earlier :meth:`load` made them, else None (never compiles)."""
        return self.kernels


# One lock for every loader (compiling takes numba's own global lock anyway),
# so that a forked child knows whether any compilation was under way.
_lock = threading.Lock()
_loaders: weakref.WeakSet[Loader[Any]] = weakref.WeakSet()


def _forget_lock() -> None:
    # A child forked while another thread compiled would find the lock held
    # forever, and compiling any loops would wait forever too, on numba's own
    # compiler lock (held by that thread, which the child does not have): such
    # a child uses numpy for good, for every loader that has not loaded yet.
    global _lock
    if _lock.locked():
        for loader in list(_loaders):
            loader.tried = True
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_lock)
