"""Deterministic checks: run every rule's pattern over a draft, locate hits, redact."""

from bisect import bisect_right
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
    digits = [int(c) for c in text if c.isdigit()]
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


class _Locator:
    """Turn character offsets into 1-based line and column."""

    def __init__(self, text: str) -> None:
        self.starts = [0]
        find = text.find
        index = find("\n")
        while index != -1:
            self.starts.append(index + 1)
            index = find("\n", index + 1)

    def at(self, offset: int) -> tuple[int, int]:
        line = bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1


def run_checks(text: str, rules: Sequence[Rule]) -> list[Hit]:
    """Return every hit of every rule's check in ``text``, in order of position."""
    hits: list[Hit] = []
    locator: _Locator | None = None
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
            locator = locator or _Locator(text)
            line, column = locator.at(start)
            hits.append(Hit(rule.id, check.action, line, column, start, end, check.message))
    hits.sort(key=lambda hit: (hit.start, -SEVERITY[hit.action], hit.rule))
    return hits


def redact(text: str, hits: Sequence[Hit], rules: Sequence[Rule]) -> str:
    """Return ``text`` with each revise hit replaced by its rule's replacement."""
    replacements = {rule.id: rule.check.replace for rule in rules if rule.check is not None}
    pieces: list[str] = []
    cursor = 0
    for hit in hits:
        if hit.action != "revise" or hit.start < cursor:
            continue  # overlapping matches: the earlier one wins
        pieces.append(text[cursor:hit.start])
        pieces.append(replacements[hit.rule])
        cursor = hit.end
    pieces.append(text[cursor:])
    return "".join(pieces)
