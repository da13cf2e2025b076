"""Located validation of loaded YAML documents: every error names file, line and key."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from critic_cli.errors import CriticError, located
from critic_cli.yamlsafe import Lines

Path = tuple[str | int, ...]


def kind(value: Any) -> str:
    """Return a short human name for the JSON/YAML type of ``value``."""
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "a list", dict: "a mapping"}
    return names.get(type(value), type(value).__name__)


def dotted(path: Path) -> str:
    """Return ``rules[0].check.pattern`` for ``("rules", 0, "check", "pattern")``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class Validator:
    """Check values of one loaded document, raising ``error`` with file, line and key."""

    def __init__(self, source: str, lines: Lines, error: type[CriticError]) -> None:
        self.source = source
        self.lines = lines
        self.error = error

    def fail(self, path: Path, reason: str) -> CriticError:
        """Return the located error for ``path``."""
        return self.error(located(self.source, self.lines.of(path), dotted(path), reason))

    def mapping(
        self, value: Any, path: Path, allowed: Sequence[str], required: Sequence[str] = ()
    ) -> Mapping[str, Any]:
        """Return ``value`` as a mapping with only ``allowed`` keys and every ``required`` one."""
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {kind(value)}")
        for key in value:
            if key not in allowed:
                raise self.fail(
                    (*path, str(key)), f"unknown key (expected one of: {', '.join(allowed)})"
                )
        for key in required:
            if value.get(key) is None:
                raise self.fail(path, f"missing required key {key!r}")
        return value

    def items(self, value: Any, path: Path) -> list[Any]:
        """Return ``value`` as a list; null is an empty list."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {kind(value)}")
        return value

    def text(self, value: Any, path: Path, *, empty: bool = False) -> str:
        """Return ``value`` as a string, non-empty unless ``empty``."""
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {kind(value)}")
        if not empty and not value.strip():
            raise self.fail(path, "must not be empty")
        return value

    def flag(self, value: Any, path: Path) -> bool:
        """Return ``value`` as a boolean; null is False."""
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {kind(value)}")
        return value

    def number(
        self, value: Any, path: Path, *, low: float | None = None, high: float | None = None
    ) -> float:
        """Return ``value`` as a finite number, within [low, high] when given."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(path, f"expected a number, got {kind(value)}")
        if not math.isfinite(value):
            raise self.fail(path, "expected a finite number")
        if (low is not None and value < low) or (high is not None and value > high):
            raise self.fail(path, f"must be between {low} and {high}, got {value}")
        return float(value)

    def integer(self, value: Any, path: Path, *, low: int = 0) -> int:
        """Return ``value`` as an integer of at least ``low``."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected a whole number, got {kind(value)}")
        if value < low:
            raise self.fail(path, f"must be at least {low}, got {value}")
        return value

    def choice(self, value: Any, path: Path, choices: Sequence[str]) -> str:
        """Return ``value`` when it is one of ``choices``."""
        if value not in choices:
            raise self.fail(path, f"expected one of {', '.join(choices)}, got {value!r}")
        return str(value)

    def tags(self, value: Any, path: Path) -> frozenset[str]:
        """Return a list of non-empty strings as a frozenset."""
        return frozenset(
            self.text(tag, (*path, i)) for i, tag in enumerate(self.items(value, path))
        )
