"""``tf.compat.v1.logging``: TensorFlow 1's logging functions, on Python's ``logging``.

Messages go to the logger ``tf_accum.program`` (:data:`LOGGER_NAME`), a
child of the package's own ``tf_accum`` logger (:data:`PACKAGE_LOGGER_NAME`),
where tf_accum's own lines go (SyncReplicasOptimizer's dropped stale
gradients, waits, ...). TensorFlow has one logger for both a program's
``tf.logging`` lines and its own, so ``set_verbosity`` sets the level of both
of ours: one call shows or hides the program's lines and the library's alike.
Configuring ``logging`` as usual (handlers, levels) applies to them.
As TensorFlow does for its ``tensorflow`` logger, the first use gives the
package logger a handler writing ``LEVEL:logger:message`` lines to stderr when
no handler is there yet (on either logger or the root logger), so that a
program that only calls ``tf.logging.set_verbosity(tf.logging.INFO)`` sees
its INFO lines and tf_accum's; a program that configures ``logging`` itself
first gets no extra handler. The root logger is never changed.
"""

from __future__ import annotations

import logging as _logging
import sys
import threading
from typing import Any

LOGGER_NAME = "tf_accum.program"
PACKAGE_LOGGER_NAME = "tf_accum"

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARN = _logging.WARN
ERROR = _logging.ERROR
FATAL = _logging.FATAL

_lock = threading.Lock()
_logger: _logging.Logger | None = None
# how often each call site of log_every_n / log_first_n has been reached
_counts: dict[tuple[str, str, int], int] = {}


def get_logger() -> _logging.Logger:
    """The logger ``tf.logging`` writes to (given a stderr handler at first use,
    see the module's docstring)."""
    global _logger
    if _logger is not None:
        return _logger
    with _lock:
        if _logger is None:
            logger = _logging.getLogger(LOGGER_NAME)
            package = _logging.getLogger(PACKAGE_LOGGER_NAME)
            if not (logger.handlers or package.handlers or _logging.getLogger().handlers):
                handler = _logging.StreamHandler(sys.stderr)
                handler.setFormatter(_logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
                package.addHandler(handler)
            _logger = logger
    return _logger


def log(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    """Log ``msg % args`` at ``level``."""
    get_logger().log(level, msg, *args, **kwargs)


def debug(msg: Any, *args: Any, **kwargs: Any) -> None:
    get_logger().debug(msg, *args, **kwargs)


def info(msg: Any, *args: Any, **kwargs: Any) -> None:
    get_logger().info(msg, *args, **kwargs)


def warning(msg: Any, *args: Any, **kwargs: Any) -> None:
    get_logger().warning(msg, *args, **kwargs)


warn = warning


def error(msg: Any, *args: Any, **kwargs: Any) -> None:
    get_logger().error(msg, *args, **kwargs)


def fatal(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Log at FATAL (CRITICAL); as in TensorFlow, the program goes on."""
    get_logger().critical(msg, *args, **kwargs)


def vlog(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    """Log at ``level`` (a number, as ``log``)."""
    get_logger().log(level, msg, *args, **kwargs)


def log_if(level: int, msg: Any, condition: Any, *args: Any) -> None:
    """Log ``msg % args`` at ``level`` when ``condition`` is true."""
    if condition:
        get_logger().log(level, msg, *args)


def _next_count(function: str) -> int:
    """How often ``function`` was called before from the line calling it (0 the first time)."""
    frame = sys._getframe(2)
    site = (function, frame.f_code.co_filename, frame.f_lineno)
    with _lock:
        count = _counts.get(site, 0)
        _counts[site] = count + 1
    return count


def log_every_n(level: int, msg: Any, n: int, *args: Any) -> None:
    """Log at the 1st, (n+1)-th, (2n+1)-th ... call from the same line
    (docs/departures.md T27)."""
    log_if(level, msg, _next_count("every") % max(int(n), 1) == 0, *args)


def log_first_n(level: int, msg: Any, n: int, *args: Any) -> None:
    """Log at the first ``n`` calls from the same line (docs/departures.md T27)."""
    log_if(level, msg, _next_count("first") < n, *args)


def get_verbosity() -> int:
    """The level below which messages are dropped (the logger's effective level)."""
    return get_logger().getEffectiveLevel()


def set_verbosity(v: int) -> None:
    """Drop messages below level ``v`` (DEBUG, INFO, WARN, ERROR, FATAL or a number),
    the program's ``tf.logging`` lines and tf_accum's own alike."""
    logger = get_logger()
    _logging.getLogger(PACKAGE_LOGGER_NAME).setLevel(v)
    logger.setLevel(v)


def flush() -> None:
    """Flush the handlers of the program's logger and of the package's."""
    for handler in (*get_logger().handlers, *_logging.getLogger(PACKAGE_LOGGER_NAME).handlers):
        handler.flush()


def TaskLevelStatusMessage(msg: Any) -> None:  # noqa: N802 - TensorFlow's name
    """Log ``msg`` at ERROR, as TensorFlow does."""
    get_logger().error(msg)


__all__ = [
    "DEBUG",
    "INFO",
    "WARN",
    "ERROR",
    "FATAL",
    "TaskLevelStatusMessage",
    "debug",
    "error",
    "fatal",
    "flush",
    "get_verbosity",
    "info",
    "log",
    "log_every_n",
    "log_first_n",
    "log_if",
    "set_verbosity",
    "vlog",
    "warn",
    "warning",
]
