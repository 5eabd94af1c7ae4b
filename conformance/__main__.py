"""``python -m conformance``: a compatibility report, per area and backend.

python -m conformance              # tf_accum live, TensorFlow from the golden file
python -m conformance --live       # TensorFlow live as well (needs the oracle extra)
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import defaultdict
from typing import Any

from conformance.backends import make_backend
from conformance.case_format import Case, load_cases
from conformance.outcomes import meets
from conformance.record import load_golden, record_in_subprocess
from conformance.runner import run_case
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
    args = parser.parse_args(argv)
    logging.getLogger("tf_accum").setLevel(logging.ERROR)  # cases lower steps on purpose
    cases = load_cases()
    xfails = load_xfails()
    start = time.perf_counter()
    ours = {c.id: run_case(c, make_backend("tf_accum")).passed for c in cases}
    ours_seconds = time.perf_counter() - start
    start = time.perf_counter()
    source = record_in_subprocess("tensorflow") if args.live else load_golden()
    theirs_seconds = time.perf_counter() - start
    areas: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        areas[case.area].append(case)

    label = "TensorFlow (live)" if args.live else "TensorFlow (golden)"
    print(f"{'area':10} {'cases':>5}  {'tf_accum':>9}  {label:>20}  departures  crashes TF")
    totals = [0, 0, 0, 0, 0]
    for area, members in sorted(areas.items()):
        passed_ours = sum(ours[c.id] for c in members)
        outcome = [_tensorflow_passes(c, source["cases"][c.id]) for c in members]
        passed_theirs = sum(1 for o in outcome if o)
        departures = sum(
            1 for c in members if xfails.reason(c.id) and not xfails.crashes_tensorflow(c.id)
        )
        crashes = sum(1 for o in outcome if o is None)
        for i, n in enumerate([len(members), passed_ours, passed_theirs, departures, crashes]):
            totals[i] += n
        print(
            f"{area:10} {len(members):5}  {passed_ours:9}  {passed_theirs:20}  {departures:10}  {crashes:10}"
        )
    print(
        f"{'all':10} {totals[0]:5}  {totals[1]:9}  {totals[2]:20}  {totals[3]:10}  {totals[4]:10}"
    )
    print(f"\ntf_accum ran in {ours_seconds:.1f} s; TensorFlow "
          f"{'ran' if args.live else 'was read from golden/'} in {theirs_seconds:.1f} s")  # fmt: skip

    print("\nDepartures (TensorFlow's expected failures, tensorflow-xfails.txt):")
    by_reason: dict[str, list[str]] = defaultdict(list)
    for case in cases:
        reason = xfails.reason(case.id)
        if reason:
            by_reason[reason].append(case.id)
    for reason, ids in by_reason.items():
        print(f"- {', '.join(ids)}: {reason}")
    unexpected = [c.id for c in cases if not ours[c.id]]
    if unexpected:
        print(f"\ntf_accum FAILS: {', '.join(unexpected)}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
