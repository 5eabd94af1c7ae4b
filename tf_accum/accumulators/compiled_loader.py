"""Loading optional compiled loops (numba) once per process, lazily and safely.

A :class:`Loader` wraps a function that imports numba and compiles a set of
loops. The first :meth:`Loader.load` calls it (concurrent first calls wait for
one compilation); any failure gives None for good, and the callers use numpy.
Used by half_kernel (float16/bfloat16 sums) and sparse_kernel (sparse row
adds): each loads its own loops, so a process compiles only what it uses.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Loader(Generic[T]):
    """The loops ``compile()`` makes, made at most once (None if it fails).

    ``tried`` and ``kernels`` are the state :meth:`load` settles; tests may
    set them to act as if numba were missing (tried, no kernels) or as if
    nothing had been loaded yet.
    """

    def __init__(self, compile: Callable[[], T]) -> None:
        self._compile = compile
        self._lock = threading.Lock()
        self.kernels: T | None = None
        self.tried = False
        if hasattr(os, "register_at_fork"):
            forget = weakref.WeakMethod(self._forget_lock)
            os.register_at_fork(after_in_child=lambda: _call(forget))

    def _forget_lock(self) -> None:
        # A child forked while another thread compiled would find the lock held
        # forever, and compiling again would wait forever too, on numba's own
        # compiler lock (held by that thread, which the child does not have):
        # such a child uses numpy for good.
        if self._lock.locked() and not self.tried:
            self.tried = True
        self._lock = threading.Lock()

    def load(self) -> T | None:
        """The compiled loops, or None when numba is not available.

        The first call compiles (once per process; concurrent first calls wait
        for one compilation); later calls return at once. Any failure (numba
        missing, an incompatible numba or numpy, a compiler error) gives None,
        for good.
        """
        if self.tried:
            return self.kernels
        with self._lock:
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


def _call(method: weakref.WeakMethod[Callable[[], None]]) -> None:
    bound = method()
    if bound is not None:
        bound()
