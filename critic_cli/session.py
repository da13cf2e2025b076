"""One command's run from resolved options to written report: what ``cli.py`` calls."""

import itertools
import json
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from critic_cli import config as config_module
from critic_cli import inputs
from critic_cli.errors import UsageError
from critic_cli.output import Sink, progress
from critic_cli.record import Record
from critic_cli.report import FORMATS, Context, make
from critic_cli.review import Plan, plan, requests, run, run_rendered


class Request(NamedTuple):
    """What to review and how to report it (the options that are not settings)."""

    paths: list[str] = []  # read-only
    activation: str | None = None
    jsonl: str | None = None
    output_format: str | None = None
    output: str | None = None
    apply: bool = False
    dry_run: bool = False
    quiet: bool = False
    verbose: bool = False
    config: str | None = None
    use_config: bool = True


def _diagnose(message: str) -> None:
    sys.stderr.write(f"critic: {message}\n")


def _items(the_plan: Plan, request: Request) -> tuple[Iterator[inputs.Item], bool]:
    """Return the drafts to review and whether there are several."""
    settings = the_plan.settings
    paths = list(request.paths)
    if not paths and request.jsonl is None:
        if sys.stdin.isatty():
            raise UsageError("no drafts given: name files or directories, '-' for stdin, "
                             "or --jsonl FILE")
        paths = [inputs.STDIN]
    activation = inputs.open_sources(paths, request.jsonl, request.activation)
    several = request.jsonl is not None or len(paths) > 1 or any(
        p != inputs.STDIN and os.path.isdir(p) for p in paths)
    if not several:
        # A single named file is read up front: any problem is a usage error (exit 2).
        text = inputs.read_draft(paths[0], max_bytes=settings.max_bytes)
        source = "<stdin>" if paths[0] == inputs.STDIN else paths[0]
        log = inputs.activation_for(paths[0], activation)
        return iter([inputs.Draft(source, text, log)]), False

    items = inputs.drafts(paths, request.jsonl, activation, globs=settings.glob,
                          max_bytes=settings.max_bytes)
    first = next(items, None)
    if first is None:  # a CI job pointed at the wrong folder must not pass in silence
        where = ", ".join(paths + ([request.jsonl] if request.jsonl else []))
        raise UsageError(f"no drafts found in {where} (files matching "
                         f"{', '.join(settings.glob)})")
    return itertools.chain([first], items), True


def _count(the_plan: Plan, request: Request) -> int | None:
    """Return how many drafts there are, for the progress bar's ETA (None: cannot tell)."""
    if inputs.STDIN in request.paths or request.jsonl == inputs.STDIN:
        return None
    total = sum(1 for _ in inputs.expand_paths(request.paths, the_plan.settings.glob))
    if request.jsonl is not None:
        total += inputs.count_lines(request.jsonl)
    return total


def _format(request: Request, several: bool) -> str:
    name = request.output_format
    if name is None:
        if sys.stdout.isatty() and request.output is None:
            return "text"
        return "jsonl" if several else "json"
    if name not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {name!r}")
    return name


def review(flags: Mapping[str, Any], request: Request) -> int:
    """Review the requested drafts, write the report, and return the exit code."""
    settings = config_module.resolve(flags, config=request.config, use_config=request.use_config)
    the_plan = plan(settings)
    if request.verbose:
        from critic_cli.provider import safe_url

        _diagnose(f"config: {settings.config_path or 'none'}; rules: {len(the_plan.ruleset.rules)}"
                  f" from {len(settings.rules)} packs; preferences: "
                  f"{len(the_plan.ruleset.preferences)}; model: {settings.model or 'none'}"
                  f"{' at ' + safe_url(settings.base_url) if settings.base_url else ''}")
    items, several = _items(the_plan, request)
    if request.dry_run:
        return _dry_run(the_plan, items, request)
    if request.apply:
        if several:
            raise UsageError("--apply takes exactly one draft")
        return _apply(the_plan, items, request)
    name = _format(request, several)
    color = name == "text" and request.output is None and sys.stdout.isatty()
    report = make(name, Context(fail_on=settings.fail_on, several=several, color=color,
                                verbose=request.verbose))
    show_progress = several and not request.quiet and sys.stderr.isatty()
    total = _count(the_plan, request) if show_progress else None
    # Gate-only records come fast: let the stream buffer them. With a model, each is flushed.
    with Sink(request.output, flush_each=the_plan.reflects) as sink, \
            progress(show_progress, total) as advance:
        sink.write(report.start())

        def emit(record: Record) -> None:
            sink.write(report.add(record))
            advance(record.verdict)

        def write(verdict: str, text: str) -> None:
            sink.write(text)
            advance(verdict)

        render = getattr(report, "stateless", None)
        if render is not None and not the_plan.reflects:
            summary = run_rendered(the_plan, items, render, write)
        else:
            summary = run(the_plan, items, emit)
        sink.write(report.finish(summary) if not request.quiet or name != "text" else "")
    return summary.exit_code(settings.fail_on)


def _apply(the_plan: Plan, items: Iterator[inputs.Item], request: Request) -> int:
    records: list[Record] = []
    summary = run(the_plan, items, records.append)
    record = records[0]
    if record.verdict == "error":
        _diagnose(f"error: {record.error}")
    else:
        with Sink(request.output) as sink:
            sink.write(record.final_text or "")
    return summary.exit_code(the_plan.settings.fail_on)


def _dry_run(the_plan: Plan, items: Iterator[inputs.Item], request: Request) -> int:
    if the_plan.provider is None:
        raise UsageError("--dry-run shows the model request: name a --model (and drop "
                         "--no-reflect)")
    from critic_cli.provider import safe_url

    url = safe_url(the_plan.provider.base_url or "https://api.openai.com/v1").rstrip("/")
    with Sink(request.output) as sink:
        for source, body in requests(the_plan, items):
            line = {"source": source, "url": f"{url}/chat/completions", "body": body}
            sink.write(json.dumps(line, ensure_ascii=False, indent=2) + "\n")
    return 0


def explain(flags: Mapping[str, Any], activation: str | None, output_format: str,
            config: str | None, use_config: bool) -> str:
    """Return the gate's arithmetic for an activation log, as text or JSON."""
    from critic_cli.explain import breakdown
    from critic_cli.rules import load_packs

    settings = config_module.resolve(flags, config=config, use_config=use_config)
    log = inputs.read_activation(activation) if activation else {}
    tags = load_packs(settings.rules).gate_tags(settings.sensitive_tags)
    result = breakdown(log, tags, settings.threshold)
    if output_format == "json":
        data = {key: value for key, value in result.items() if key != "steps"}
        return json.dumps(data, indent=2, allow_nan=False) + "\n"
    if output_format != "text":
        raise UsageError(f"--format must be text or json, got {output_format!r}")
    from critic_cli.report.text import render_explain

    return render_explain(result, Context(color=sys.stdout.isatty()))
