"""The ``critic`` command line: parse options, call one core function, render the result."""

import contextlib
import json
import os
import sys
from typing import Annotated, Any

import typer
import typer.main
from typer.core import TyperGroup

from critic_cli import __version__
from critic_cli.errors import EXIT_INTERRUPTED, EXIT_USAGE, CriticError

EXIT_INTERNAL = 70


class _CriticGroup(TyperGroup):
    """Turn every CriticError into one line on stderr and its exit code, in one place.

    It also builds the rarely used commands (``eval``, ``batch``) only when they are asked
    for: typer turns every option of every command into a click parameter at start-up.
    """

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return [*super().list_commands(ctx), *(name for name in _LAZY if name not in
                                                self.commands)]

    def get_command(self, ctx: typer.Context, name: str) -> Any:  # type: ignore[override]
        command = super().get_command(ctx, name)
        if command is None and name in _LAZY:
            command = typer.main.get_command(_LAZY[name])
            command.name = name
        return command

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (`critic review ... | head -1`): stop quietly, and point
            # stdout at /dev/null so the interpreter's final flush does not fail again.
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except CriticError as exc:
            if os.environ.get("CRITIC_RAISE_ERRORS") == "1":
                raise
            _error(exc.message)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            if os.environ.get("CRITIC_RAISE_ERRORS") == "1":
                raise
            sys.stderr.write("critic: interrupted\n")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            if _is_usage(exc):
                # Click's own usage errors (an unknown option, a value of the wrong type):
                # one line too, with where to look instead of the usage block.
                context = getattr(exc, "ctx", None)
                where = getattr(context, "command_path", None) or "critic"
                _error(f"{exc.format_message()} (see '{where} --help')")  # type: ignore[attr-defined]
                raise typer.Exit(EXIT_USAGE) from None
            if os.environ.get("CRITIC_RAISE_ERRORS") == "1":
                raise
            _error(f"internal error: {type(exc).__name__}: {exc} "
                   "(set CRITIC_RAISE_ERRORS=1 for the traceback)")
            raise typer.Exit(EXIT_INTERNAL) from None


def _is_usage(exc: Exception) -> bool:
    return hasattr(exc, "exit_code") and hasattr(exc, "format_message")


def _error(message: str) -> None:
    sys.stderr.write(f"critic: error: {' '.join(message.splitlines())}\n")


app = typer.Typer(
    cls=_CriticGroup,
    help="Review LLM drafts: a deterministic gate, local checks and one hidden model call.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
)
rules_app = typer.Typer(help="Validate rule packs.", no_args_is_help=True,
                        rich_markup_mode=None)
app.add_typer(rules_app, name="rules")


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"critic {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Show the version and exit.")] = False,
) -> None:
    """Review LLM drafts: a deterministic gate, local checks and one hidden model call."""


FORMAT_NAMES = "text|json|jsonl|sarif|junit|github|markdown"

# Options several commands share, declared once.
Paths = Annotated[list[str] | None, typer.Argument(
    help="Draft files or directories; '-' reads stdin.", show_default=False)]
Activation = Annotated[str | None, typer.Option(
    "--activation", "-a", help="Activation log (JSON), raw or resolved. [default: each "
    "draft's NAME.activation.json, if any]")]
JSONL = Annotated[str | None, typer.Option(
    help='Read drafts from JSON Lines {"id", "draft", "activation"?}; - for stdin.')]
Rules = Annotated[list[str] | None, typer.Option(
    "--rules", "-r", help="Rule pack (YAML file, or a shipped pack: default, secrets, pii); "
    "repeatable.")]
Threshold = Annotated[float | None, typer.Option(
    help="Gate threshold in [0, 1]; fires below it. [default: 0.6]")]
SensitiveTags = Annotated[list[str] | None, typer.Option(
    "--sensitive-tag", "-t", help="A tag that fires the gate; repeatable.")]
Model = Annotated[str | None, typer.Option(help="Model for reflection.")]
BaseURL = Annotated[str | None, typer.Option(help="OpenAI-compatible API base URL.")]
KeyEnv = Annotated[str | None, typer.Option(
    help="Variable holding the API key. [default: CRITIC_API_KEY, OPENAI_API_KEY]")]
