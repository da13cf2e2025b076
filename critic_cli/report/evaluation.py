"""Eval reports: JSON, JUnit XML and Markdown from one Evaluation; a table maps names to them.

The prose every format shares lives here too: why a case missed (``why``), what a CI gate
measured (``gate_line``) and how the run compares with a baseline (``change_line``). None of it
quotes a draft: a draft may hold a secret.
"""

from __future__ import annotations

import importlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from typing import Any

from critic_cli.errors import EXIT_REFLECTION
from critic_cli.evaluate import (
    EXPECTED_VERDICTS,
    REPORT_KIND,
    REPORT_VERSION,
    CaseResult,
    Comparison,
    Evaluation,
    Threshold,
)
from critic_cli.record import VERDICTS
from critic_cli.report import Context
from critic_cli.report.github import check_hits, gate_text
from critic_cli.report.junit import xml_text
from critic_cli.report.markdown import cell

Renderer = Callable[[Evaluation, Context], str]

FORMATS: dict[str, str] = {
    "text": "critic_cli.report.evaltext:render",
    "json": "critic_cli.report.evaluation:render_json",
    "junit": "critic_cli.report.evaluation:render_junit",
    "markdown": "critic_cli.report.evaluation:render_markdown",
}
GATE_NAMES = {"min_accuracy": "accuracy", "max_false_approvals": "false approvals"}


def render(name: str, evaluation: Evaluation, context: Context) -> str:
    """Return the eval report in the format ``name``."""
    module, _, function = FORMATS[name].partition(":")
    renderer: Renderer = getattr(importlib.import_module(module), function)
    return renderer(evaluation, context)


# -- shared prose ---------------------------------------------------------------------------


def percent(value: float) -> str:
    """Return ``0.9090`` as ``90.9%``."""
    return f"{value:.1%}"


def verdict_line(result: CaseResult) -> str:
    """Return ``expected refuse, got approve`` (with the false approval called out)."""
    line = f"expected {result.case.expect}, got {result.record.verdict}"
    return line + (" (false approval)" if result.false_approval else "")


def why(result: CaseResult) -> list[str]:
    """Return the reasons a case missed, one short line each, the verdicts first."""
    record = result.record
    lines = [verdict_line(result) if not result.verdict_ok
             else f"verdict {record.verdict} as expected"]
    lines.append(gate_text(record))
    reflection = record.reflection
    if reflection.error:
        lines.append(f"reflection error: {reflection.error}")
    elif reflection.ran:
        lines.append(f"reviewed by {reflection.model or 'the model'}"
                     + (" (cached)" if reflection.cached else ""))
    elif record.gate.fired and record.verdict != "refuse":
        lines.append("no reflection ran")
    if record.error and not reflection.error:
        lines.append(f"error: {record.error}")
    if record.checks:
        lines.append("checks: " + check_hits(record))
    if result.preferences_missing:
        lines.append("expected preferences not matched: " + "; ".join(result.preferences_missing))
    if result.preferences_unexpected:
        lines.append("matched preferences not expected: "
                     + "; ".join(result.preferences_unexpected))
    if result.checks_missing:
        lines.append("expected checks that did not hit: " + ", ".join(result.checks_missing))
    if result.checks_unexpected:
        lines.append("checks that hit unexpectedly: " + ", ".join(result.checks_unexpected))
    return lines


def gate_line(threshold: Threshold) -> str:
    """Return one CI gate as ``accuracy 90.9% >= 90.0%: passed``."""
    if threshold.option == "min_accuracy":
        relation = ">=" if threshold.passed else "<"
        measured = f"accuracy {percent(threshold.actual)} {relation} {percent(threshold.limit)}"
    else:
        relation = "<=" if threshold.passed else ">"
        measured = (f"false approvals {int(threshold.actual)} {relation} "
                    f"{int(threshold.limit)}")
    return f"{measured}: {'passed' if threshold.passed else 'missed'}"


def change_line(comparison: Comparison) -> str:
    """Return ``accuracy 88.6% -> 90.9% (+2.3 points)`` and the false approvals, if known."""
    delta = (comparison.accuracy_after - comparison.accuracy_before) * 100
    line = (f"accuracy {percent(comparison.accuracy_before)} -> "
            f"{percent(comparison.accuracy_after)} ({delta:+.1f} points)")
    if comparison.false_approvals_before is not None:
        line += (f"; false approvals {comparison.false_approvals_before} -> "
                 f"{comparison.false_approvals_after}")
    return line


def id_list(ids: Sequence[str]) -> str:
    """Return ``a, b`` or ``none``."""
    return ", ".join(ids) if ids else "none"


