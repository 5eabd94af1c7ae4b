"""``tf.compat.v1.app``: ``run`` and ``flags``, on absl as in TensorFlow.

Needs absl-py (the ``tf1`` extra); ``import tf_accum`` does not load this.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from absl import app as _absl_app
from absl import flags as _absl_flags

from tf_accum.compat.v1 import flags


def _parse_known(argv: list[str]) -> list[str]:
    # as TensorFlow: flags nobody defined are left in argv for main, not refused
    remaining: list[str] = _absl_flags.FLAGS(argv, known_only=True)
    return remaining


def run(main: Callable[[list[str]], Any] | None = None, argv: list[str] | None = None) -> None:
    """Parse the command line's flags, then ``sys.exit(main(argv))`` (absl's ``app.run``).

    ``main`` defaults to the ``main`` function of the ``__main__`` module;
    ``argv`` to ``sys.argv``. ``main`` gets ``argv`` without the flags that
    were defined (unknown ones stay in it, as in TensorFlow); absl's own
    ``--help``, ``--helpfull`` and ``--flagfile`` work.
    """
    chosen = main if main is not None else sys.modules["__main__"].main
    _absl_app.run(main=chosen, argv=argv, flags_parser=_parse_known)


__all__ = ["flags", "run"]
