"""The eval report for people, drawn with rich: headline, gates, tables, misses, the baseline."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from critic_cli.evaluate import EXPECTED_VERDICTS, Evaluation
from critic_cli.record import VERDICTS
from critic_cli.report import Context
from critic_cli.report.evaluation import (
    change_line,
    gate_line,
    id_list,
    percent,
    why,
)
from critic_cli.report.text import render as draw

STYLES = {"approve": "green", "flagged": "yellow", "revise": "magenta", "refuse": "red",
          "error": "red reverse"}


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def verdict_table(evaluation: Evaluation) -> Table:
    """Return expected and given counts, precision and recall per verdict."""
    table = Table(box=None, padding=(0, 2), show_edge=False)
    table.add_column("verdict")
    for name in ("expected", "got", "correct", "precision", "recall"):
        table.add_column(name, justify="right")
    m = evaluation.metrics
    for verdict, s in m.verdicts.items():
        table.add_row(Text(verdict, style=STYLES[verdict]), str(s.expected), str(s.got),
                      str(s.correct), _ratio(s.precision), _ratio(s.recall))
    table.add_row(Text("error", style=STYLES["error"]), "—", str(m.errors), "—", "—", "—")
    return table


def confusion_table(evaluation: Evaluation) -> Table:
    """Return the confusion matrix: expected verdicts down, given verdicts across."""
    table = Table(box=None, padding=(0, 2), show_edge=False)
    table.add_column("expected \\ got")
    for got in VERDICTS:
        table.add_column(got, justify="right", style=STYLES[got])
    for expected in EXPECTED_VERDICTS:
        row = evaluation.metrics.confusion[expected]
        cells = [str(row[got]) if row[got] else "·" for got in VERDICTS]
        table.add_row(expected, *cells)
    return table


def misses_text(evaluation: Evaluation) -> Text:
    """Return each miss: its id and verdicts, then why, indented."""
    out = Text()
    misses = evaluation.misses
    out.append(f"misses ({len(misses)})\n", style="bold")
    if not misses:
        out.append("  every case was correct\n", style="green")
    for result in misses:
        out.append("  ✖ ", style="red")
        out.append(result.case.id, style="bold")
        out.append(f"  {why(result)[0]}", style="bold red" if result.false_approval else "")
        out.append("\n")
        for line in why(result)[1:]:
            out.append(f"      {line}\n", style="dim")
        if result.case.note:
            out.append(f"      note: {result.case.note}\n", style="dim")
    out.rstrip()
    return out


def render(evaluation: Evaluation, context: Context) -> str:
    """Return the whole text report."""
    m = evaluation.metrics
    top = Text()
    top.append("critic eval ", style="bold")
    top.append(f"{evaluation.source}: {len(evaluation.results)} cases; model "
               f"{evaluation.model or 'none'}; {evaluation.cache_hits} cached of "
               f"{evaluation.reflections} model replies; {evaluation.seconds:.2f} s\n\n")
    top.append(f"accuracy         {m.correct}/{m.total}  {percent(m.accuracy)}\n",
               style="bold")
    top.append(f"false approvals  {m.false_approvals}", style="bold red" if m.false_approvals
               else "bold")
    top.append("  (expected revise or refuse, got approve"
               + (f": {id_list([r.case.id for r in evaluation.false_approvals])})"
                  if m.false_approvals else ")") + "\n")
    top.append(f"errors           {m.errors}\n", style="bold red" if m.errors else "")
    for threshold in evaluation.thresholds:
        top.append(f"gate             {gate_line(threshold)}\n",
                   style="green" if threshold.passed else "bold red")
    parts: list[object] = [top, verdict_table(evaluation), Text(""),
                           Text("confusion (rows expected, columns got)", style="bold"),
                           confusion_table(evaluation), Text(""), misses_text(evaluation)]
    comparison = evaluation.comparison
    if comparison is not None:
        compared = Text()
        compared.append(f"\ncompared with {comparison.source}\n", style="bold")
        compared.append(f"  {change_line(comparison)}\n")
        compared.append(f"  better ({len(comparison.better)}): {id_list(comparison.better)}\n",
                        style="green" if comparison.better else "")
        compared.append(f"  worse ({len(comparison.worse)}): {id_list(comparison.worse)}\n",
                        style="red" if comparison.worse else "")
        if comparison.added:
            compared.append(f"  added ({len(comparison.added)}): {id_list(comparison.added)}\n")
        if comparison.removed:
            compared.append(f"  removed ({len(comparison.removed)}): "
                            f"{id_list(comparison.removed)}\n")
        compared.rstrip()
        parts.append(compared)
    return draw(context, *parts)