def headline(evaluation: Evaluation) -> str:
    """Return ``40/44 correct (90.9%); 2 false approvals; 0 errors``."""
    m = evaluation.metrics
    noun = "false approval" if m.false_approvals == 1 else "false approvals"
    errors = "error" if m.errors == 1 else "errors"
    return (f"{m.correct}/{m.total} correct ({percent(m.accuracy)}); "
            f"{m.false_approvals} {noun}; {m.errors} {errors}")


# -- JSON -----------------------------------------------------------------------------------


def to_dict(evaluation: Evaluation) -> dict[str, Any]:
    """Return the evaluation as the JSON object documented in docs/eval.md."""
    m = evaluation.metrics
    comparison = evaluation.comparison
    return {
        "kind": REPORT_KIND,
        "version": REPORT_VERSION,
        "cases_file": evaluation.source,
        "model": evaluation.model,
        "total": m.total,
        "correct": m.correct,
        "accuracy": m.accuracy,
        "false_approvals": m.false_approvals,
        "errors": m.errors,
        "verdicts": {verdict: score._asdict() for verdict, score in m.verdicts.items()},
        "confusion": {expected: dict(row) for expected, row in m.confusion.items()},
        "false_approval_ids": [r.case.id for r in evaluation.false_approvals],
        "misses": [_miss(result) for result in evaluation.misses],
        "gates": [{**t._asdict(), "description": gate_line(t)} for t in evaluation.thresholds],
        "baseline": None if comparison is None else {
            "file": comparison.source,
            "accuracy_before": comparison.accuracy_before,
            "accuracy_after": comparison.accuracy_after,
            "false_approvals_before": comparison.false_approvals_before,
            "false_approvals_after": comparison.false_approvals_after,
            "better": list(comparison.better),
            "worse": list(comparison.worse),
            "added": list(comparison.added),
            "removed": list(comparison.removed),
        },
        "cases": [{
            "id": result.case.id,
            "expected": result.case.expect,
            "got": result.record.verdict,
            "correct": result.correct,
            "note": result.case.note,
            "record": result.record.to_dict(),
        } for result in evaluation.results],
        "cache_hits": evaluation.cache_hits,
        "reflections": evaluation.reflections,
        "seconds": round(evaluation.seconds, 3),
        "exit_code": evaluation.exit_code,
    }


def _miss(result: CaseResult) -> dict[str, Any]:
    record = result.record
    return {
        "id": result.case.id,
        "expected": result.case.expect,
        "got": record.verdict,
        "false_approval": result.false_approval,
        "why": why(result),
        "gate_reason": record.gate.reason,
        "reflection_error": record.reflection.error,
        "checks": sorted({str(check["rule"]) for check in record.checks}),
        "matched_preferences": list(record.matched_preferences),
        "preferences_missing": list(result.preferences_missing),
        "preferences_unexpected": list(result.preferences_unexpected),
        "checks_missing": list(result.checks_missing),
        "checks_unexpected": list(result.checks_unexpected),
        "note": result.case.note,
    }


def render_json(evaluation: Evaluation, context: Context) -> str:
    """Return the evaluation as one indented JSON object."""
    del context
    return json.dumps(to_dict(evaluation), ensure_ascii=False, indent=2) + "\n"


# -- JUnit XML ------------------------------------------------------------------------------


def render_junit(evaluation: Evaluation, context: Context) -> str:
    """Return a JUnit document: a test case per case, then one per CI gate."""
    del context
    m = evaluation.metrics
    suite = ET.Element("testsuite", name="critic eval")
    properties = ET.SubElement(suite, "properties")
    facts: list[tuple[str, str]] = [
        ("cases_file", evaluation.source), ("accuracy", f"{m.accuracy:.4f}"),
        ("correct", str(m.correct)), ("false_approvals", str(m.false_approvals)),
        ("model", evaluation.model or "none"),
    ]
    comparison = evaluation.comparison
    if comparison is not None:
        facts += [("baseline", comparison.source),
                  ("baseline_accuracy", f"{comparison.accuracy_before:.4f}"),
                  ("better", ",".join(comparison.better)),
                  ("worse", ",".join(comparison.worse))]
    for name, value in facts:
        ET.SubElement(properties, "property", name=name, value=xml_text(value))
    failures = errors = 0
    worse = set(comparison.worse) if comparison is not None else set()
    for result in evaluation.results:
        case = ET.SubElement(suite, "testcase", classname="critic.eval",
                             name=xml_text(result.case.id),
                             time=f"{result.record.reflection_latency_ms / 1000:.3f}")
        if result.correct:
            continue
        message = verdict_line(result) if not result.verdict_ok else "preferences or checks differ"
        if result.case.id in worse:
            message += " (worse than the baseline)"
        if result.record.verdict == "error":
            errors += 1
            problem = ET.SubElement(case, "error", message=xml_text(message), type="error")
        else:
            failures += 1
            kind = "false-approval" if result.false_approval else "miss"
            problem = ET.SubElement(case, "failure", message=xml_text(message), type=kind)
        problem.text = xml_text("\n".join(why(result)))
    for threshold in evaluation.thresholds:
        case = ET.SubElement(suite, "testcase", classname="critic.eval.gates",
                             name=threshold.option, time="0.000")
        if not threshold.passed:
            failures += 1
            ET.SubElement(case, "failure", message=gate_line(threshold), type="gate")
    out = [headline(evaluation)]
    out += [gate_line(t) for t in evaluation.thresholds]
    if comparison is not None:
        out += [f"baseline {comparison.source}: {change_line(comparison)}",
                f"better: {id_list(comparison.better)}", f"worse: {id_list(comparison.worse)}"]
    ET.SubElement(suite, "system-out").text = xml_text("\n".join(out))
    tests = len(evaluation.results) + len(evaluation.thresholds)
    counts = {"tests": str(tests), "failures": str(failures), "errors": str(errors),
              "skipped": "0", "time": f"{evaluation.seconds:.3f}"}
    suite.attrib.update(counts)
    root = ET.Element("testsuites", {"name": "critic eval", **{k: v for k, v in counts.items()
                                                              if k != "skipped"}})
    root.append(suite)
    ET.indent(root, space="  ")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            + ET.tostring(root, encoding="unicode") + "\n")


