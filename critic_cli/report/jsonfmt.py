"""JSON formats: one object (or an array for several drafts), and JSON Lines."""

from __future__ import annotations

import json

from critic_cli.record import Record, Summary
from critic_cli.report import Context

_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_INDENTED = json.JSONEncoder(ensure_ascii=False, indent=2)


def pretty(record: Record) -> str:
    """Return a record as JSON text indented by two spaces."""
    return _INDENTED.encode(record.to_dict())


class JSONReport:
    """One record as a JSON object; several as a JSON array, streamed."""

    def __init__(self, context: Context) -> None:
        self.several = context.several
        self.count = 0

    def start(self) -> str:
        """Open the array when there are several drafts."""
        return "[" if self.several else ""

    def add(self, record: Record) -> str:
        """Return the record, comma-separated inside the array."""
        self.count += 1
        if not self.several:
            return pretty(record) + "\n"
        text = pretty(record)
        body = "\n".join("  " + line for line in text.splitlines())
        return ("," if self.count > 1 else "") + "\n" + body

    def finish(self, summary: Summary) -> str:
        """Close the array."""
        if not self.several:
            return ""
        return "\n]\n" if self.count else "]\n"


def line(record: Record) -> str:
    """Return a record as one JSON line."""
    return _COMPACT.encode(record.to_dict()) + "\n"


class JSONLinesReport:
    """One record per line, written as each completes."""

    stateless = staticmethod(line)  # each record's text depends on that record alone

    def __init__(self, context: Context) -> None:
        del context

    def start(self) -> str:
        """Write nothing before the records."""
        return ""

    def add(self, record: Record) -> str:
        """Return the record as one line."""
        return line(record)

    def finish(self, summary: Summary) -> str:
        """Write nothing after the records."""
        return ""
