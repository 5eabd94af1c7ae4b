"""``tensorflow-xfails.txt``: where TensorFlow is expected to fail a case.

Format: groups of case ids, one a line, each group under comment lines that
give the reason (the departure of docs/departures.md). A line ``crash: ID`` marks a
case that kills TensorFlow's process: it is never run in-process against
TensorFlow. A trailing ``*`` matches a prefix (``R-sparse-*``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

XFAILS_FILE = Path(__file__).parent / "tensorflow-xfails.txt"


@dataclass
class Xfails:
    reasons: dict[str, str] = field(default_factory=dict)  # pattern -> reason
    crashes: set[str] = field(default_factory=set)  # patterns

    def _match(self, pattern: str, case_id: str) -> bool:
        return case_id.startswith(pattern[:-1]) if pattern.endswith("*") else case_id == pattern

    def reason(self, case_id: str) -> str | None:
        for pattern, reason in self.reasons.items():
            if self._match(pattern, case_id):
                return reason
        return None

    def crashes_tensorflow(self, case_id: str) -> bool:
        return any(self._match(p, case_id) for p in self.crashes)

    def unmatched(self, case_ids: list[str]) -> list[str]:
        """Entries that match no case (a stale list is an error)."""
        return [p for p in self.reasons if not any(self._match(p, c) for c in case_ids)]


def load_xfails(path: Path = XFAILS_FILE) -> Xfails:
    xfails = Xfails()
    reason: list[str] = []
    in_comments = False
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line:
            in_comments = False  # a blank line ends a comment block
            continue
        if line.startswith("#"):
            if not in_comments:
                reason = []  # a new block: the reason of the ids below it
            reason.append(line.lstrip("# ").rstrip())
            in_comments = True
            continue
        in_comments = False
        crash = line.startswith("crash:")
        pattern = line.split(":", 1)[1].strip() if crash else line
        if pattern in xfails.reasons:
            raise ValueError(f"{path.name}: {pattern} is listed twice")
        xfails.reasons[pattern] = " ".join(reason)
        if crash:
            xfails.crashes.add(pattern)
    return xfails