Reflect = Annotated[bool | None, typer.Option(
    "--reflect/--no-reflect", help="Ask the model when the gate fires.", show_default=False)]
Timeout = Annotated[float | None, typer.Option(help="Seconds per attempt. [default: 60]")]
Retries = Annotated[int | None, typer.Option(
    help="Retries on 429, 5xx and timeouts. [default: 2]")]
ResponseFormat = Annotated[str | None, typer.Option(
    help="auto|json_schema|json_object|none. [default: auto]")]
Template = Annotated[str | None, typer.Option(help="System prompt template with $placeholders.")]
TopK = Annotated[int | None, typer.Option(
    help="Procedural rules sent with the call. [default: 5]")]
Temperature = Annotated[float | None, typer.Option(help="[default: 0]")]
FailOn = Annotated[str | None, typer.Option(
    help="Exit 1 at this verdict or above: approve|flagged|revise|refuse|never. "
    "[default: revise]")]
Jobs = Annotated[int | None, typer.Option(
    "--jobs", "-j", help="Concurrent model calls (and processes for a large gate-only run). "
    "[default: 8]")]
Glob = Annotated[list[str] | None, typer.Option(
    help="File pattern inside directories; repeatable. [default: *.txt, *.md]")]
CacheDir = Annotated[str | None, typer.Option(help="Reply cache directory.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")]
Offline = Annotated[bool, typer.Option(
    "--offline", help="Use cached replies only; a miss is an error.")]
MaxBytes = Annotated[int | None, typer.Option(
    help="Largest draft accepted, in bytes. [default: 1048576]")]
Output = Annotated[str | None, typer.Option(
    "--output", "-o", help="Write the report to FILE (atomically).")]
Config = Annotated[str | None, typer.Option(
    help="Config file. [default: the nearest .critic.yaml]")]
NoConfig = Annotated[bool, typer.Option("--no-config", help="Ignore .critic.yaml.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Diagnostics on stderr.")]


def _settings(*, sensitive_tag: list[str] | None = None, no_cache: bool = False,
              offline: bool = False, **given: Any) -> dict[str, Any]:
    """Return the review settings given as flags (None: not given) under their config names."""
    return dict(given, sensitive_tags=sensitive_tag, cache=False if no_cache else None,
                offline=True if offline else None)


@app.command()
def review(
    paths: Paths = None,
    activation: Activation = None,
    rules: Rules = None,
    threshold: Threshold = None,
    sensitive_tag: SensitiveTags = None,
    model: Model = None,
    base_url: BaseURL = None,
    api_key_env: KeyEnv = None,
    reflect: Reflect = None,
    timeout: Timeout = None,
    max_retries: Retries = None,
    response_format: ResponseFormat = None,
    prompt_template: Template = None,
    top_k: TopK = None,
    temperature: Temperature = None,
    output_format: Annotated[str | None, typer.Option(
        "--format", "-f", help=f"{FORMAT_NAMES}. [default: text on a terminal, else json; "
        "jsonl for several drafts]")] = None,
    output: Output = None,
    apply: Annotated[bool, typer.Option(
        "--apply", help="Print the final text: the draft, the revision or the refusal.")
    ] = False,
    fail_on: FailOn = None,
    jobs: Jobs = None,
    jsonl: JSONL = None,
    glob: Glob = None,
    cache_dir: CacheDir = None,
    no_cache: NoCache = False,
    offline: Offline = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the requests that would be sent; call nothing.")] = False,
    max_bytes: MaxBytes = None,
    config: Config = None,
    no_config: NoConfig = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress or summary.")
    ] = False,
    verbose: Verbose = False,
) -> None:
    """Review drafts: gate, checks, and (when the gate fires) one model call."""
    from critic_cli import session

    flags = _settings(
        model=model, base_url=base_url, api_key_env=api_key_env, threshold=threshold,
        sensitive_tag=sensitive_tag, rules=rules, fail_on=fail_on, top_k=top_k, jobs=jobs,
        timeout=timeout, max_retries=max_retries, response_format=response_format,
        prompt_template=prompt_template, temperature=temperature, reflect=reflect,
        max_bytes=max_bytes, glob=glob, cache_dir=cache_dir, no_cache=no_cache,
        offline=offline,
    )
    request = session.Request(
        paths=paths or [], activation=activation, jsonl=jsonl, output_format=output_format,
        output=output, apply=apply, dry_run=dry_run, quiet=quiet, verbose=verbose,
        config=config, use_config=not no_config,
    )
    raise typer.Exit(session.review(flags, request))


