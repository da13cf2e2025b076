"""GitHub Actions workflow commands: one annotation a line, streamed as records complete.

Also home to the one-line prose every CI format shares: what a verdict was and why
(``describe``), where the checks hit (``check_hits``) and the counts (``counts``). None of it
quotes the draft: a check's matched text may be a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from critic_cli.record import VERDICTS, Record, Summary
from critic_cli.report import Context

GATE_REASONS = {"sensitive_tag": "sensitive tag", "rule": "a flag check matched",
                "low_confidence": "low confidence"}
# Annotation commands by verdict (the draft) and by check action (one hit).
VERDICT_COMMANDS = {"flagged": "notice", "revise": "warning", "refuse": "error", "error": "error"}
ACTION_COMMANDS = {"flag": "notice", "revise": "warning", "refuse": "error"}
MOST_HITS = 5


def gate_text(record: Record) -> str:
    """Return whether the gate fired, why, and the confidence against the threshold."""
    gate = record.gate
    relation = "<" if record.confidence_before < gate.threshold else ">="
    numbers = f"confidence {record.confidence_before:.2f} {relation} threshold {gate.threshold:.2f}"
    if not gate.fired:
        return f"gate did not fire: {numbers}"
    why = GATE_REASONS.get(gate.reason or "", gate.reason or "unknown reason")
    if gate.reason == "sensitive_tag" and record.sensitive_tag_hit:
        why += f" '{record.sensitive_tag_hit}'"
    return f"gate fired: {why}; {numbers}"


def hit_text(check: Mapping[str, Any]) -> str:
    """Return one check hit as ``rule (action) at line:column``."""
    return f"{check['rule']} ({check['action']}) at {check['line']}:{check['column']}"


def check_hits(record: Record, most: int = MOST_HITS) -> str:
    """Return the check hits of a record, the first ``most`` of them, or '' when none."""
    hits = [hit_text(check) for check in record.checks[:most]]
    more = len(record.checks) - most
    return ", ".join(hits) + (f" and {more} more" if more > 0 else "")


def describe(record: Record) -> str:
    """Return one line: the verdict, then the facts behind it (never the matched text)."""
    if record.verdict == "error" and not record.reflection.ran:
        return f"error: {record.error or 'the draft could not be reviewed'}"
    facts = []
    if record.checks:
        facts.append("checks: " + check_hits(record))
    facts.append(gate_text(record))
    reflection = record.reflection
    if reflection.ran:
        facts.append(f"reviewed by {reflection.model or 'the model'}"
                     + (" (cached)" if reflection.cached else ""))
    elif record.verdict == "flagged":
        facts.append("no reflection ran")
    if record.matched_preferences:
        facts.append("matched preferences: " + "; ".join(record.matched_preferences))
    if record.error:
        facts.append(f"error: {record.error}")
    return f"{record.verdict}: " + "; ".join(facts)


def counts(summary: Summary) -> str:
    """Return ``N drafts: 1 approve, 2 revise`` (verdicts in severity order, zeros left out)."""
    total = summary.total
    parts = [f"{summary.verdicts[v]} {v}" for v in VERDICTS if summary.verdicts[v]]
    noun = "draft" if total == 1 else "drafts"
    return f"{total} {noun}" + (": " + ", ".join(parts) if parts else "")


def escape_data(text: str) -> str:
    """Escape a workflow command's message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command's property value."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str, **properties: object) -> str:
    """Return one workflow command line, ``::name key=value,...::message``."""
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}\n"


class GitHubReport:
    """An annotation per non-approved draft and per check hit; a notice with the counts."""

    def __init__(self, context: Context) -> None:
        del context

    def start(self) -> str:
        """Write nothing before the records."""
        return ""

    def add(self, record: Record) -> str:
        """Return the record's annotations: the draft's, then one per check hit."""
        lines = []
        if record.verdict in VERDICT_COMMANDS:
            lines.append(command(VERDICT_COMMANDS[record.verdict], describe(record),
                                 file=record.source, title=f"critic {record.verdict}"))
        for check in record.checks:
            action = str(check["action"])
            message = (f"check {check['rule']} matched ({action}); "
                       f"the draft's verdict: {record.verdict}")
            lines.append(command(ACTION_COMMANDS.get(action, "notice"), message,
                                 file=record.source, line=check["line"], col=check["column"],
                                 title=f"critic {action}"))
        return "".join(lines)

    def finish(self, summary: Summary) -> str:
        """Return a notice with the counts per verdict."""
        return command("notice", f"critic: {counts(summary)}")
