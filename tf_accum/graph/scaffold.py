"""``tf.train.Scaffold``: the ops a monitored session needs to make, check and save a model.

A Scaffold holds the init op, the readiness checks, the local init op, the
summary op and the saver. What the program does not give is found in the
graph's collections (``init_op``, ``ready_op``, ``ready_for_local_init_op``,
``local_init_op``, ``summary_op``, ``savers``) or made as TensorFlow makes it
when ``finalize()`` runs, which then makes the graph read-only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tf_accum.graph import mode
from tf_accum.graph.collections import (
    global_variables,
    global_variables_initializer,
    local_variables_initializer,
)
from tf_accum.graph.initialization import report_uninitialized_variables
from tf_accum.graph.ops import group

_log = logging.getLogger("tf_accum")

INIT_OP = "init_op"
READY_OP = "ready_op"
READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
LOCAL_INIT_OP = "local_init_op"
SUMMARY_OP = "summary_op"
SAVERS = "savers"


def saver_or_default() -> Any:
    """The graph's one saver (collection ``savers``), or a new one saving every
    global variable (added to that collection).

    Raises:
        RuntimeError: the collection holds more than one saver.
    """
    from tf_accum.graph.saver import Saver

    savers = mode.get_default_graph().get_collection(SAVERS)
    if savers:
        if len(savers) > 1:
            raise RuntimeError(
                f"More than one item in collection {SAVERS}. Please indicate which one to use "
                "by passing it to the constructor."
            )
        return savers[0]
    saver = Saver(sharded=True, allow_empty=True)
    mode.get_default_graph().add_to_collection(SAVERS, saver)
    return saver


class Scaffold:
    """The ops a monitored session uses to initialize, check and save the model.

    Args:
        init_op: run once by the chief when no checkpoint was restored
            (default: collection ``init_op``, else a group of
            ``global_variables_initializer()``).
        init_feed_dict: the feeds for ``init_op``.
        init_fn: called as ``init_fn(scaffold, session)`` after ``init_op``.
        ready_op: a string tensor naming what is not initialized; empty means
            ready (default: ``report_uninitialized_variables()``).
        ready_for_local_init_op: the same check before ``local_init_op`` runs
            (default: the report over the global variables).
        local_init_op: run by every session, chief or not, once the global
            variables are ready (default: a group of ``local_variables_initializer()``).
        summary_op: default: collection ``summary_op``, else ``tf.summary.merge_all()``.
        saver: default: the graph's saver (collection ``savers``) or a new one.
        copy_from_scaffold: take every op not given from this scaffold.
        local_init_feed_dict: the feeds for ``local_init_op``.

    Raises:
        TypeError: ``copy_from_scaffold`` is not a Scaffold.
    """

    def __init__(
        self,
        init_op: Any = None,
        init_feed_dict: Any = None,
        init_fn: Callable[[Scaffold, Any], Any] | None = None,
        ready_op: Any = None,
        ready_for_local_init_op: Any = None,
        local_init_op: Any = None,
        summary_op: Any = None,
        saver: Any = None,
        copy_from_scaffold: Scaffold | None = None,
        local_init_feed_dict: Any = None,
    ) -> None:
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError("copy_from_scaffold is not a Scaffold instance.")
            source = copy_from_scaffold
            init_op = init_op if init_op is not None else source.init_op
            init_feed_dict = init_feed_dict or source.init_feed_dict
            init_fn = init_fn or source._user_init_fn
            ready_op = ready_op if ready_op is not None else source.ready_op
            if ready_for_local_init_op is None:
                ready_for_local_init_op = source.ready_for_local_init_op
            local_init_op = local_init_op if local_init_op is not None else source.local_init_op
            local_init_feed_dict = local_init_feed_dict or source.local_init_feed_dict
            summary_op = summary_op if summary_op is not None else source.summary_op
            saver = saver if saver is not None else source.saver
        self._user_init_fn: Callable[[Scaffold, Any], Any] | None = init_fn
        self._init_fn: Callable[[Any], Any] | None = None
        if init_fn is not None:
            self._init_fn = lambda session: init_fn(self, session)
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._local_init_op = local_init_op
        self._local_init_feed_dict = local_init_feed_dict
        self._summary_op = summary_op
        self._saver = saver

    @staticmethod
    def get_or_default(
        arg_name: str, collection_key: str, default_constructor: Callable[[], Any]
    ) -> Any:
        """The one item of the default graph's ``collection_key``, or what
        ``default_constructor()`` makes (then added to the collection).

        Raises:
            RuntimeError: the collection holds more than one item.
        """
        graph = mode.get_default_graph()
        found = graph.get_collection(collection_key)
        if found:
            if len(found) > 1:
                raise RuntimeError(
                    f'More than one item in the collection "{collection_key}". Please indicate '
                    f"which one to use by passing it to the tf.Scaffold constructor as:  "
                    f"tf.Scaffold({arg_name}=item to use)"
                )
            return found[0]
        made = default_constructor()
        if made is not None:
            graph.add_to_collection(collection_key, made)
        return made

    @staticmethod
    def default_local_init_op() -> Any:
        """A group of ``local_variables_initializer()`` (an op even with no local variables)."""
        return group(local_variables_initializer())

    def finalize(self) -> Scaffold:
        """Make the ops not given, then finalize the default graph. Returns the scaffold."""
        if self._init_op is None:
            self._init_op = Scaffold.get_or_default(
                "init_op", INIT_OP, lambda: group(global_variables_initializer())
            )
        if self._ready_op is None:
            self._ready_op = Scaffold.get_or_default(
                "ready_op", READY_OP, report_uninitialized_variables
            )
        if self._ready_for_local_init_op is None:
            self._ready_for_local_init_op = Scaffold.get_or_default(
                "ready_for_local_init_op",
                READY_FOR_LOCAL_INIT_OP,
                lambda: report_uninitialized_variables(global_variables()),
            )
        if self._local_init_op is None:
            self._local_init_op = Scaffold.get_or_default(
                "local_init_op", LOCAL_INIT_OP, Scaffold.default_local_init_op
            )
        if self._summary_op is None:
            from tf_accum.graph.summary_ops import merge_all

            self._summary_op = Scaffold.get_or_default("summary_op", SUMMARY_OP, merge_all)
        if self._saver is None:
            self._saver = saver_or_default()
        self._saver.build()
        mode.get_default_graph().finalize()
        _log.info("Graph was finalized.")
        return self

    @property
    def init_fn(self) -> Callable[[Any], Any] | None:
        """``init_fn`` bound to this scaffold: called with the session alone."""
        return self._init_fn

    @property
    def init_op(self) -> Any:
        return self._init_op

    @property
    def ready_op(self) -> Any:
        return self._ready_op

    @property
    def ready_for_local_init_op(self) -> Any:
        return self._ready_for_local_init_op

    @property
    def local_init_op(self) -> Any:
        return self._local_init_op

    @property
    def local_init_feed_dict(self) -> Any:
        return self._local_init_feed_dict

    @property
    def summary_op(self) -> Any:
        return self._summary_op

    @property
    def saver(self) -> Any:
        return self._saver

    @property
    def init_feed_dict(self) -> Any:
        return self._init_feed_dict


__all__ = ["Scaffold"]