@app.command()
def explain(
    activation: Annotated[str | None, typer.Option(
        "--activation", "-a", help="Activation log (JSON); - for stdin.")] = None,
    threshold: Threshold = None,
    sensitive_tag: SensitiveTags = None,
    rules: Annotated[list[str] | None, typer.Option(
        "--rules", "-r", help="Rule pack whose tags count; repeatable.")] = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="text|json")] = "text",
    config: Config = None,
    no_config: NoConfig = False,
) -> None:
    """Show the gate's arithmetic for an activation log, step by step."""
    from critic_cli import session

    flags = dict(threshold=threshold, sensitive_tags=sensitive_tag, rules=rules)
    sys.stdout.write(session.explain(flags, activation, output_format, config, not no_config))


eval_app = typer.Typer(rich_markup_mode=None, add_completion=False)


@eval_app.command("eval")
def eval_(
    cases: Annotated[str, typer.Argument(help="Cases file (YAML): labeled drafts.",
                                         show_default=False)],
    rules: Rules = None,
    threshold: Threshold = None,
    sensitive_tag: SensitiveTags = None,
    model: Model = None,
    base_url: BaseURL = None,
    api_key_env: KeyEnv = None,
    reflect: Reflect = None,
    timeout: Timeout = None,
    max_retries: Retries = None,
    response_format: ResponseFormat = None,
    prompt_template: Template = None,
    top_k: TopK = None,
    temperature: Temperature = None,
    jobs: Jobs = None,
    cache_dir: CacheDir = None,
    no_cache: NoCache = False,
    offline: Offline = False,
    max_bytes: MaxBytes = None,
    min_accuracy: Annotated[float | None, typer.Option(
        help="Exit 1 when accuracy is below this, in [0, 1].")] = None,
    max_false_approvals: Annotated[int | None, typer.Option(
        help="Exit 1 when more cases expecting revise or refuse are approved.")] = None,
    baseline: Annotated[str | None, typer.Option(
        help="An earlier --format json report: show what got better and worse.")] = None,
    output_format: Annotated[str | None, typer.Option(
        "--format", "-f", help="text|json|junit|markdown. [default: text on a terminal, "
        "else json]")] = None,
    output: Output = None,
    config: Config = None,
    no_config: NoConfig = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    verbose: Verbose = False,
) -> None:
    """Score critic on labeled drafts: accuracy, confusion matrix, misses; gates for CI."""
    from critic_cli import evaluate

    flags = _settings(
        model=model, base_url=base_url, api_key_env=api_key_env, threshold=threshold,
        sensitive_tag=sensitive_tag, rules=rules, top_k=top_k, jobs=jobs, timeout=timeout,
        max_retries=max_retries, response_format=response_format,
        prompt_template=prompt_template, temperature=temperature, reflect=reflect,
        max_bytes=max_bytes, cache_dir=cache_dir, no_cache=no_cache, offline=offline,
    )
    request = evaluate.Request(
        cases=cases, output_format=output_format, output=output, min_accuracy=min_accuracy,
        max_false_approvals=max_false_approvals, baseline=baseline, quiet=quiet,
        verbose=verbose, config=config, use_config=not no_config,
    )
    raise typer.Exit(evaluate.main(flags, request))


