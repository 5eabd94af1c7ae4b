"""A few seconds of benchmarks/soak.py: conservation, no hang, no thread left."""

from __future__ import annotations

from benchmarks.soak import run_soak


def test_a_short_soak_conserves_every_gradient() -> None:
    report = run_soak(3.0, threads_per_role=3, seed=1)
    assert report.failures == []
    assert report.conserved
    assert report.threads_left == 0
    # it really exercised everything
    assert report.applies > 100 and report.takes > 10 and report.timeouts > 0
    assert report.stale > 0 and report.refused > 0
    assert report.replaced > 0 and report.races > 0 and report.cancelled == report.races