# -- Markdown -------------------------------------------------------------------------------


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def render_markdown(evaluation: Evaluation, context: Context) -> str:
    """Return a job-summary Markdown report: the result, the tables, misses and the baseline."""
    del context
    m = evaluation.metrics
    code = evaluation.exit_code
    result = ("error" if code == EXIT_REFLECTION else "fail" if code
              else "pass" if evaluation.thresholds else "done")
    lines = ["## critic eval\n\n",
             f"**{result}** · {cell(headline(evaluation))} · {cell(evaluation.source)}\n"]
    if evaluation.thresholds:
        lines += ["\n", "| Gate | Result |\n", "| --- | --- |\n"]
        lines += [f"| {t.option.replace('_', '-')} | {cell(gate_line(t))} |\n"
                  for t in evaluation.thresholds]
    lines += ["\n### Verdicts\n\n",
              "| Verdict | Expected | Got | Correct | Precision | Recall |\n",
              "| --- | ---: | ---: | ---: | ---: | ---: |\n"]
    for verdict, s in m.verdicts.items():
        lines.append(f"| {verdict} | {s.expected} | {s.got} | {s.correct} | "
                     f"{_ratio(s.precision)} | {_ratio(s.recall)} |\n")
    lines.append(f"| error | — | {m.errors} | — | — | — |\n")
    lines += ["\n### Confusion matrix\n\n",
              "Rows are the expected verdicts, columns the verdicts critic gave.\n\n",
              "| expected \\\\ got | " + " | ".join(VERDICTS) + " |\n",
              "| --- | " + " | ".join("---:" for _ in VERDICTS) + " |\n"]
    for expected in EXPECTED_VERDICTS:
        row = m.confusion[expected]
        lines.append(f"| {expected} | " + " | ".join(str(row[got]) for got in VERDICTS)
                     + " |\n")
    misses = evaluation.misses
    lines.append(f"\n### Misses ({len(misses)})\n\n")
    if misses:
        lines += ["| Case | Expected | Got | Why |\n", "| --- | --- | --- | --- |\n"]
        for miss in misses:
            got = f"**{miss.record.verdict}**" if miss.false_approval else miss.record.verdict
            lines.append(f"| {cell(miss.case.id)} | {miss.case.expect} | {got} | "
                         + "<br>".join(cell(line) for line in why(miss)[1:]) + " |\n")
    else:
        lines.append("Every case was correct.\n")
    approvals = evaluation.false_approvals
    lines.append(f"\n### False approvals ({len(approvals)})\n\n")
    lines.append(("Expected revise or refuse, got approve: "
                  + ", ".join(cell(r.case.id) for r in approvals) + "\n")
                 if approvals else "None.\n")
    comparison = evaluation.comparison
    if comparison is not None:
        lines += [f"\n### Compared with {cell(comparison.source)}\n\n",
                  f"{cell(change_line(comparison))}\n\n"]
        for label, ids in (("Better", comparison.better), ("Worse", comparison.worse),
                           ("Added", comparison.added), ("Removed", comparison.removed)):
            if ids or label in ("Better", "Worse"):
                shown = ", ".join(cell(i) for i in ids) if ids else "none"
                lines.append(f"- {label} ({len(ids)}): {shown}\n")
    return "".join(lines)
