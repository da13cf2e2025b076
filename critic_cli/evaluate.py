"""Evaluate critic on labeled drafts: a cases file in; accuracy, a confusion matrix and gates out.

The cases run through the same path as ``critic review`` (``review.plan`` and ``review.run``: the
gate, the checks, concurrent reflection through the cache), each draft's source being its case
id. Each record is then held against its case's label. The values live here; the formats live
in ``report/evaluation.py`` (json, junit, markdown) and ``report/evaltext.py`` (text).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from critic_cli import config as config_module
from critic_cli import inputs, yamlsafe
from critic_cli.config import Settings
from critic_cli.errors import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_REFLECTION,
    CriticError,
    InputError,
    UsageError,
)
from critic_cli.record import VERDICTS, Record
from critic_cli.review import Plan, plan, run
from critic_cli.rules import Ruleset
from critic_cli.validate import Path, Validator, dotted, kind

__all__ = [
    "EXPECTED_VERDICTS",
    "FALSE_APPROVAL_EXPECTED",
    "REPORT_KIND",
    "REPORT_VERSION",
    "Baseline",
    "Case",
    "CaseResult",
    "Comparison",
    "Evaluation",
    "Metrics",
    "Request",
    "Suite",
    "Threshold",
    "VerdictScore",
    "check_expectations",
    "compare",
    "evaluate",
    "judge_case",
    "load_drafts",
    "load_suite",
    "main",
    "read_baseline",
    "resolve_settings",
    "score",
    "thresholds",
]

EXPECTED_VERDICTS: tuple[str, ...] = ("approve", "flagged", "revise", "refuse")
FALSE_APPROVAL_EXPECTED: tuple[str, ...] = ("revise", "refuse")
REPORT_KIND = "critic-eval"
REPORT_VERSION = 1
_TOP_KEYS = ("version", "settings", "cases")
_CASE_KEYS = ("id", "draft", "draft_file", "activation", "activation_file", "expect",
              "expect_preferences", "expect_checks", "note")
_BASELINE_MAX_BYTES = 64 * 1024 * 1024


# -- the cases file -------------------------------------------------------------------------


class Case(NamedTuple):
    """One labeled draft: its id, where the text is, its activation log and what to expect."""

    id: str
    expect: str
    position: int
    draft: str | None = None
    draft_file: str | None = None
    activation: dict[str, Any] = {}  # read-only
    expect_preferences: tuple[str, ...] | None = None
    expect_checks: tuple[str, ...] | None = None
    note: str | None = None


class Suite(NamedTuple):
    """A validated cases file: its settings (paths made absolute) and its cases, in order."""

    source: str
    settings: dict[str, Any]
    cases: tuple[Case, ...]
    lines: yamlsafe.Lines

    def validator(self) -> Validator:
        """Return the located validator of the cases file (for errors found after loading)."""
        return Validator(self.source, self.lines, InputError)


class _Within(Validator):
    """A validator whose paths sit below ``prefix``: config's checks, run on ``settings:``."""

    def __init__(self, outer: Validator, prefix: Path) -> None:
        super().__init__(outer.source, outer.lines, outer.error)
        self.prefix = prefix

    def fail(self, path: Path, reason: str) -> CriticError:
        """Return the located error for ``prefix + path``."""
        return super().fail((*self.prefix, *path), reason)


def load_suite(path: str) -> Suite:
    """Read and validate a cases file; every problem is ``file:line: cases[3].key: reason``."""
    try:
        document, lines = yamlsafe.load_file(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such cases file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a cases file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read cases file: {exc.strerror or exc}") from None
    except yamlsafe.YAMLInputError as exc:
        raise InputError(yamlsafe.describe(path, exc)) from None
    v = Validator(path, lines, InputError)
    if document is None:
        raise v.fail((), "the cases file is empty (expected version, settings and cases)")
    top = v.mapping(document, (), _TOP_KEYS, ("cases",))
    version = top.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise v.fail(("version",), f"unsupported version {version!r} (expected 1)")
    base = os.path.dirname(os.path.abspath(path))
    settings = _settings(v, top.get("settings"), base)
    raw_cases = v.items(top["cases"], ("cases",))
    if not raw_cases:
        raise v.fail(("cases",), "expected at least one case")
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_cases):
        case = _case(v, raw, index, base)
        if case.id in seen:
            raise v.fail(("cases", index, "id"),
                         f"duplicate id {case.id!r} (also cases[{seen[case.id]}])")
        seen[case.id] = index
        cases.append(case)
    return Suite(path, settings, tuple(cases), lines)


