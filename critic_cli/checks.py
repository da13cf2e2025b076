"""Deterministic checks: run every rule's pattern over a draft, locate hits, redact."""

from collections.abc import Sequence
from typing import NamedTuple

from critic_cli.rules import Action, Rule

SEVERITY: dict[Action, int] = {"flag": 1, "revise": 2, "refuse": 3}


class Hit(NamedTuple):
    """One match of a check: where it is, never what it matched."""

    rule: str
    action: Action
    line: int
    column: int
    start: int
    end: int
    message: str | None = None

    def to_dict(self) -> dict[str, object]:
        """Return the record form: rule, action, line and column (1-based, characters)."""
        return {"rule": self.rule, "action": self.action, "line": self.line, "column": self.column}


def luhn_ok(text: str) -> bool:
    """Return True when the digits in ``text`` pass the Luhn checksum."""
    digits = [int(c) for c in text if c in "0123456789"]
    if len(digits) < 2:
        return False
    total = 0
    for i, digit in enumerate(reversed(digits)):
        if i % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def _locate(text: str, offsets: list[int]) -> dict[int, tuple[int, int]]:
    """Return 1-based (line, column) for each offset, counting newlines between them in C."""
    found: dict[int, tuple[int, int]] = {}
    line, line_start, previous = 1, 0, 0
    for offset in sorted(set(offsets)):
        newlines = text.count("\n", previous, offset)
        if newlines:
            line += newlines
            line_start = text.rfind("\n", previous, offset) + 1
        found[offset] = (line, offset - line_start + 1)
        previous = offset
    return found


def run_checks(text: str, rules: Sequence[Rule]) -> list[Hit]:
    """Return every hit of every rule's check in ``text``, in order of position."""
    spans: list[tuple[int, int, Rule]] = []
    for rule in rules:
        check = rule.check
        if check is None:
            continue
        for match in check.regex.finditer(text):
            start, end = match.start(), match.end()
            if start == end:
                continue
            if check.validate == "luhn" and not luhn_ok(match.group(0)):
                continue
            spans.append((start, end, rule))
    if not spans:
        return []
    where = _locate(text, [start for start, _, _ in spans])
    hits = [Hit(rule.id, rule.check.action, *where[start], start, end, rule.check.message)
            for start, end, rule in spans if rule.check is not None]
    hits.sort(key=lambda hit: (hit.start, -SEVERITY[hit.action], hit.rule))
    return hits


def redact(text: str, hits: Sequence[Hit], rules: Sequence[Rule]) -> str:
    """Return ``text`` with each revise hit replaced by its rule's replacement."""
    replacements = {rule.id: rule.check.replace for rule in rules if rule.check is not None}
    pieces: list[str] = []
    cursor = 0
    for hit in hits:
        if hit.action != "revise":
            continue
        if hit.start < cursor:
            # Overlapping matches: the earlier replacement stands for both, and the later
            # match's tail is dropped too, so no part of either stays in clear text.
            cursor = max(cursor, hit.end)
            continue
        pieces.append(text[cursor:hit.start])
        pieces.append(replacements[hit.rule])
        cursor = hit.end
    pieces.append(text[cursor:])
    return "".join(pieces)
