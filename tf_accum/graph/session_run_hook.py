"""``tf.train.SessionRunHook`` and the records passed to it.

A hook is told about a monitored session's life: ``begin`` before the graph
is finalized, ``after_create_session`` once the session exists,
``before_run`` / ``after_run`` around each ``run`` (where it may add fetches
and feeds, and ask the loop to stop), and ``end`` when the session closes
normally.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class SessionRunHook:
    """Base class of hooks: every method does nothing until overridden."""

    def begin(self) -> None:
        """Called once before the session is made; the graph may still grow."""

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Called once the session exists and its initialisation has run."""

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Called before each ``run``; what it returns is fetched and fed too."""
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Called after each ``run`` with the results of what ``before_run`` asked for."""

    def end(self, session: Any) -> None:
        """Called when the session ends without an error."""


class SessionRunArgs(NamedTuple):
    """What a hook adds to a ``run``: fetches, feeds and run options."""

    fetches: Any
    feed_dict: Any = None
    options: Any = None


class SessionRunValues(NamedTuple):
    """What a ``run`` gave for a hook's ``SessionRunArgs``."""

    results: Any
    options: Any
    run_metadata: Any


class SessionRunContext:
    """The ``run`` a hook is called around, and its way to stop the loop."""

    def __init__(self, original_args: SessionRunArgs, session: Any) -> None:
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self) -> SessionRunArgs:
        """The fetches and feeds the caller of ``run`` gave."""
        return self._original_args

    @property
    def session(self) -> Any:
        """The session the ``run`` goes to (without hooks)."""
        return self._session

    @property
    def stop_requested(self) -> bool:
        """Whether a hook has asked the loop to stop."""
        return self._stop_requested

    def request_stop(self) -> None:
        """Ask the loop to stop: the session's ``should_stop()`` becomes True after this run."""
        self._stop_requested = True
