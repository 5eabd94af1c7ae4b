"""``tf.compat.v1.flags`` (also ``tf.compat.v1.app.flags``): absl's flags, as
TensorFlow 1 programs use them.

Everything of ``absl.flags`` is here, and the flags are absl's own
(``FLAGS`` holds the same values as ``absl.flags.FLAGS``). Two things differ,
as in TensorFlow: ``FLAGS`` parses ``sys.argv`` the first time a flag's value
is read before anything parsed it (absl alone raises
``UnparsedFlagAccessError``), and ``DEFINE_string``, ``DEFINE_boolean``
(``DEFINE_bool``), ``DEFINE_float`` and ``DEFINE_integer`` also accept
TensorFlow 1's argument names ``flag_name``, ``default_value`` and
``docstring`` (with a logged warning).

Needs absl-py (the ``tf1`` extra); ``import tf_accum`` does not load this.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

from absl import flags as _absl_flags
from absl.flags import *  # noqa: F403 - the module is absl.flags, with the changes above

# flags defined through the functions below belong to the module calling them
_absl_flags.disclaim_key_flags()

_log = logging.getLogger("tf_accum")

# TensorFlow 1's argument names, and absl's
_OLD_NAMES = {"flag_name": "name", "default_value": "default", "docstring": "help"}


def _accepting_old_names(define: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(define)
    def accepting(*args: Any, **kwargs: Any) -> Any:
        old = [key for key in _OLD_NAMES if key in kwargs]
        for key in old:
            kwargs[_OLD_NAMES[key]] = kwargs.pop(key)
        if old:
            _log.warning(
                "Flag argument names %s are TensorFlow 1's; absl's are (name, default, help)",
                ", ".join(old),
            )
        return define(*args, **kwargs)

    return accepting


DEFINE_string = _accepting_old_names(_absl_flags.DEFINE_string)
DEFINE_boolean = _accepting_old_names(_absl_flags.DEFINE_boolean)
DEFINE_bool = DEFINE_boolean
DEFINE_float = _accepting_old_names(_absl_flags.DEFINE_float)
DEFINE_integer = _accepting_old_names(_absl_flags.DEFINE_integer)


class ParsedOnFirstRead:
    """absl's flag values, parsed from ``sys.argv`` when a flag is first read
    unparsed. Everything else goes to the wrapped ``FlagValues`` as it is."""

    def __init__(self, wrapped: _absl_flags.FlagValues) -> None:
        object.__setattr__(self, "_wrapped", wrapped)

    def __getattr__(self, name: str) -> Any:
        wrapped: _absl_flags.FlagValues = object.__getattribute__(self, "_wrapped")
        if name in wrapped and not wrapped.is_parsed():
            # unknown or malformed flags on the command line raise absl's errors here
            wrapped(sys.argv)
        return getattr(wrapped, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._wrapped, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._wrapped, name)

    def __getitem__(self, name: str) -> Any:
        return self._wrapped[name]

    def __setitem__(self, name: str, flag: Any) -> None:
        self._wrapped[name] = flag

    def __contains__(self, name: object) -> bool:
        return name in self._wrapped

    def __iter__(self) -> Iterator[str]:
        return iter(self._wrapped)

    def __len__(self) -> int:
        return len(self._wrapped)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped(*args, **kwargs)

    def __dir__(self) -> list[str]:
        return dir(self._wrapped)

    def __str__(self) -> str:
        return str(self._wrapped)


FLAGS = ParsedOnFirstRead(_absl_flags.FLAGS)  # type: ignore[assignment]  # absl.flags.FLAGS, wrapped
