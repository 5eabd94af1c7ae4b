"""Run every case against one backend and write what happened, as JSON.

    python -m conformance.record                       # TensorFlow -> golden/tensorflow.json
    python -m conformance.record --output out.json     # elsewhere (the live check uses this)

Cases marked ``crash:`` in tensorflow-xfails.txt are not run against
TensorFlow; they are recorded as ``{"crash": true}``. The case being run is
printed to standard error first, so that a crash names its case.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from conformance.case_format import load_cases
from conformance.runner import run_case
from conformance.xfails import load_xfails

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN_FILE = GOLDEN_DIR / "tensorflow.json"
ROOT = Path(__file__).resolve().parent.parent


def record_backend(name: str, ids: set[str] | None = None) -> dict[str, Any]:
    """Every case's records on backend ``name`` (only the cases ``ids`` names, if given)."""
    from conformance.backends import make_backend

    backend = make_backend(name)
    xfails = load_xfails()
    cases: dict[str, Any] = {}
    for case in load_cases():
        if ids is not None and case.id not in ids:
            continue
        if name == "tensorflow" and xfails.crashes_tensorflow(case.id):
            cases[case.id] = {"crash": True}
            continue
        print(f"case {case.id}", file=sys.stderr, flush=True)
        run = run_case(case, backend)
        cases[case.id] = {"records": run.records}
    result: dict[str, Any] = {"backend": name, "cases": cases}
    if name == "tensorflow":
        import tensorflow as tf

        result["tensorflow_version"] = tf.__version__
    return result


def write(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


def load_golden() -> dict[str, Any]:
    return json.loads(GOLDEN_FILE.read_text())  # type: ignore[no-any-return]


def record_in_subprocess(name: str, timeout: float = 1200, attempts: int = 2) -> dict[str, Any]:
    """Record ``name`` in a child process, so that a crash cannot take this one down.

    A child that dies is run again, up to ``attempts`` times in all: TensorFlow
    occasionally aborts while a session closes on a destroyed accumulator that
    a take still waits on (D29b: seen in about one run in four), which is
    TensorFlow's flakiness, not a finding about the cases.

    Raises:
        RuntimeError: every attempt died; the message names the case it was running.
    """
    failure = ""
    for _ in range(attempts):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "records.json"
            argv, env = record_command(name, out)
            done = subprocess.run(
                argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
            )
            if done.returncode == 0 and out.exists():
                return json.loads(out.read_text())  # type: ignore[no-any-return]
            failure = recording_failure(name, done)
    raise RuntimeError(failure)


def record_command(name: str, output: Path) -> tuple[list[str], dict[str, str]]:
    """The command (and its environment) that records ``name`` into ``output``, run in ROOT."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    return [
        sys.executable,
        "-m",
        "conformance.record",
        "--backend",
        name,
        "--output",
        str(output),
    ], env


def recording_failure(name: str, done: subprocess.CompletedProcess[str]) -> str:
    """What a recording that died says: its exit code and the case it was running."""
    started = [line for line in done.stderr.splitlines() if line.startswith("case ")]
    last = started[-1][5:] if started else "(before the first case)"
    return (
        f"recording {name} died with exit code {done.returncode} while running case "
        f"{last}; mark the case 'crash:' in tensorflow-xfails.txt if TensorFlow "
        f"crashes on it every time.\n{done.stderr[-3000:]}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="tensorflow", choices=["tensorflow", "tf_accum"])
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    output = args.output or (GOLDEN_FILE if args.backend == "tensorflow" else None)
    if output is None:
        parser.error("--output is needed for the tf_accum backend")
    write(record_backend(args.backend), output)
    print(f"wrote {output}", file=sys.stderr)


if __name__ == "__main__":
    main()
