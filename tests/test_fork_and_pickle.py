"""Fork, multiprocessing, pickling and copying (issue 9, items 4 and 6).

A forked child starts with empty tables: the parent's handles are NotFound
there, new accumulators work, nothing hangs even when other threads held
locks or waited in takes at the fork.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import gc
import multiprocessing
import os
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import CHILD_WAIT, in_forked_child, wait_child, wait_until
from tf_accum import errors
from tf_accum.resources import current_table

raw = tfa.raw_ops
F32 = tfa.float32

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
# Python 3.12+ warns about forking a process with threads: that is the point here
pytestmark = pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")


def _child_work(inherited: int) -> str:
    """What a child does: the parent's handle is gone; a new accumulator works."""
    try:
        raw.ResourceAccumulatorApplyGradient(handle=inherited, local_step=0, gradient=[1.0])
        return "inherited handle still worked"
    except errors.NotFoundError:
        pass
    h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[1], reduction_type="SUM")
    if h == inherited:
        return "handle reused"
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=[2.0])
    taken = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32, timeout=5)
    shared = raw.ResourceConditionalAccumulator(dtype=F32, shape=[1], shared_name="fork-shared")
    if int(raw.ResourceAccumulatorNumAccumulated(handle=shared)) != 0:
        return "the shared accumulator came with its gradients"
    return "ok" if taken.tolist() == [2.0] else f"took {taken}"


class _Busy:
    """Threads that keep the accumulator's and the table's locks busy, and a waiting take."""

    def __init__(self) -> None:
        self.handle = raw.ResourceConditionalAccumulator(
            dtype=F32, shape=[256], reduction_type="SUM", shared_name="fork-shared"
        )
        raw.ResourceAccumulatorApplyGradient(
            handle=self.handle, local_step=0, gradient=np.ones(256, np.float32)
        )
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._apply),
            threading.Thread(target=self._create),
            threading.Thread(target=self._wait),
        ]
        for thread in self.threads:
            thread.start()

    def _apply(self) -> None:
        gradient = np.ones(256, np.float32)
        while not self.stop.is_set():
            raw.ResourceAccumulatorApplyGradient(
                handle=self.handle, local_step=0, gradient=gradient
            )

    def _create(self) -> None:
        while not self.stop.is_set():
            h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[1])
            raw.DestroyResourceOp(resource=h)

    def _wait(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(errors.DeadlineExceededError):
                raw.ResourceAccumulatorTakeGradient(
                    handle=self.handle, num_required=2**30, dtype=F32, timeout=0.05
                )

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(CHILD_WAIT)
        assert not any(thread.is_alive() for thread in self.threads)
        raw.DestroyResourceOp(resource=self.handle)


@needs_fork
def test_os_fork_while_threads_use_accumulators_gives_the_child_empty_tables() -> None:
    busy = _Busy()
    try:
        for _ in range(5):
            outcome = in_forked_child(lambda: _child_work(busy.handle))
            assert outcome == "ok", outcome
    finally:
        busy.finish()


def _pool_work(handle: int) -> str:
    return _child_work(handle)


@needs_fork
def test_multiprocessing_fork_workers_start_clean() -> None:
    busy = _Busy()
    try:
        context = multiprocessing.get_context("fork")
        with context.Pool(2) as pool:
            outcomes = pool.map_async(_pool_work, [busy.handle] * 4).get(CHILD_WAIT)
        assert outcomes == ["ok"] * 4
    finally:
        busy.finish()


@needs_fork
def test_the_parent_is_untouched_by_a_fork() -> None:
    h = raw.ResourceConditionalAccumulator(dtype=F32, shape=[1], reduction_type="SUM")
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=[3.0])
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            code = 0 if not current_table().live_handles() else 1
        finally:
            os._exit(code)
    assert wait_child(pid) == 0
    assert raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=F32).tolist() == [
        3.0
    ]
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("cls", ["ConditionalAccumulator", "SparseConditionalAccumulator"])
@pytest.mark.parametrize("shared_name", [None, "pickle-shared"])
def test_compat_objects_refuse_pickling_and_deep_copies(cls: str, shared_name: str | None) -> None:
    acc = getattr(tfa.compat.v1, cls)(F32, shape=[2, 2], shared_name=shared_name)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        with pytest.raises(TypeError, match="cannot pickle .*shared_name"):
            pickle.dumps(acc, protocol)
    with pytest.raises(TypeError, match="cannot deep-copy"):
        copy.deepcopy(acc)
    acc.close()


@pytest.mark.parametrize("cls", ["ConditionalAccumulator", "SparseConditionalAccumulator"])
def test_a_copy_shares_the_accumulator_and_keeps_it_alive(cls: str) -> None:
    acc = getattr(tfa.compat.v1, cls)(F32, shape=[2, 2])
    handle = acc.accumulator_ref
    twin = copy.copy(acc)
    assert twin.accumulator_ref == handle and twin.dtype == acc.dtype and twin.name == acc.name
    acc.set_global_step(3)
    assert twin.stats()["global_step"] == 3
    del acc
    gc.collect()
    assert twin.stats()["global_step"] == 3  # still alive: the copy owns it too
    del twin
    gc.collect()
    wait_until(lambda: handle not in current_table().live_handles())


# Fork hooks in files of other layers, not yet guarded: each must leave this
# list once it is (the test below fails on a listed file that is guarded).
UNGUARDED_ELSEWHERE: set[str] = set()


def _unguarded_fork_hooks(tree: ast.AST) -> int:
    """How many ``os.register_at_fork(...)`` calls in ``tree`` are not inside
    an ``if hasattr(os, "register_at_fork"):``."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "register_at_fork" in ast.unparse(node.test):
            guarded.update(id(inner) for part in node.body for inner in ast.walk(part))
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) == "os.register_at_fork"
        and id(node) not in guarded
    )


def test_fork_hooks_are_guarded_for_platforms_without_them() -> None:
    """Windows has no ``os.register_at_fork``: every module registering a hook
    checks for it first, so that ``import tf_accum`` works there."""
    package = Path(tfa.__file__).parent
    unguarded = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if _unguarded_fork_hooks(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert unguarded == UNGUARDED_ELSEWHERE