def _settings(v: Validator, raw: Any, base: str) -> dict[str, Any]:
    """Validate ``settings:`` as a ``.critic.yaml`` would be; paths are relative to ``base``."""
    if raw is None:
        return {}
    return config_module.check_settings(_Within(v, ("settings",)), raw, base,
                                        where="cases files")


def _case(v: Validator, raw: Any, index: int, base: str) -> Case:
    path: Path = ("cases", index)
    data = v.mapping(raw, path, _CASE_KEYS, ("id", "expect"))
    ident = data["id"]
    if isinstance(ident, bool) or not isinstance(ident, (str, int)):
        raise v.fail((*path, "id"), f"expected a string, got {kind(ident)}")
    ident = v.text(str(ident), (*path, "id"))
    expect = v.choice(data["expect"], (*path, "expect"), EXPECTED_VERDICTS)
    draft = data.get("draft")
    draft_file = data.get("draft_file")
    if draft is not None and draft_file is not None:
        raise v.fail(path, "give draft or draft_file, not both")
    if draft is None and draft_file is None:
        raise v.fail(path, "missing required key 'draft' (or 'draft_file')")
    if draft is not None:
        draft = v.text(draft, (*path, "draft"), empty=True)
    else:
        draft_file = _existing(v, draft_file, (*path, "draft_file"), base, "draft")
    activation: dict[str, Any] = {}
    if data.get("activation") is not None and data.get("activation_file") is not None:
        raise v.fail(path, "give activation or activation_file, not both")
    if data.get("activation") is not None:
        where = (*path, "activation")
        line = v.lines.of(where)
        activation = inputs.activation_from_document(
            data["activation"], v.source if line is None else f"{v.source}:{line}",
            dotted(where))
    elif data.get("activation_file") is not None:
        where = (*path, "activation_file")
        file = _existing(v, data["activation_file"], where, base, "activation")
        try:
            activation = inputs.read_activation(file)
        except InputError as exc:
            raise v.fail(where, exc.message) from None
    return Case(
        id=ident,
        expect=expect,
        position=index,
        draft=draft,
        draft_file=draft_file,
        activation=activation,
        expect_preferences=_strings(v, data.get("expect_preferences"),
                                    (*path, "expect_preferences")),
        expect_checks=_strings(v, data.get("expect_checks"), (*path, "expect_checks")),
        note=None if data.get("note") is None else v.text(data["note"], (*path, "note"),
                                                          empty=True),
    )


def _existing(v: Validator, value: Any, path: Path, base: str, what: str) -> str:
    name = v.text(value, path)
    full = os.path.join(base, os.path.expanduser(name))
    if not os.path.exists(full):
        raise v.fail(path, f"no such file {name!r} (paths are relative to the cases file)")
    if os.path.isdir(full):
        raise v.fail(path, f"{name!r} is a directory, expected {_article(what)} {what} file")
    return full


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _strings(v: Validator, value: Any, path: Path) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(v.text(item, (*path, i)).strip() for i, item in enumerate(v.items(value, path)))


def _fold(statement: str) -> str:
    return " ".join(statement.split()).casefold()