@rules_app.command("check")
def rules_check(
    files: Annotated[list[str], typer.Argument(help="Rule pack files.", show_default=False)],
) -> None:
    """Validate rule packs: every problem as file:line: key: reason."""
    from critic_cli.rules import load_pack

    failed = False
    ids: dict[str, str] = {}
    for path in files:
        try:
            pack = load_pack(path)
        except CriticError as exc:
            _error(exc.message)
            failed = True
            continue
        clashes = [rule for rule in pack.rules if rule.id in ids]
        for rule in clashes:
            where = f"{path}:{rule.line}" if rule.line else path
            _error(f"{where}: rules: duplicate rule id {rule.id!r} (also in {ids[rule.id]})")
        for rule in pack.rules:
            ids.setdefault(rule.id, path)
        if clashes:
            failed = True
            continue
        sys.stdout.write(f"ok {path}: {len(pack.preferences)} preferences, {len(pack.rules)} "
                         f"rules, {len(pack.checks)} checks\n")
    raise typer.Exit(2 if failed else 0)


@app.command()
def schema() -> None:
    """Print the JSON Schema of the record."""
    from critic_cli.record import json_schema

    sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")


@app.command()
def init(
    directory: Annotated[str, typer.Argument(help="Where to write the files.")] = ".",
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
) -> None:
    """Write a starter .critic.yaml and rule pack."""
    from critic_cli import starter

    for path in starter.write(directory, force=force):
        sys.stdout.write(f"wrote {path}\n")


# -- batch inference engines ----------------------------------------------------------------

batch_app = typer.Typer(
    help="Review millions of drafts on a batch inference engine: prepare, submit, status, "
    "fetch, collect.", no_args_is_help=True, rich_markup_mode=None)


@batch_app.command("prepare")
def batch_prepare(
    paths: Paths = None,
    jsonl: JSONL = None,
    output: Annotated[str, typer.Option(
        "--output", "-o", help="First request file; more are NAME.001.jsonl, ...")
    ] = "requests.jsonl",
    state: Annotated[str | None, typer.Option(
        help="State file for collect. [default: OUTPUT.state.jsonl]")] = None,
    max_lines: Annotated[int, typer.Option(help="Requests per file at most.")] = 50_000,
    max_bytes: Annotated[int, typer.Option(help="Bytes per request file at most.")
    ] = 200_000_000,
    activation: Activation = None,
    rules: Rules = None,
    threshold: Threshold = None,
    sensitive_tag: SensitiveTags = None,
    model: Model = None,
    base_url: Annotated[str | None, typer.Option(
        help="Base URL the replies are cached under (as critic review would).")] = None,
    response_format: Annotated[str | None, typer.Option(
        help="auto|json_schema|json_object|none; the first one auto tries is sent. "
        "[default: auto]")] = None,
    prompt_template: Template = None,
    top_k: TopK = None,
    temperature: Temperature = None,
    fail_on: Annotated[str | None, typer.Option(
        help="Kept for collect: approve|flagged|revise|refuse|never. [default: revise]")
    ] = None,
    glob: Glob = None,
    cache_dir: CacheDir = None,
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", help="Send every draft; collect fills no cache.")] = False,
    max_draft_bytes: Annotated[int | None, typer.Option(
        help="Largest draft accepted, in bytes. [default: 1048576]")] = None,
    config: Config = None,
    no_config: NoConfig = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")
    ] = False,
) -> None:
    """Decide drafts locally; write Batch API request lines for the rest, and a state file."""
    from critic_cli import batch

    flags = _settings(
        model=model, base_url=base_url, threshold=threshold, sensitive_tag=sensitive_tag,
        rules=rules, fail_on=fail_on, top_k=top_k, response_format=response_format,
        prompt_template=prompt_template, temperature=temperature, max_bytes=max_draft_bytes,
        glob=glob, cache_dir=cache_dir, no_cache=no_cache,
    )
    request = batch.PrepareRequest(
        paths=paths or [], activation=activation, jsonl=jsonl, output=output, state=state,
        max_lines=max_lines, max_bytes=max_bytes, config=config, use_config=not no_config)
    done = batch.prepare(flags, request)
    sys.stdout.write("".join(f"{path}\n" for path in done.files))
    for path in done.stale:
        _note(f"warning: {path} is left from an earlier prepare; it is not part of "
                    "this batch")
    if not quiet:
        files = f"{len(done.files)} file{'s' if len(done.files) != 1 else ''}"
        _note(f"{done.inputs} drafts: {done.decided} decided locally ({done.cached} from "
                    f"the cache), {done.pending} requests in {files}; state in {done.state}")


