"""``python -m conformance``: a compatibility report, per area and backend.

python -m conformance              # tf_accum live, TensorFlow from the golden file
python -m conformance --live       # TensorFlow live as well (needs the oracle extra)
python -m conformance --backend mypackage.accumulators:runtime   # another runtime instead of tf_accum

For another runtime (conformance/backends/plugin.py says what it must
provide), every case it fails is listed with the call, what was wrong, and
TensorFlow's recorded outcome for the same call; cases that need the compat
classes count as not applicable when the runtime has none.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import defaultdict
from typing import Any

from conformance.backends import BACKENDS, make_backend
from conformance.case_format import Case, load_cases
from conformance.outcomes import meets
from conformance.record import load_golden, record_in_subprocess
from conformance.runner import run_case, runtime_failures
from conformance.xfails import load_xfails


def _tensorflow_passes(case: Case, entry: dict[str, Any]) -> bool | None:
    if "crash" in entry:
        return None
    for statement, record in zip(case.statements, entry["records"], strict=True):
        if statement.expect is None and not case.require_success:
            continue
        if meets(record, statement.expect):
            return False
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", action="store_true", help="run TensorFlow live")
    parser.add_argument(
        "--backend",
        default="tf_accum",
        help="what to test: tf_accum (default), tf_accum-graph, tf_accum-ray, or another "
        "runtime named module:attribute (or by its tf_accum.conformance_backends entry point)",
    )
    args = parser.parse_args(argv)
    logging.getLogger("tf_accum").setLevel(logging.ERROR)  # cases lower steps on purpose
    cases = load_cases()
    xfails = load_xfails()
    try:
        backend = make_backend(args.backend)
    except ValueError as error:
        parser.error(str(error))
    plugin = args.backend not in BACKENDS
    source = load_golden()
    start = time.perf_counter()
    failures: dict[str, list[str]] = {}
    for case in cases:
        if plugin and not backend.supports(case):
            continue
        if case.graph_only and args.backend != "tf_accum-graph":
            continue  # the ref ops exist in graph mode only
        run = run_case(case, backend)
        if plugin:
            failures[case.id] = runtime_failures(run, source["cases"][case.id], xfails)
        else:
            failures[case.id] = run.failures
    ours = {case_id: not found for case_id, found in failures.items()}
    ours_seconds = time.perf_counter() - start
    start = time.perf_counter()
    if args.live:
        source = record_in_subprocess("tensorflow")
    theirs_seconds = time.perf_counter() - start
    areas: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        areas[case.area].append(case)

    label = "TensorFlow (live)" if args.live else "TensorFlow (golden)"
    name = args.backend if len(args.backend) <= 20 else "runtime"
    if plugin:
        print(f"runtime: {args.backend}")
    width = max(9, len(name))
    print(f"{'area':10} {'cases':>5}  {name:>{width}}  {label:>20}  departures  crashes TF  n/a")
    totals = [0, 0, 0, 0, 0, 0]
    for area, members in sorted(areas.items()):
        passed_ours = sum(ours.get(c.id, False) for c in members)
        skipped = sum(c.id not in ours for c in members)
        outcome = [_tensorflow_passes(c, source["cases"][c.id]) for c in members]
        passed_theirs = sum(1 for o in outcome if o)
        departures = sum(
            1 for c in members if xfails.reason(c.id) and not xfails.crashes_tensorflow(c.id)
        )
        crashes = sum(1 for o in outcome if o is None)
        row = [len(members), passed_ours, passed_theirs, departures, crashes, skipped]
        for i, n in enumerate(row):
            totals[i] += n
        print(
            f"{area:10} {row[0]:5}  {row[1]:{width}}  {row[2]:20}  {row[3]:10}  {row[4]:10}  {row[5]:3}"
        )
    print(
        f"{'all':10} {totals[0]:5}  {totals[1]:{width}}  {totals[2]:20}  {totals[3]:10}  {totals[4]:10}  {totals[5]:3}"
    )
    if totals[5]:
        print(
            "\nn/a: cases that need graph mode (the ref ops), or the compat classes, which "
            "the runtime does not provide. "
            "A departing call passes when it meets the case or behaves as TensorFlow's did."
        )
    print(f"\n{name} ran in {ours_seconds:.1f} s; TensorFlow "
          f"{'ran' if args.live else 'was read from golden/'} in {theirs_seconds:.1f} s")  # fmt: skip

    print("\nDepartures (TensorFlow's expected failures, tensorflow-xfails.txt):")
    by_reason: dict[str, list[str]] = defaultdict(list)
    for case in cases:
        reason = xfails.reason(case.id)
        if reason:
            by_reason[reason].append(case.id)
    for reason, ids in by_reason.items():
        print(f"- {', '.join(ids)}: {reason}")
    unexpected = [case_id for case_id, passed in ours.items() if not passed]
    if unexpected:
        print(f"\n{name} FAILS: {', '.join(unexpected)}")
        if plugin:
            for case_id in unexpected:
                print(f"\n{case_id}:")
                for failure in failures[case_id]:
                    print(f"  {failure}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