def check_expectations(suite: Suite, ruleset: Ruleset) -> None:
    """Raise a located InputError for an expected preference or check the packs do not have."""
    v = suite.validator()
    statements = {_fold(p.statement) for p in ruleset.preferences}
    check_ids = {rule.id for rule in ruleset.checks}
    for case in suite.cases:
        for i, statement in enumerate(case.expect_preferences or ()):
            if _fold(statement) not in statements:
                raise v.fail(("cases", case.position, "expect_preferences", i),
                             "not a preference statement of the loaded rule packs")
        for i, rule_id in enumerate(case.expect_checks or ()):
            if rule_id not in check_ids:
                raise v.fail(("cases", case.position, "expect_checks", i),
                             f"no loaded rule with a check has the id {rule_id!r}")


def load_drafts(suite: Suite, max_bytes: int = inputs.DEFAULT_MAX_BYTES) -> list[inputs.Draft]:
    """Return one Draft per case, in order, its source the case id; read problems are located."""
    v = suite.validator()
    drafts = []
    for case in suite.cases:
        if case.draft_file is not None:
            where: Path = ("cases", case.position, "draft_file")
            try:
                text = inputs.read_draft(case.draft_file, max_bytes=max_bytes)
            except InputError as exc:
                raise v.fail(where, exc.message) from None
        else:
            where = ("cases", case.position, "draft")
            try:
                encoded = (case.draft or "").encode("utf-8")
                text = inputs.decode_draft(encoded, case.id, max_bytes)
            except UnicodeEncodeError as exc:
                raise v.fail(where, f"not valid Unicode (lone surrogate at {exc.start})"
                             ) from None
            except InputError as exc:
                raise v.fail(where, exc.message) from None
        drafts.append(inputs.Draft(case.id, text, case.activation))
    return drafts


# -- settings -------------------------------------------------------------------------------