def _note(message: str) -> None:
    sys.stderr.write(f"critic: {message}\n")


@batch_app.command("collect")
def batch_collect(
    state: Annotated[str, typer.Option(help="The state file prepare wrote.",
                                       show_default=False)],
    results: Annotated[list[str] | None, typer.Argument(
        help="The engine's output and error files (JSONL).", show_default=False)] = None,
    output_format: Annotated[str | None, typer.Option(
        "--format", "-f", help=f"{FORMAT_NAMES}. [default: text on a terminal, else jsonl]")
    ] = None,
    output: Output = None,
    fail_on: Annotated[str | None, typer.Option(
        help="Exit 1 at this verdict or above. [default: as prepared]")] = None,
    cache_dir: Annotated[str | None, typer.Option(
        help="Cache the valid replies here. [default: as prepared]")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Cache nothing.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress or summary.")
    ] = False,
    verbose: Verbose = False,
) -> None:
    """Merge the engine's results with the state: every record, in input order."""
    from critic_cli import batch

    request = batch.CollectRequest(
        results=results or [], state=state, output_format=output_format, output=output,
        fail_on=fail_on, cache_dir=cache_dir, use_cache=not no_cache, quiet=quiet,
        verbose=verbose)
    raise typer.Exit(batch.collect(request))


@batch_app.command("submit")
def batch_submit(
    files: Annotated[list[str], typer.Argument(help="Request files from prepare.",
                                               show_default=False)],
    base_url: BaseURL = None,
    api_key_env: KeyEnv = None,
    timeout: Timeout = None,
    max_retries: Retries = None,
    config: Config = None,
    no_config: NoConfig = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the batch ids.")
    ] = False,
) -> None:
    """Upload request files and start one batch each; print the batch ids."""
    from critic_cli import batch

    flags = dict(base_url=base_url, api_key_env=api_key_env, timeout=timeout,
                 max_retries=max_retries)
    ids = batch.submit(flags, files, config=config, use_config=not no_config, quiet=quiet)
    sys.stdout.write("".join(f"{batch_id}\n" for batch_id in ids))


@batch_app.command("status")
def batch_status(
    batch_ids: Annotated[list[str], typer.Argument(help="Batch ids.", show_default=False)],
    wait: Annotated[bool, typer.Option(
        "--wait", help="Poll until every batch is done; progress on stderr.")] = False,
    interval: Annotated[float, typer.Option(help="Seconds between polls.")] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per batch.")
    ] = False,
    base_url: BaseURL = None,
    api_key_env: KeyEnv = None,
    timeout: Timeout = None,
    max_retries: Retries = None,
    config: Config = None,
    no_config: NoConfig = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress.")] = False,
) -> None:
    """Show batches' status; exit 3 when one failed, expired or was cancelled."""
    from critic_cli import batch

    flags = dict(base_url=base_url, api_key_env=api_key_env, timeout=timeout,
                 max_retries=max_retries)
    text, code = batch.status(flags, batch_ids, wait=wait, interval=interval, as_json=as_json,
                              config=config, use_config=not no_config, quiet=quiet)
    sys.stdout.write(text)
    raise typer.Exit(code)


@batch_app.command("fetch")
def batch_fetch(
    batch_ids: Annotated[list[str], typer.Argument(help="Batch ids.", show_default=False)],
    output: Annotated[str, typer.Option(
        "--output", "-o", help="Directory for ID.output.jsonl and ID.errors.jsonl.")] = ".",
    base_url: BaseURL = None,
    api_key_env: KeyEnv = None,
    timeout: Timeout = None,
    max_retries: Retries = None,
    config: Config = None,
    no_config: NoConfig = False,
) -> None:
    """Download batches' output and error files; print their paths."""
    from critic_cli import batch

    flags = dict(base_url=base_url, api_key_env=api_key_env, timeout=timeout,
                 max_retries=max_retries)
    paths = batch.fetch(flags, batch_ids, output, config=config, use_config=not no_config)
    sys.stdout.write("".join(f"{path}\n" for path in paths))


_LAZY: dict[str, typer.Typer] = {"eval": eval_app, "batch": batch_app}


def main() -> None:
    """Run the critic command line."""
    app()
