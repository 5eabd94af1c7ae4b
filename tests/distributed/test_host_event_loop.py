"""The host actor's event loop serves every accumulator of a container: nothing
slow may run on it. Here the host class runs in this process, on an asyncio
loop of the test's own (the loop is the same one Ray would give it)."""

from __future__ import annotations

import asyncio
import threading
from unittest import mock

import numpy as np

import tf_accum as tfa
from tests.helpers import WAIT
from tf_accum.accumulators import half_kernel, sparse_kernel
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.distributed.actor import AccumulatorHost


def test_the_first_large_narrow_apply_compiles_off_the_event_loop() -> None:
    compiling, finish = threading.Event(), threading.Event()

    def slow_compile() -> half_kernel.Kernels:
        compiling.set()
        assert finish.wait(WAIT)
        raise RuntimeError("no compiler")  # then the numpy path does the sum

    size = half_kernel.MIN_ELEMENTS
    spec = AccumulatorSpec("dense", tfa.float16, (size,), "MEAN")

    async def scenario() -> None:
        host = AccumulatorHost("test")
        instance, entry = await host.run(("create", "narrow", "", spec, "caller", None))
        gradient = np.ones(size, np.float16)
        apply = asyncio.ensure_future(host.run(("apply_dense", instance, entry, 0, gradient)))
        try:
            assert await asyncio.to_thread(compiling.wait, WAIT)
            # the loop answers other calls while the loops compile
            count = await asyncio.wait_for(
                host.run(("num_accumulated", instance, entry)), timeout=WAIT
            )
            assert count == 0
            assert not apply.done()
        finally:
            finish.set()
        assert await asyncio.wait_for(apply, timeout=WAIT) is None
        assert await host.run(("num_accumulated", instance, entry)) == 1
        taken = await host.run(("take", instance, entry, 1, 0.0, "a", "caller", None))
        assert taken.dtype == np.float16 and bool((taken == 1).all())

    with (
        mock.patch.object(half_kernel.LOADER, "tried", False),
        mock.patch.object(half_kernel.LOADER, "kernels", None),
        mock.patch.object(half_kernel, "_compile", slow_compile),
    ):
        asyncio.run(scenario())


def test_the_first_large_sparse_apply_compiles_off_the_event_loop() -> None:
    compiling, finish = threading.Event(), threading.Event()

    def slow_compile() -> sparse_kernel.Kernels:
        compiling.set()
        assert finish.wait(WAIT)
        raise RuntimeError("no compiler")  # then numpy adds the rows

    shape = (4, sparse_kernel.MIN_ELEMENTS // 4)
    spec = AccumulatorSpec("sparse", tfa.float32, shape, "MEAN")

    async def scenario() -> None:
        host = AccumulatorHost("test")
        instance, entry = await host.run(("create", "rows", "", spec, "caller", None))
        values = np.ones(shape, np.float32)
        apply = asyncio.ensure_future(
            host.run(("apply_sparse", instance, entry, 0, np.arange(4), values, None))
        )
        try:
            assert await asyncio.to_thread(compiling.wait, WAIT)
            # the loop answers other calls while the loops compile
            count = await asyncio.wait_for(
                host.run(("num_accumulated", instance, entry)), timeout=WAIT
            )
            assert count == 0
            assert not apply.done()
        finally:
            finish.set()
        assert await asyncio.wait_for(apply, timeout=WAIT) is None
        assert await host.run(("num_accumulated", instance, entry)) == 1

    with (
        mock.patch.object(sparse_kernel.LOADER, "tried", False),
        mock.patch.object(sparse_kernel.LOADER, "kernels", None),
        mock.patch.object(sparse_kernel, "_compile", slow_compile),
    ):
        asyncio.run(scenario())