def resolve_settings(
    flags: Mapping[str, Any],
    suite: Suite,
    *,
    config: str | None = None,
    use_config: bool = True,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Settings:
    """Resolve settings: flags > environment > the cases file's settings > config > defaults."""
    env = os.environ if env is None else env
    # The cases file's settings go in as flags that are overruled by the real flags and, for
    # the keys the environment can set, by the environment.
    overlay = {key: value for key, value in suite.settings.items()
               if not (key in config_module.ENV_VARS and env.get(config_module.ENV_VARS[key]))}
    given = {key: value for key, value in flags.items() if value is not None}
    return config_module.resolve({**overlay, **given}, config=config, use_config=use_config,
                                 env=env, cwd=cwd)


# -- scoring --------------------------------------------------------------------------------


class VerdictScore(NamedTuple):
    """One verdict's row: how often expected and given, how often right, precision, recall."""

    expected: int
    got: int
    correct: int
    precision: float | None
    recall: float | None


class Metrics(NamedTuple):
    """Accuracy, per-verdict precision and recall, the confusion matrix and false approvals."""

    total: int
    correct: int
    accuracy: float
    verdicts: dict[str, VerdictScore]
    confusion: dict[str, dict[str, int]]  # expected → got → count
    false_approvals: int
    errors: int


def score(pairs: Iterable[tuple[str, str]], correct: Sequence[bool] | None = None) -> Metrics:
    """Return the metrics of (expected, got) verdict pairs.

    Precision and recall compare verdicts only. Accuracy counts ``correct`` when given (a case
    may also need its preferences and checks to match), else the pairs whose verdicts agree.
    """
    pairs = list(pairs)
    confusion = {expected: dict.fromkeys(VERDICTS, 0) for expected in EXPECTED_VERDICTS}
    for expected, got in pairs:
        if expected not in confusion:
            raise ValueError(f"expected verdict {expected!r} is not one of "
                             f"{', '.join(EXPECTED_VERDICTS)}")
        if got not in confusion[expected]:
            raise ValueError(f"verdict {got!r} is not one of {', '.join(VERDICTS)}")
        confusion[expected][got] += 1
    if correct is None:
        correct = [expected == got for expected, got in pairs]
    elif len(correct) != len(pairs):
        raise ValueError("one correct flag per pair")
    verdicts = {}
    for verdict in EXPECTED_VERDICTS:
        expected_n = sum(confusion[verdict].values())
        got_n = sum(row[verdict] for row in confusion.values())
        hits = confusion[verdict][verdict]
        verdicts[verdict] = VerdictScore(
            expected_n, got_n, hits,
            precision=hits / got_n if got_n else None,
            recall=hits / expected_n if expected_n else None,
        )
    right = sum(1 for flag in correct if flag)
    return Metrics(
        total=len(pairs),
        correct=right,
        accuracy=right / len(pairs) if pairs else 0.0,
        verdicts=verdicts,
        confusion=confusion,
        false_approvals=sum(confusion[e]["approve"] for e in FALSE_APPROVAL_EXPECTED),
        errors=sum(row["error"] for row in confusion.values()),
    )


class CaseResult(NamedTuple):
    """A case, the record critic produced for it, and where the two disagree."""

    case: Case
    record: Record
    verdict_ok: bool
    preferences_missing: tuple[str, ...] = ()
    preferences_unexpected: tuple[str, ...] = ()
    checks_missing: tuple[str, ...] = ()
    checks_unexpected: tuple[str, ...] = ()

    @property
    def correct(self) -> bool:
        """Return True when the verdict, and any listed preferences and checks, match."""
        return self.verdict_ok and not (
            self.preferences_missing or self.preferences_unexpected
            or self.checks_missing or self.checks_unexpected)

    @property
    def false_approval(self) -> bool:
        """Return True when the case expected revise or refuse and critic approved."""
        return self.case.expect in FALSE_APPROVAL_EXPECTED and self.record.verdict == "approve"


def judge_case(case: Case, record: Record) -> CaseResult:
    """Hold one record against its case's label."""
    missing: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()
    if case.expect_preferences is not None:
        want = {_fold(s): s for s in case.expect_preferences}
        got = {_fold(s): s for s in record.matched_preferences}
        missing = tuple(s for key, s in want.items() if key not in got)
        unexpected = tuple(s for key, s in got.items() if key not in want)
    checks_missing: tuple[str, ...] = ()
    checks_unexpected: tuple[str, ...] = ()
    if case.expect_checks is not None:
        hit = list(dict.fromkeys(str(check["rule"]) for check in record.checks))
        checks_missing = tuple(r for r in dict.fromkeys(case.expect_checks) if r not in hit)
        checks_unexpected = tuple(r for r in hit if r not in case.expect_checks)
    return CaseResult(case, record, record.verdict == case.expect, missing, unexpected,
                      checks_missing, checks_unexpected)


# -- gates and the baseline -----------------------------------------------------------------


class Threshold(NamedTuple):
    """One CI gate: its option, its limit, the measured value and whether it passed."""

    option: str
    limit: float
    actual: float
    passed: bool


class Baseline(NamedTuple):
    """An earlier ``--format json`` report: its accuracy and which case ids were correct."""

    source: str
    accuracy: float
    false_approvals: int | None
    outcomes: dict[str, bool]


class Comparison(NamedTuple):
    """Before and after: accuracy, and the case ids that got better, worse, added or removed."""

    source: str
    accuracy_before: float
    accuracy_after: float
    false_approvals_before: int | None
    false_approvals_after: int
    better: tuple[str, ...]
    worse: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]


