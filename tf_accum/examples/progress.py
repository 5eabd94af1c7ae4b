"""Showing a run as it goes: a tqdm bar on a terminal, plain lines elsewhere.

tqdm is optional (the ``demo`` extra) and imported only when a bar is shown.
Without a terminal (CI, a pipe) or without tqdm, the same figures are printed
as a line every tenth of the run.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, Protocol, TextIO

from tf_accum.examples.records import StepRecord


def describe(record: StepRecord) -> str:
    return (
        f"loss {record.loss:.4g}  accepted {record.accepted}  stale {record.stale}  "
        f"take waited {1000 * record.wait_s:.1f} ms"
    )


class Progress(Protocol):
    def update(self, record: StepRecord) -> None: ...

    def close(self) -> None: ...


class Silent:
    """--quiet: show nothing while running."""

    def update(self, record: StepRecord) -> None:
        pass

    def close(self) -> None:
        pass


class Lines:
    """A plain line every ``every`` steps and at the last step."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.every = max(1, total // 10)
        self.stream = stream

    def update(self, record: StepRecord) -> None:
        if record.step % self.every == 0 or record.step == self.total:
            width = len(str(self.total))
            print(f"step {record.step:{width}d}/{self.total}  {describe(record)}", file=self.stream)
            self.stream.flush()

    def close(self) -> None:
        pass


class Bar:
    """A tqdm progress bar whose postfix shows the step's figures."""

    def __init__(self, total: int, stream: TextIO) -> None:
        from tqdm import tqdm

        self.bar: Any = tqdm(total=total, desc="training", unit="step", file=stream, leave=True)

    def update(self, record: StepRecord) -> None:
        self.bar.set_postfix_str(describe(record), refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def make_progress(total: int, quiet: bool, stream: TextIO | None = None) -> Progress:
    """The display for a run of ``total`` steps, written to ``stream`` (stderr)."""
    stream = sys.stderr if stream is None else stream
    if quiet:
        return Silent()
    if stream.isatty() and importlib.util.find_spec("tqdm") is not None:
        return Bar(total, stream)
    return Lines(total, stream)
