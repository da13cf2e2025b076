"""JUnit XML for CI test tabs: a test case per draft; failures follow ``--fail-on``."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from critic_cli.record import Record, Summary, fails
from critic_cli.report import Context
from critic_cli.report.github import describe, hit_text

# What XML 1.0 cannot carry, even as a character reference: C0 controls but tab, newline and
# carriage return; lone surrogates; U+FFFE and U+FFFF.
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def xml_text(text: str) -> str:
    """Return ``text`` with the characters XML 1.0 forbids written as visible escapes."""
    return _ILLEGAL.sub(_visible, text)


def _seconds(value: float) -> str:
    return f"{value:.3f}"


class JUnitReport:
    """One ``<testsuites>`` document with one ``<testsuite name="critic">``, written at the end.

    Each test case is serialised as it is added, so a long run holds strings, not trees.
    """

    def __init__(self, context: Context) -> None:
        self.fail_on = context.fail_on
        self.cases: list[str] = []
        self.failures = 0
        self.errors = 0

    def start(self) -> str:
        """Write nothing before the records: the counts go in the opening tags."""
        return ""

    def add(self, record: Record) -> str:
        """Collect the record's test case; write nothing yet."""
        case = ET.Element("testcase", classname="critic", name=xml_text(record.source),
                          time=_seconds(record.reflection_latency_ms / 1000))
        hits = "\n".join(f"{record.source}:{hit_text(check)}" for check in record.checks)
        if record.verdict == "error":
            self.errors += 1
            problem = ET.SubElement(case, "error", message=xml_text(describe(record)),
                                    type="error")
            problem.text = xml_text(record.error or "")
        elif fails(record.verdict, self.fail_on):
            self.failures += 1
            problem = ET.SubElement(case, "failure", message=xml_text(describe(record)),
                                    type=record.verdict)
            problem.text = xml_text(hits) or None
        if record.verdict != "approve":
            out = [describe(record)] + ([hits] if hits else [])
            if record.verdict == "revise" and record.revised_draft is not None:
                out.append("revised draft:\n" + record.revised_draft)
            elif record.verdict == "refuse" and record.refusal_message:
                out.append("refusal:\n" + record.refusal_message)
            ET.SubElement(case, "system-out").text = xml_text("\n".join(out))
        ET.indent(case, space="  ", level=2)
        self.cases.append("    " + ET.tostring(case, encoding="unicode") + "\n")
        return ""

    def finish(self, summary: Summary) -> str:
        """Return the whole document."""
        counts = {"tests": str(len(self.cases)), "failures": str(self.failures),
                  "errors": str(self.errors), "time": _seconds(summary.seconds)}
        suites = _open_tag(ET.Element("testsuites", {"name": "critic", **counts}))
        suite = _open_tag(ET.Element("testsuite", {"name": "critic", **counts, "skipped": "0"}))
        return ('<?xml version="1.0" encoding="UTF-8"?>\n' + suites + "\n  " + suite + "\n"
                + "".join(self.cases) + "  </testsuite>\n</testsuites>\n")


def _open_tag(element: ET.Element) -> str:
    """Return the opening tag of an empty element, attributes escaped by ElementTree."""
    text = ET.tostring(element, encoding="unicode", short_empty_elements=False)
    return text[: -len(f"</{element.tag}>")]