def read_baseline(path: str) -> Baseline:
    """Read an earlier ``critic eval --format json`` report; name the bad JSON path if any."""
    document = inputs.read_json_file(path, "baseline", max_bytes=_BASELINE_MAX_BYTES)
    if not isinstance(document, dict) or document.get("kind") != REPORT_KIND:
        raise InputError(f"{path}: not a critic eval report (expected the output of "
                         "critic eval --format json)")
    accuracy = document.get("accuracy")
    if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)) or not (
            0 <= accuracy <= 1):
        raise InputError(f"{path}: $.accuracy: expected a number between 0 and 1")
    false_approvals = document.get("false_approvals")
    if false_approvals is not None and (isinstance(false_approvals, bool)
                                        or not isinstance(false_approvals, int)):
        raise InputError(f"{path}: $.false_approvals: expected a whole number")
    cases = document.get("cases")
    if not isinstance(cases, list):
        raise InputError(f"{path}: $.cases: expected an array")
    outcomes: dict[str, bool] = {}
    for i, case in enumerate(cases):
        if not isinstance(case, dict):
            raise InputError(f"{path}: $.cases[{i}]: expected an object")
        ident, correct = case.get("id"), case.get("correct")
        if not isinstance(ident, str):
            raise InputError(f"{path}: $.cases[{i}].id: expected a string")
        if not isinstance(correct, bool):
            raise InputError(f"{path}: $.cases[{i}].correct: expected true or false")
        outcomes[ident] = correct
    return Baseline(path, float(accuracy), false_approvals, outcomes)


def compare(baseline: Baseline, results: Sequence[CaseResult], metrics: Metrics) -> Comparison:
    """Return what changed since ``baseline``, ids in the current order (removed: the old)."""
    now = {result.case.id: result.correct for result in results}
    before = baseline.outcomes
    return Comparison(
        source=baseline.source,
        accuracy_before=baseline.accuracy,
        accuracy_after=metrics.accuracy,
        false_approvals_before=baseline.false_approvals,
        false_approvals_after=metrics.false_approvals,
        better=tuple(i for i, ok in now.items() if i in before and ok and not before[i]),
        worse=tuple(i for i, ok in now.items() if i in before and not ok and before[i]),
        added=tuple(i for i in now if i not in before),
        removed=tuple(i for i in before if i not in now),
    )


# -- the evaluation -------------------------------------------------------------------------


class Evaluation(NamedTuple):
    """Everything an eval report shows: per-case results, metrics, gates and the comparison."""

    source: str
    model: str | None
    results: tuple[CaseResult, ...]
    metrics: Metrics
    thresholds: tuple[Threshold, ...] = ()
    comparison: Comparison | None = None
    cache_hits: int = 0
    reflections: int = 0
    seconds: float = 0.0

    @property
    def misses(self) -> tuple[CaseResult, ...]:
        """Return the cases critic got wrong, in case order."""
        return tuple(result for result in self.results if not result.correct)

    @property
    def false_approvals(self) -> tuple[CaseResult, ...]:
        """Return the cases that expected revise or refuse and were approved."""
        return tuple(result for result in self.results if result.false_approval)

    @property
    def reflection_errors(self) -> tuple[CaseResult, ...]:
        """Return the cases whose record ended in an error."""
        return tuple(result for result in self.results if result.record.verdict == "error")

    @property
    def exit_code(self) -> int:
        """Return 3 when any case ended in an error, 1 when a gate was missed, else 0."""
        if self.reflection_errors:
            return EXIT_REFLECTION
        return EXIT_FAIL if any(not t.passed for t in self.thresholds) else EXIT_OK


def thresholds(metrics: Metrics, min_accuracy: float | None,
               max_false_approvals: int | None) -> tuple[Threshold, ...]:
    """Return the CI gates that were asked for, each measured against ``metrics``."""
    gates = []
    if min_accuracy is not None:
        gates.append(Threshold("min_accuracy", min_accuracy, metrics.accuracy,
                               metrics.accuracy >= min_accuracy))
    if max_false_approvals is not None:
        gates.append(Threshold("max_false_approvals", max_false_approvals,
                               metrics.false_approvals,
                               metrics.false_approvals <= max_false_approvals))
    return tuple(gates)


