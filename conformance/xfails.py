"""``tensorflow-xfails.txt``: where TensorFlow departs from a case's expectations.

Format: entries, one a line, in groups under comment lines that give the
reason (the departure of the README). An entry is

- ``ID:LINE``: the call on that line of case ``ID`` departs: TensorFlow's
  outcome must fail the call's expectation, and tf_accum's outcome there is
  not compared with TensorFlow's; every other call of the case still is;
- ``message: ID:LINE``: only the message departs (the outcome, error class
  included, is still compared);
- ``crash: ID``: the case kills TensorFlow's process: it is never run
  in-process against TensorFlow. A trailing ``*`` matches a prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

XFAILS_FILE = Path(__file__).parent / "tensorflow-xfails.txt"


def _match(pattern: str, case_id: str) -> bool:
    return case_id.startswith(pattern[:-1]) if pattern.endswith("*") else case_id == pattern


@dataclass
class Xfails:
    calls: dict[tuple[str, int], str] = field(default_factory=dict)  # (id, line) -> reason
    messages: dict[tuple[str, int], str] = field(default_factory=dict)
    crashes: dict[str, str] = field(default_factory=dict)  # pattern -> reason

    def reason(self, case_id: str) -> str | None:
        """Why the case departs somewhere (a call or a crash), or None."""
        for (found, _), reason in self.calls.items():
            if found == case_id:
                return reason
        return self.crash_reason(case_id)

    def call_reason(self, case_id: str, line: int) -> str | None:
        return self.calls.get((case_id, line))

    def departing_lines(self, case_id: str) -> set[int]:
        return {line for (found, line) in self.calls if found == case_id}

    def message_reason(self, case_id: str, line: int) -> str | None:
        return self.messages.get((case_id, line))

    def crash_reason(self, case_id: str) -> str | None:
        for pattern, reason in self.crashes.items():
            if _match(pattern, case_id):
                return reason
        return None

    def crashes_tensorflow(self, case_id: str) -> bool:
        return self.crash_reason(case_id) is not None

    def unmatched(self, cases: list[Any]) -> list[str]:
        """Entries that match no case or no line of it (a stale list is an error)."""
        lines = {case.id: {s.line for s in case.statements} for case in cases}
        stale = [
            f"{i}:{n}" for (i, n) in [*self.calls, *self.messages] if n not in lines.get(i, ())
        ]
        stale += [p for p in self.crashes if not any(_match(p, i) for i in lines)]
        return stale


def load_xfails(path: Path = XFAILS_FILE) -> Xfails:
    xfails = Xfails()
    reason: list[str] = []
    in_comments = False
    seen: set[str] = set()
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line:
            in_comments = False  # a blank line ends a comment block
            continue
        if line.startswith("#"):
            if not in_comments:
                reason = []  # a new block: the reason of the entries below it
            reason.append(line.lstrip("# ").rstrip())
            in_comments = True
            continue
        in_comments = False
        if line in seen:
            raise ValueError(f"{path.name}: {line} is listed twice")
        seen.add(line)
        text = " ".join(reason)
        kind, _, entry = (
            line.partition(":") if line.startswith(("crash:", "message:")) else ("", "", line)
        )
        entry = entry.strip()
        if kind == "crash":
            xfails.crashes[entry] = text
            continue
        case_id, sep, number = entry.rpartition(":")
        if not sep or not number.isdigit():
            raise ValueError(f"{path.name}: {line!r} is not ID:LINE")
        target = xfails.messages if kind == "message" else xfails.calls
        target[(case_id, int(number))] = text
    return xfails
