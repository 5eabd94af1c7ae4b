"""Backends: what the suite runs against. Both take the same case statements.

A backend's ``open()`` returns a session for one case with: ``call(call, env)``
-> (value to bind, result to record); ``prepare(call, env)`` -> a function to
run in a background thread; ``settle(task)`` (wait until a background take is
queued); ``probe_seconds``; ``close()`` (close the session / destroy
everything the case made); ``finish()``.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

BACKENDS = ("tf_accum", "tf_accum-graph", "tensorflow", "tf_accum-ray")


def tensorflow_available() -> bool:
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return False
    return True


def selected_backends(option: str | None = None) -> list[str]:
    """Backends chosen by ``--backend`` or ``TF_ACCUM_BACKEND`` (default: all available)."""
    chosen = option or os.environ.get("TF_ACCUM_BACKEND", "")
    if chosen:
        names = [n.strip() for n in chosen.split(",") if n.strip()]
        unknown = set(names) - set(BACKENDS)
        if unknown:
            raise ValueError(f"unknown backend(s) {sorted(unknown)}; choose from {BACKENDS}")
        return names
    return [n for n in BACKENDS if _installed(n)]


def _installed(backend: str) -> bool:
    if backend == "tensorflow":
        return tensorflow_available()
    if backend == "tf_accum-ray":
        return importlib.util.find_spec("ray") is not None
    return True


def make_backend(name: str) -> Any:
    if name == "tf_accum":
        from conformance.backends.tf_accum_backend import TfAccumBackend

        return TfAccumBackend()
    if name == "tf_accum-graph":
        from conformance.backends.tf_accum_graph_backend import TfAccumGraphBackend

        return TfAccumGraphBackend()
    if name == "tensorflow":
        from conformance.backends.tensorflow_backend import TensorFlowBackend

        return TensorFlowBackend()
    if name == "tf_accum-ray":
        from conformance.backends.tf_accum_ray_backend import TfAccumRayBackend

        return TfAccumRayBackend()
    raise ValueError(f"unknown backend {name!r}")
