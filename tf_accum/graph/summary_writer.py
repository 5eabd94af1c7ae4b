"""``tf.summary.FileWriter``: summaries written to TensorBoard event files.

The files are TensorFlow's: records of ``Event`` messages (TensorBoard's
own message classes and record writer, from the ``tensorboard`` package in
the ``tf1`` extra), named ``events.out.tfevents.*`` in the log directory.
The first event after the file's version is written at once; the next ones
wait in memory and are written when ``max_queue`` of them are waiting, at the
first event ``flush_secs`` after the last write, and at ``flush()`` and
``close()``; no thread is started, so nothing holds up the program's exit.
Without ``tensorboard`` installed, a FileWriter logs one warning and writes
nothing; everything else works.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import socket
import threading
import time
from types import TracebackType
from typing import Any

from tf_accum.graph import mode
from tf_accum.graph.graph import Graph

_log = logging.getLogger(__name__)
_warned = threading.Event()
_warn_lock = threading.Lock()
_file_numbers = itertools.count()
FILE_VERSION = "brain.Event:2"


def _tensorboard() -> tuple[Any, Any] | None:
    """TensorBoard's Event class and record writer, or None if ``tensorboard`` is missing.

    Only these two modules: TensorBoard's other writers import TensorFlow when it is installed.
    """
    try:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter
    except ImportError:
        return None
    return event_pb2.Event, RecordWriter


def _warn_once() -> None:
    with _warn_lock:
        if _warned.is_set():
            return
        _warned.set()
    _log.warning(
        "tensorboard is not installed: tf.summary.FileWriter writes no event files "
        "(pip install 'tf-accum[tf1]')"
    )


class _EventFile:
    """One event file: events wait in a list and are written as records."""

    def __init__(
        self,
        logdir: str,
        max_queue: int,
        flush_secs: float,
        suffix: str,
        event_class: Any,
        record_writer: Any,
    ) -> None:
        os.makedirs(logdir, exist_ok=True)
        name = (
            f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
            f"{os.getpid()}.{next(_file_numbers)}{suffix}"
        )
        self.path = os.path.join(logdir, name)
        self.event_class = event_class
        self._records = record_writer(open(self.path, "wb"))  # noqa: SIM115 - closed in close()
        self._max_queue = max(1, max_queue)
        self._flush_secs = flush_secs
        self._waiting: list[bytes] = []
        self._last_write = time.monotonic()
        self.add(event_class(wall_time=time.time(), file_version=FILE_VERSION))
        self.flush()
        # the first event after the file version is written at once, as TensorFlow's
        # writer does: a Supervisor's graph reaches the file even if it is never stopped
        self._last_write = -math.inf

    def add(self, event: Any) -> None:
        self._waiting.append(event.SerializeToString())
        due = time.monotonic() - self._last_write >= self._flush_secs
        if len(self._waiting) >= self._max_queue or due:
            self.flush()

    def flush(self) -> None:
        for record in self._waiting:
            self._records.write(record)
        self._waiting.clear()
        self._records.flush()
        self._last_write = time.monotonic()

    def close(self) -> None:
        self.flush()
        self._records.close()


def _bytes_of(message: Any) -> bytes:
    """A serialized message: bytes as they are (a summary op's value), or a message's."""
    if isinstance(message, (bytes, bytearray)):
        return bytes(message)
    item = getattr(message, "item", None)  # a 0-d array of bytes
    if callable(item) and getattr(message, "shape", None) == ():
        return bytes(item())
    serialized: bytes = message.SerializeToString()
    return serialized


class FileWriter:
    """Writes summaries (and the graph) to an event file in ``logdir``.

    Args:
        logdir: the directory (made if missing).
        graph: a Graph to write first, as ``add_graph`` would.
        max_queue: how many events wait in memory before a write.
        flush_secs: how often the waiting events are written.
        filename_suffix: added to the event file's name.
        graph_def, session: accepted.

    Raises:
        RuntimeError: in eager mode, as in TensorFlow.
    """

    def __init__(
        self,
        logdir: Any,
        graph: Graph | None = None,
        max_queue: int = 10,
        flush_secs: float = 120,
        graph_def: Any = None,
        filename_suffix: str | None = None,
        session: Any = None,
    ) -> None:
        if mode.building_graph() is None and mode.executing_eagerly():
            raise RuntimeError(
                "tf.summary.FileWriter is not compatible with eager execution. Use "
                "`tf.summary.create_file_writer`,or a `with v1.Graph().as_default():` context"
            )
        self._logdir = str(logdir)
        self._options = (int(max_queue), float(flush_secs), filename_suffix or "")
        self._lock = threading.Lock()
        self._closed = False
        self._writer = self._open()
        if graph is not None:
            self.add_graph(graph)

    def _open(self) -> _EventFile | None:
        found = _tensorboard()
        if found is None:
            _warn_once()
            return None
        return _EventFile(self._logdir, *self._options, *found)

    def get_logdir(self) -> str:
        return self._logdir

    def _write(self, fill: Any, global_step: Any = None) -> None:
        with self._lock:
            if self._writer is None or self._closed:
                return
            event = self._writer.event_class(wall_time=time.time())
            if global_step is not None:
                event.step = int(global_step)
            fill(event)
            self._writer.add(event)

    def add_summary(self, summary: Any, global_step: Any = None) -> None:
        """Write a summary: a summary op's value (bytes) or a ``Summary`` message."""
        data = _bytes_of(summary)
        self._write(lambda event: event.summary.ParseFromString(data), global_step)

    def add_event(self, event: Any) -> None:
        """Write an ``Event`` message (TensorBoard's, or any with TensorFlow's fields)."""
        data = _bytes_of(event)
        self._write(lambda written: written.ParseFromString(data))

    def add_session_log(self, session_log: Any, global_step: Any = None) -> None:
        """Write a ``SessionLog`` message (start, stop, checkpoint)."""
        data = _bytes_of(session_log)
        self._write(lambda event: event.session_log.ParseFromString(data), global_step)

    def add_graph(self, graph: Any, global_step: Any = None, graph_def: Any = None) -> None:
        """Write ``graph``'s ops (names, types, inputs, devices) for TensorBoard's graph view."""
        if graph_def is not None:
            data = _bytes_of(graph_def)
        elif graph is not None:
            from tf_accum.graph.graph_def import graph_def_bytes

            data = graph_def_bytes(graph)
        else:
            return

        def fill(event: Any) -> None:
            event.graph_def = data

        self._write(fill, global_step)

    def add_meta_graph(self, meta_graph_def: Any, global_step: Any = None) -> None:
        """Write a serialized ``MetaGraphDef`` (bytes, or a message) as it is."""
        data = _bytes_of(meta_graph_def)

        def fill(event: Any) -> None:
            event.meta_graph_def = data

        self._write(fill, global_step)

    def flush(self) -> None:
        """Write the events still waiting in memory."""
        with self._lock:
            if self._writer is not None and not self._closed:
                self._writer.flush()

    def close(self) -> None:
        """Write what is waiting and close the file; later events are dropped until ``reopen``."""
        with self._lock:
            if self._writer is not None and not self._closed:
                self._writer.close()
            self._closed = True

    @property
    def event_file(self) -> str | None:
        """The path of the event file being written (None without ``tensorboard``)."""
        return None if self._writer is None else self._writer.path

    def reopen(self) -> None:
        """After ``close``, start a new event file in the same directory."""
        with self._lock:
            if self._closed:
                self._writer = self._open()
                self._closed = False

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class FileWriterCache:
    """One FileWriter per log directory, shared by whoever asks for it."""

    _lock = threading.Lock()
    _writers: dict[str, FileWriter] = {}

    @staticmethod
    def get(logdir: Any) -> FileWriter:
        """The FileWriter of ``logdir`` (made, with the default graph, at the first call)."""
        key = str(logdir)
        with FileWriterCache._lock:
            found = FileWriterCache._writers.get(key)
            if found is None:
                found = FileWriter(key, graph=mode.get_default_graph())
                FileWriterCache._writers[key] = found
            return found

    @staticmethod
    def clear() -> None:
        """Close and forget every cached FileWriter."""
        with FileWriterCache._lock:
            writers = list(FileWriterCache._writers.values())
            FileWriterCache._writers.clear()
        for writer in writers:
            writer.close()


__all__ = ["FileWriter", "FileWriterCache"]
