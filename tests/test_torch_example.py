"""``python -m tf_accum.examples.torch_ray``: a PyTorch model trained by worker
processes through one accumulator on a local Ray cluster."""

from __future__ import annotations

import importlib.util
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_main_job_processes import finish

ROOT = Path(__file__).resolve().parent.parent
JOB_WAIT = 300.0  # seconds; generous (each worker imports PyTorch), reached only when broken

pytest.importorskip("torch", reason="PyTorch is not installed (the frameworks extra)")
# Looked up, not imported: Ray reads its token settings once, when imported, and the
# distributed tests' cluster sets them later in the same session.
if importlib.util.find_spec("ray") is None:
    pytest.skip("Ray is not installed (the ray extra)", allow_module_level=True)


def test_workers_train_a_pytorch_model_through_one_accumulator(tmp_path) -> None:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TF_ACCUM_RAY"))}
    marker = f"torch-{secrets.token_hex(8)}"
    env.update(PYTHONPATH=path, RAY_USAGE_STATS_ENABLED="0", TF_ACCUM_TEST_MARKER=marker)
    job = subprocess.Popen(
        [sys.executable, "-m", "tf_accum.examples.torch_ray", "--workers", "2", "--steps", "12",
         "--quiet"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out, err, left = finish(job, marker, JOB_WAIT)
    assert job.returncode == 0, err[-3000:]
    found = re.fullmatch(
        r"2 workers, 12 steps: loss (\S+) -> (\S+); (\d+) gradients accepted, (\d+) stale\n", out
    )
    assert found is not None, out
    first, last = float(found[1]), float(found[2])
    assert last < 0.6 * first, (first, last)
    # every worker's gradient of every step was taken in, none dropped
    assert (int(found[3]), int(found[4])) == (24, 0)
    assert err == "", err  # --quiet: Ray's own lines too
    assert not left, f"processes the example started are still running: {left}"


def test_the_taken_mean_is_the_gradient_of_all_shards() -> None:
    """In one process: the workers' flattened ``.grad`` tensors, applied to one
    accumulator, take as the gradient one backward over all their shards gives
    (equal shard sizes)."""
    import numpy as np
    import torch

    import tf_accum as tfa
    from tf_accum.examples.torch_ray import flat_parameters, load_flat, make_model, make_shard

    model = make_model(0)
    flat = flat_parameters(model)
    acc = tfa.compat.v1.ConditionalAccumulator(tfa.float32, shape=[flat.size])
    for worker in range(2):
        load_flat(model, flat)
        model.zero_grad()
        inputs, targets = make_shard(0, worker, 16)
        torch.nn.functional.mse_loss(model(inputs), targets).backward()
        acc.apply_grad(torch.cat([p.grad.reshape(-1) for p in model.parameters()]), local_step=0)
    mean = acc.take_grad(2)
    assert mean.dtype == np.float32 and mean.shape == flat.shape
    model.zero_grad()
    both = [make_shard(0, w, 16) for w in range(2)]
    inputs = torch.cat([b[0] for b in both])
    targets = torch.cat([b[1] for b in both])
    torch.nn.functional.mse_loss(model(inputs), targets).backward()
    whole = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy()
    np.testing.assert_allclose(mean, whole, rtol=1e-5, atol=1e-7)
