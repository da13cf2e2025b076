"""Markdown for a job summary or a pull-request comment: counts, then the drafts to look at."""

from __future__ import annotations

import re

from critic_cli.record import Record, Summary
from critic_cli.report import Context
from critic_cli.report.github import GATE_REASONS, MOST_HITS, counts, hit_text

HEADER = ("| Verdict | Draft | Confidence | Gate | Checks | Notes |\n"
          "| --- | --- | --- | --- | --- | --- |\n")
RESULTS = {0: "pass", 1: "fail", 3: "error"}
NOTE_LIMIT = 200
# Backslash first; the rest would start emphasis, code, links, HTML or table cells.
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")
_NEWLINE = re.compile(r"\r\n|\r|\n")


def cell(text: str) -> str:
    """Return ``text`` safe inside one table cell: markup escaped, newlines as ``<br>``."""
    return _NEWLINE.sub("<br>", _SPECIAL.sub(r"\\\1", text))


def _excerpt(text: str, limit: int = NOTE_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def _gate(record: Record) -> str:
    gate = record.gate
    if not gate.fired:
        return "did not fire"
    why = GATE_REASONS.get(gate.reason or "", gate.reason or "")
    if gate.reason == "sensitive_tag" and record.sensitive_tag_hit:
        why += f" {record.sensitive_tag_hit}"
    return f"fired: {why}"


def _notes(record: Record) -> list[str]:
    reflection = record.reflection
    notes = []
    if reflection.ran:
        notes.append(f"model {reflection.model or '?'}" + (" (cached)" if reflection.cached
                                                             else ""))
    elif record.verdict == "flagged":
        notes.append("no reflection ran")
    if record.matched_preferences:
        notes.append("matched: " + "; ".join(record.matched_preferences))
    if record.error:
        notes.append(f"error: {record.error}")
    if record.verdict == "refuse" and record.refusal_message:
        notes.append(f"refusal: {_excerpt(record.refusal_message)}")
    return notes


def _checks(record: Record) -> list[str]:
    hits = [hit_text(check) for check in record.checks[:MOST_HITS]]
    more = len(record.checks) - MOST_HITS
    return hits + ([f"and {more} more"] if more > 0 else [])


def row(record: Record) -> str:
    """Return the table row of one record, every cell escaped."""
    # A draft that could not be read has no gate or confidence worth showing.
    unread = record.verdict == "error" and not record.reflection.ran
    relation = "<" if record.confidence_before < record.gate.threshold else "≥"
    cells = [
        f"**{record.verdict}**",
        cell(record.source),
        "—" if unread else f"{record.confidence_before:.2f} {relation} "
                           f"{record.gate.threshold:.2f}",
        "—" if unread else cell(_gate(record)),
        "<br>".join(cell(hit) for hit in _checks(record)) or "—",
        "<br>".join(cell(note) for note in _notes(record)) or "—",
    ]
    return "| " + " | ".join(cells) + " |\n"


class MarkdownReport:
    """A heading, the counts, and a table of the drafts that were not approved."""

    def __init__(self, context: Context) -> None:
        self.fail_on = context.fail_on
        self.rows: list[str] = []
        self.approved = 0

    def start(self) -> str:
        """Write nothing before the records: the counts come first."""
        return ""

    def add(self, record: Record) -> str:
        """Collect the record's row (approved drafts are only counted)."""
        if record.verdict == "approve":
            self.approved += 1
        else:
            self.rows.append(row(record))
        return ""

    def finish(self, summary: Summary) -> str:
        """Return the whole report."""
        result = RESULTS[summary.exit_code(self.fail_on)]
        lines = ["## critic\n\n",
                 f"**{result}** (fail on {self.fail_on}) · {counts(summary)}\n"]
        if self.rows:
            lines += ["\n", HEADER, *self.rows]
        if self.rows and self.approved:
            noun = "draft" if self.approved == 1 else "drafts"
            lines.append(f"\n{self.approved} approved {noun} not listed.\n")
        elif self.approved:
            lines.append("\nEvery draft was approved.\n")
        return "".join(lines)
