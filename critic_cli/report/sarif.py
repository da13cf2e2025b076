"""SARIF 2.1.0 for code scanning: a result per draft that is not approved and per check hit."""

from __future__ import annotations

import json
import ntpath
import posixpath
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any
from urllib.parse import quote

from critic_cli import __version__
from critic_cli.record import Record, Summary
from critic_cli.report import Context
from critic_cli.report.github import describe

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://critic.dev"
SRCROOT = "%SRCROOT%"
LEVELS = {"flagged": "note", "revise": "warning", "refuse": "error", "error": "error"}
ACTION_LEVELS = {"flag": "note", "revise": "warning", "refuse": "error"}
VERDICT_RULES: dict[str, str] = {
    "flagged": "The gate fired and no model reviewed the draft: it needs a second look.",
    "revise": "The draft must be revised before it ships.",
    "refuse": "The draft must not ship.",
    "error": "The draft could not be reviewed (reflection failed or the input is unreadable).",
}


def artifact_location(source: str) -> dict[str, str]:
    """Return the SARIF artifactLocation of a draft: a relative URI under %SRCROOT%, or file://."""
    if posixpath.isabs(source):
        return {"uri": PurePosixPath(source).as_uri()}
    if ntpath.isabs(source) and ntpath.splitdrive(source)[0]:
        return {"uri": PureWindowsPath(source).as_uri()}
    # Everything else (':' too: 'data.jsonl:3' would read as a URI scheme) is percent-encoded.
    return {"uri": quote(source.replace("\\", "/"), safe="/"), "uriBaseId": SRCROOT}


def _verdict_rule(verdict: str) -> dict[str, Any]:
    return {
        "id": f"critic/{verdict}",
        "name": verdict.capitalize(),
        "shortDescription": {"text": VERDICT_RULES[verdict]},
        "defaultConfiguration": {"level": LEVELS[verdict]},
    }


def _check_rule(rule: str, action: str) -> dict[str, Any]:
    return {
        "id": rule,
        "shortDescription": {"text": f"critic check {rule} ({action})"},
        "defaultConfiguration": {"level": ACTION_LEVELS.get(action, "note")},
        "properties": {"action": action},
    }


class SARIFReport:
    """One SARIF log with one run, written whole at the end."""

    def __init__(self, context: Context) -> None:
        del context
        self.rules: list[dict[str, Any]] = []
        self.indexes: dict[str, int] = {}
        self.results: list[dict[str, Any]] = []

    def start(self) -> str:
        """Write nothing before the records: the log is one JSON document."""
        return ""

    def _rule_index(self, rule_id: str, descriptor: dict[str, Any]) -> int:
        """Return the index of ``rule_id`` in the rules array, adding it when first seen."""
        if rule_id not in self.indexes:
            self.indexes[rule_id] = len(self.rules)
            self.rules.append(descriptor)
        return self.indexes[rule_id]

    def add(self, record: Record) -> str:
        """Collect the record's results; write nothing yet."""
        location = artifact_location(record.source)
        if record.verdict in LEVELS:
            rule_id = f"critic/{record.verdict}"
            self.results.append({
                "ruleId": rule_id,
                "ruleIndex": self._rule_index(rule_id, _verdict_rule(record.verdict)),
                "level": LEVELS[record.verdict],
                "message": {"text": describe(record)},
                "locations": [{"physicalLocation": {"artifactLocation": location}}],
                "properties": {"verdict": record.verdict,
                               "confidence": record.confidence_before},
            })
        for check in record.checks:
            rule, action = str(check["rule"]), str(check["action"])
            self.results.append({
                "ruleId": rule,
                "ruleIndex": self._rule_index(rule, _check_rule(rule, action)),
                "level": ACTION_LEVELS.get(action, "note"),
                "message": {"text": f"Check {rule} matched ({action}); the draft's verdict: "
                                    f"{record.verdict}."},
                "locations": [{"physicalLocation": {
                    "artifactLocation": location,
                    "region": {"startLine": check["line"], "startColumn": check["column"]},
                }}],
            })
        return ""

    def finish(self, summary: Summary) -> str:
        """Return the whole SARIF log."""
        log = {
            "$schema": SCHEMA,
            "version": "2.1.0",
            "runs": [{
                "tool": {"driver": {
                    "name": "critic",
                    "version": __version__,
                    "informationUri": INFORMATION_URI,
                    "rules": self.rules,
                }},
                "columnKind": "unicodeCodePoints",
                "results": self.results,
                "properties": {"verdicts": {v: n for v, n in summary.verdicts.items() if n}},
            }],
        }
        return json.dumps(log, ensure_ascii=False, indent=2) + "\n"
