"""Backends: what the suite runs against. Both take the same case statements.

A backend's ``open()`` returns a session for one case with: ``call(call, env)``
-> (value to bind, result to record); ``prepare(call, env)`` -> a function to
run in a background thread; ``settle(task)`` (wait until a background take is
queued); ``probe_seconds``; ``close()`` (close the session / destroy
everything the case made); ``finish()``.

Besides the four built-in backends, any runtime that exposes TensorFlow's raw
ops by name is a backend, named ``module:attribute`` or registered under an
entry point (conformance/backends/plugin.py says what it must provide).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from conformance.backends.plugin import PluginBackend, is_plugin

BACKENDS = ("tf_accum", "tf_accum-graph", "tensorflow", "tf_accum-ray")


def tensorflow_available() -> bool:
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return False
    return True


def selected_backends(option: str | None = None) -> list[str]:
    """Backends chosen by ``--backend`` or ``TF_ACCUM_BACKEND`` (default: all available).

    A name with a colon, or one registered under the entry-point group
    ``tf_accum.conformance_backends``, is a plug-in runtime."""
    chosen = option or os.environ.get("TF_ACCUM_BACKEND", "")
    if chosen:
        names = [n.strip() for n in chosen.split(",") if n.strip()]
        unknown = {n for n in names if n not in BACKENDS and not is_plugin(n)}
        if unknown:
            raise ValueError(
                f"unknown backend(s) {sorted(unknown)}; choose from {BACKENDS}, "
                "or name a runtime as module:attribute"
            )
        return names
    return [n for n in BACKENDS if _installed(n)]


def _installed(backend: str) -> bool:
    if backend == "tensorflow":
        return tensorflow_available()
    if backend == "tf_accum-ray":
        return importlib.util.find_spec("ray") is not None
    return True


def plugins(names: list[str]) -> list[str]:
    """The plug-in runtimes among selected backend names."""
    return [n for n in names if n not in BACKENDS]


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
    if is_plugin(name):
        return PluginBackend(name)
    raise ValueError(f"unknown backend {name!r}")
