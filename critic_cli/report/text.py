"""Text for people, drawn with rich: verdicts, the gate's arithmetic, summaries, progress."""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Mapping
from types import TracebackType
from typing import IO, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from critic_cli.record import VERDICTS, Record, Summary
from critic_cli.report import Context

STYLES = {"approve": "bold green", "flagged": "bold yellow", "revise": "bold magenta",
          "refuse": "bold red", "error": "bold red reverse"}
MARKS = {"approve": "✔", "flagged": "⚑", "revise": "✎", "refuse": "✖", "error": "!"}
REASONS = {"sensitive_tag": "a sensitive tag was hit", "rule": "a flag check matched",
           "low_confidence": "confidence is below the threshold"}


def render(context: Context, *renderables: Any) -> str:
    """Return renderables as text at a fixed width; colour only when the context asks."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=context.width or 100, force_terminal=context.color,
                      no_color=not context.color, highlight=False, soft_wrap=False)
    for renderable in renderables:
        # Prose lines are not wrapped (a long reason stays one line); tables fit the width.
        console.print(renderable, soft_wrap=isinstance(renderable, Text))
    return "\n".join(line.rstrip() for line in buffer.getvalue().split("\n"))


def _shown(text: str) -> str:
    """Return ``text`` with control characters escaped, so a name cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _excerpt(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def record_lines(record: Record) -> Text:
    """Return the text block for one record."""
    out = Text()
    out.append(f"{MARKS[record.verdict]} {record.verdict:<8}", style=STYLES[record.verdict])
    out.append(f" {_shown(record.source)}\n", style="bold")
    gate = record.gate
    relation = "<" if record.confidence_before < gate.threshold else "≥"
    out.append(f"  confidence {record.confidence_before:.2f} {relation} threshold "
               f"{gate.threshold:.2f}; ")
    if gate.fired:
        out.append("gate fired: ", style="yellow")
        out.append(REASONS.get(gate.reason or "", "") + (
            f" ({record.sensitive_tag_hit})" if record.sensitive_tag_hit else ""))
    else:
        out.append("gate did not fire", style="green")
    out.append("\n")
    for check in record.checks:
        out.append(f"  {_shown(record.source)}:{check['line']}:{check['column']}: ", style="dim")
        out.append(f"{check['action']} ", style=STYLES.get(check["action"], "yellow"))
        out.append(f"[{check['rule']}]\n")
    reflection = record.reflection
    if reflection.ran:
        where = "cache" if reflection.cached else f"{record.reflection_latency_ms:.0f} ms"
        out.append(f"  reflection: {reflection.model} ({where})\n", style="dim")
    elif gate.fired and record.verdict == "flagged":
        out.append("  no reflection: no model configured (--model) or --no-reflect\n",
                   style="dim")
    if record.matched_preferences:
        out.append("  matched preferences: " + "; ".join(record.matched_preferences) + "\n")
    if record.rules_used:
        out.append("  rules sent: " + ", ".join(record.rules_used) + "\n", style="dim")
    if record.error:
        out.append(f"  error: {_shown(record.error)}\n", style="red")
    if record.verdict == "revise" and record.revised_draft is not None:
        out.append("  revised draft:\n", style="magenta")
        out.append("    " + _excerpt(record.revised_draft).replace("\n", "\n    ") + "\n")
    if record.verdict == "refuse" and record.refusal_message:
        out.append(f"  refusal: {record.refusal_message}\n", style="red")
    out.rstrip()
    return out


def summary_table(summary: Summary) -> Table:
    """Return the end-of-run table: counts per verdict, cache hits, wall time."""
    table = Table(title=None, show_edge=False, box=None, padding=(0, 2))
    for verdict in VERDICTS:
        table.add_column(verdict, justify="right", style=STYLES[verdict])
    table.add_column("cache hits", justify="right")
    table.add_column("time", justify="right")
    table.add_row(*(str(summary.verdicts[v]) for v in VERDICTS), str(summary.cache_hits),
                  f"{summary.seconds:.2f} s")
    return table


class TextReport:
    """Each record as a short block, then a summary when there were several."""

    def __init__(self, context: Context) -> None:
        self.context = context

    def start(self) -> str:
        """Write nothing before the records."""
        return ""

    def add(self, record: Record) -> str:
        """Return the block for one record."""
        return render(self.context, record_lines(record))

    def finish(self, summary: Summary) -> str:
        """Return the summary table (after a blank line) for several drafts."""
        if not self.context.several:
            return ""
        return render(self.context, Text(""), summary_table(summary))


def render_explain(breakdown: Mapping[str, Any], context: Context) -> str:
    """Return the gate's arithmetic, one step a line."""
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column("step", style="bold")
    table.add_column("value", justify="right")
    table.add_column("how")
    for label, value, how in breakdown["steps"]:
        table.add_row(label, value, how)
    decision = Text("gate fires" if breakdown["fires"] else "gate does not fire",
                    style="bold yellow" if breakdown["fires"] else "bold green")
    decision.append(f" — {breakdown['why']}", style="")
    return render(context, table, Text(""), decision)


class ProgressBar:
    """A progress bar on stderr (count, rate, ETA, errors) when stderr is a terminal."""

    def __init__(self, total: int | None, file: IO[str] | None = None) -> None:
        self.console = Console(file=file or sys.stderr)
        self.progress = Progress(
            SpinnerColumn(), TextColumn("reviewing"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}/s"), TextColumn("[red]{task.fields[errors]} errors"),
            TimeElapsedColumn(), TimeRemainingColumn(), console=self.console, transient=True,
            auto_refresh=False,  # no refresh thread: a gate-only run may fork worker processes
        )
        self.shown = 0.0
        self.task = self.progress.add_task("review", total=total, rate="0.0", errors=0)
        self.errors = 0

    def __enter__(self) -> ProgressBar:
        self.progress.start()
        return self

    def advance(self, verdict: str) -> None:
        """Count one finished draft by its verdict."""
        self.errors += verdict == "error"
        task = self.progress.tasks[0]
        elapsed = task.elapsed or 0.0
        rate = f"{(task.completed + 1) / elapsed:.1f}" if elapsed else "0.0"
        self.progress.update(self.task, advance=1, rate=rate, errors=self.errors)
        now = time.monotonic()
        if now - self.shown >= 0.1:
            self.progress.refresh()
            self.shown = now

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.progress.stop()