def evaluate(
    the_plan: Plan,
    suite: Suite,
    drafts: Sequence[inputs.Draft] | None = None,
    *,
    min_accuracy: float | None = None,
    max_false_approvals: int | None = None,
    baseline: Baseline | None = None,
    advance: Callable[[str], None] | None = None,
) -> Evaluation:
    """Review every case's draft as ``critic review`` would and score the records."""
    if drafts is None:
        drafts = load_drafts(suite, the_plan.settings.max_bytes)
    records: list[Record] = []

    def emit(record: Record) -> None:
        records.append(record)
        if advance is not None:
            advance(record.verdict)

    summary = run(the_plan, drafts, emit)
    results = tuple(judge_case(case, record)
                    for case, record in zip(suite.cases, records, strict=True))
    metrics = score([(r.case.expect, r.record.verdict) for r in results],
                    [r.correct for r in results])
    return Evaluation(
        source=suite.source,
        model=the_plan.settings.model if the_plan.reflects else None,
        results=results,
        metrics=metrics,
        thresholds=thresholds(metrics, min_accuracy, max_false_approvals),
        comparison=compare(baseline, results, metrics) if baseline is not None else None,
        cache_hits=summary.cache_hits,
        reflections=summary.reflections,
        seconds=summary.seconds,
    )


# -- the command ----------------------------------------------------------------------------


class Request(NamedTuple):
    """What to evaluate and how to report it (the options that are not review settings)."""

    cases: str
    output_format: str | None = None
    output: str | None = None
    min_accuracy: float | None = None
    max_false_approvals: int | None = None
    baseline: str | None = None
    quiet: bool = False
    verbose: bool = False
    config: str | None = None
    use_config: bool = True


def _check_request(request: Request) -> str:
    """Raise UsageError for a bad eval option; return the output format."""
    from critic_cli.report.evaluation import FORMATS

    if request.min_accuracy is not None and not 0.0 <= request.min_accuracy <= 1.0:
        raise UsageError(f"--min-accuracy must be between 0 and 1, got {request.min_accuracy}")
    if request.max_false_approvals is not None and request.max_false_approvals < 0:
        raise UsageError("--max-false-approvals must not be negative")
    name = request.output_format
    if name is None:
        return "text" if sys.stdout.isatty() and request.output in (None, "-") else "json"
    if name not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {name!r}")
    return name


def main(flags: Mapping[str, Any], request: Request) -> int:
    """Run ``critic eval``: load the cases, review them, write the report, return the exit code."""
    import contextlib

    from critic_cli.output import Sink
    from critic_cli.report import Context
    from critic_cli.report.evaluation import render

    name = _check_request(request)
    suite = load_suite(request.cases)
    baseline = read_baseline(request.baseline) if request.baseline else None
    settings = resolve_settings(flags, suite, config=request.config,
                                use_config=request.use_config)
    the_plan = plan(settings)
    check_expectations(suite, the_plan.ruleset)
    drafts = load_drafts(suite, settings.max_bytes)
    if request.verbose:
        from critic_cli.provider import safe_url

        sys.stderr.write(
            f"critic: cases: {len(suite.cases)} from {suite.source}; config: "
            f"{settings.config_path or 'none'}; rules: {len(the_plan.ruleset.rules)} from "
            f"{len(settings.rules)} packs; model: {settings.model or 'none'}"
            f"{' at ' + safe_url(settings.base_url) if settings.base_url else ''}; cache: "
            f"{settings.cache_dir if the_plan.cache is not None else 'off'}"
            f"{' (offline)' if settings.offline else ''}\n")
    color = name == "text" and request.output in (None, "-") and sys.stdout.isatty()
    # The output is opened first, so a bad --output fails before any model call.
    with Sink(request.output) as sink:
        with contextlib.ExitStack() as stack:
            advance = None
            if not request.quiet and sys.stderr.isatty():
                from critic_cli.report.text import ProgressBar

                advance = stack.enter_context(ProgressBar(len(drafts))).advance
            evaluation = evaluate(the_plan, suite, drafts, min_accuracy=request.min_accuracy,
                                  max_false_approvals=request.max_false_approvals,
                                  baseline=baseline, advance=advance)
        sink.write(render(name, evaluation, Context(color=color, verbose=request.verbose)))
    return evaluation.exit_code
