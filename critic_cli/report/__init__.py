"""Reports: each format turns records into text; a table maps ``--format`` names to them.

A report is fed one record at a time and may write as it goes (``jsonl``, ``text``) or
collect and write at the end (``sarif``, ``junit``). Only ``report/text.py`` imports rich.
"""

import importlib
from typing import NamedTuple, Protocol

from critic_cli.record import Record, Summary

FORMATS: dict[str, str] = {
    "text": "critic_cli.report.text:TextReport",
    "json": "critic_cli.report.jsonfmt:JSONReport",
    "jsonl": "critic_cli.report.jsonfmt:JSONLinesReport",
    "sarif": "critic_cli.report.sarif:SARIFReport",
    "junit": "critic_cli.report.junit:JUnitReport",
    "github": "critic_cli.report.github:GitHubReport",
    "markdown": "critic_cli.report.markdown:MarkdownReport",
}


class Context(NamedTuple):
    """What a report may need beyond the records."""

    fail_on: str = "revise"
    several: bool = False
    color: bool = False
    width: int | None = None
    verbose: bool = False


class Report(Protocol):
    """A format: text to write before, for each record, and after."""

    def start(self) -> str: ...

    def add(self, record: Record) -> str: ...

    def finish(self, summary: Summary) -> str: ...


def make(name: str, context: Context) -> Report:
    """Return the report for the format ``name``."""
    module, _, cls = FORMATS[name].partition(":")
    report: Report = getattr(importlib.import_module(module), cls)(context)
    return report
