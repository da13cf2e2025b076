"""One draft → one record; many drafts → records in input order, reflection concurrent.

The flow is inputs → gate → checks → reflection → record. Everything up to reflection is
local and synchronous; only drafts that need the model become asyncio tasks, so a gate-only
run never starts an event loop and never imports ``openai``.
"""

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from critic_cli import checks as checks_module
from critic_cli import signals
from critic_cli.config import Settings
from critic_cli.errors import CriticError, ReflectionError
from critic_cli.inputs import BadInput, Draft, Item, resolve_item
from critic_cli.record import Gate, Record, Reflection, Summary, most_severe
from critic_cli.rules import Rule, Ruleset, load_packs, retrieve

if TYPE_CHECKING:
    from critic_cli.cache import Cache
    from critic_cli.provider import ProviderSettings
    from critic_cli.reflection import PromptTemplate


class Plan(NamedTuple):
    """What every draft of one run is reviewed against, loaded once."""

    settings: Settings
    ruleset: Ruleset
    tags: frozenset[str]
    template: "PromptTemplate | None" = None
    provider: "ProviderSettings | None" = None
    cache: "Cache | None" = None
    checks: tuple[Rule, ...] = ()

    @property
    def reflects(self) -> bool:
        """Return True when a gate that fires leads to a model call."""
        return self.provider is not None


def plan(settings: Settings) -> Plan:
    """Load rule packs, the prompt template and the provider settings for ``settings``."""
    ruleset = load_packs(settings.rules)
    tags = ruleset.gate_tags(settings.sensitive_tags)
    if settings.prompt_template:  # checked even when no call is made: a bad file is an error
        from critic_cli.reflection import PromptTemplate

        template = PromptTemplate.from_file(settings.prompt_template)
    if not (settings.reflect and settings.model):
        return Plan(settings, ruleset, tags, checks=ruleset.checks)
    from critic_cli.cache import Cache
    from critic_cli.config import default_cache_dir
    from critic_cli.provider import ProviderSettings
    from critic_cli.reflection import PromptTemplate

    if not settings.prompt_template:
        template = PromptTemplate.default()
    provider = ProviderSettings(
        model=settings.model,
        base_url=settings.base_url,
        api_key=settings.api_key,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        response_format=settings.response_format,
        temperature=settings.temperature,
        seed=settings.seed,
    )
    use_cache = settings.cache or settings.offline
    cache = Cache(settings.cache_dir or default_cache_dir()) if use_cache else None
    return Plan(settings, ruleset, tags, template, provider, cache, ruleset.checks)


class Assessment(NamedTuple):
    """A draft after the gate and the checks: final, or waiting for the model."""

    draft: Draft
    confidence: float
    hit: str | None
    gate: Gate
    hits: list[checks_module.Hit]
    text: str
    messages: list[dict[str, str]] = []  # read-only
    rules_used: tuple[str, ...] = ()

    @property
    def check_verdict(self) -> str:
        """Return the verdict the checks alone reach: approve, revise or refuse."""
        actions = {hit.action for hit in self.hits}
        return "refuse" if "refuse" in actions else "revise" if "revise" in actions else "approve"


def assess(plan: Plan, draft: Draft) -> Assessment:
    """Run the gate and the checks on one draft."""
    settings = plan.settings
    confidence = signals.compute_confidence(draft.activation)
    hit = signals.detect_sensitive_hit(draft.activation, plan.tags)
    rules = plan.checks
    hits = checks_module.run_checks(draft.text, rules) if rules else []
    flagged = any(h.action == "flag" for h in hits)
    fired = signals.critic_gate_fires(confidence, hit, settings.threshold) or flagged
    reason = ("sensitive_tag" if hit is not None else "rule" if flagged
              else "low_confidence" if fired else None)
    text = (checks_module.redact(draft.text, hits, rules)
            if any(h.action == "revise" for h in hits) else draft.text)
    return Assessment(draft, confidence, hit, Gate(fired, reason, settings.threshold), hits,
                      text)


def needs_model(plan: Plan, assessment: Assessment) -> bool:
    """Return True when the draft goes to the model: the gate fired and nothing refused it."""
    return plan.reflects and assessment.gate.fired and assessment.check_verdict != "refuse"


def prepare_messages(plan: Plan, assessment: Assessment) -> Assessment:
    """Return the assessment with the messages for the model call and the rules they carry."""
    from critic_cli.reflection import build_messages

    assert plan.template is not None
    names = " ".join(str(node.get("name") or node.get("id") or "")
                     for node in assessment.draft.activation.get("activated_nodes") or [])
    rules = retrieve(plan.ruleset, f"{assessment.text}\n{names}", plan.settings.top_k)
    messages = build_messages(
        plan.template, assessment.text, plan.ruleset.preferences,
        [rule.content for rule in rules], assessment.hit or _flag_rule(assessment),
        assessment.confidence,
    )
    return assessment._replace(messages=messages, rules_used=tuple(rule.id for rule in rules))


def _flag_rule(assessment: Assessment) -> str | None:
    for hit in assessment.hits:
        if hit.action == "flag":
            return f"rule:{hit.rule}"
    return None


class Outcome(NamedTuple):
    """What the model said, or why it could not say it."""

    verdict: str
    text: str | None = None
    matched: tuple[str, ...] = ()
    error: str | None = None
    cached: bool = False
    latency_ms: float = 0.0


def finish(plan: Plan, a: Assessment, outcome: Outcome | None = None) -> Record:
    """Combine the gate, the checks and the model's outcome into the draft's record."""
    settings = plan.settings
    check_verdict = a.check_verdict
    base: dict[str, Any] = dict(
        confidence_before=a.confidence, sensitive_tag_hit=a.hit, source=a.draft.source,
        gate=a.gate, checks=tuple(hit.to_dict() for hit in a.hits), draft=a.draft.text,
    )
    redacted = a.text if check_verdict == "revise" else None
    if check_verdict == "refuse":
        message = next((h.message for h in a.hits if h.action == "refuse" and h.message),
                       settings.refusal_message)
        return Record(verdict="refuse", refusal_message=message, **base)
    if outcome is None:
        verdict = most_severe("flagged" if a.gate.fired else "approve", check_verdict)
        return Record(verdict=verdict, revised_draft=redacted, **base)
    reflection = Reflection(ran=True, model=settings.model, cached=outcome.cached,
                            error=outcome.error)
    common = dict(base, reflection=reflection, rules_used=a.rules_used,
                  reflection_latency_ms=round(outcome.latency_ms, 3),
                  matched_preferences=outcome.matched)
    if outcome.error is not None:
        return Record(verdict="error", error=outcome.error, **common)
    if outcome.verdict == "refuse":
        return Record(verdict="refuse", refusal_message=outcome.text, **common)
    if outcome.verdict == "revise":
        return Record(verdict="revise", revised_draft=outcome.text, **common)
    return Record(verdict=most_severe("approve", check_verdict), revised_draft=redacted,
                  **common)


def bad_input_record(plan: Plan, item: BadInput) -> Record:
    """Return the record of an input that could not be read: verdict error, gate unknown."""
    gate = Gate(False, None, plan.settings.threshold)
    return Record(verdict="error", confidence_before=signals.COLD_START, sensitive_tag_hit=None,
                  source=item.source, gate=gate, error=item.reason)


# -- the model call -------------------------------------------------------------------------


class Reflector:
    """Ask the model about assessed drafts, through the cache; one client per run."""

    def __init__(self, plan: Plan) -> None:
        from critic_cli.provider import Provider, request_body

        assert plan.provider is not None
        self.plan = plan
        self.settings = plan.provider
        self._provider: Provider | None = None
        self._provider_class = Provider
        self._request_body = request_body

    def key(self, messages: list[dict[str, str]]) -> str:
        """Return the cache key of the request these messages make."""
        from critic_cli.cache import cache_key

        body = self._request_body(self.settings, messages, "none")
        return cache_key(self.settings.base_url, body, self.settings.response_format)

    def cached(self, key: str) -> Outcome | None:
        """Return the outcome of the cached reply for ``key``, if one is there and parses."""
        from critic_cli.reflection import parse_reply

        cache = self.plan.cache
        if cache is None:
            return None
        start = time.perf_counter()
        completion = cache.get(key)
        if completion is None:
            return None
        try:
            verdict = parse_reply(completion, self.plan.ruleset.preferences,
                                  self.plan.settings.refusal_message)
        except ReflectionError:
            return None  # an entry that no longer parses is a miss
        return _outcome(verdict, start, cached=True)

    async def ask(self, assessment: Assessment) -> Outcome:
        """Return the model's outcome for one assessed draft; failures become errors."""
        from critic_cli.reflection import parse_reply

        preferences = self.plan.ruleset.preferences
        refusal = self.plan.settings.refusal_message
        cache = self.plan.cache
        start = time.perf_counter()
        key = self.key(assessment.messages) if cache is not None else ""
        try:
            hit = self.cached(key)
            if hit is not None:
                return hit
            if self.plan.settings.offline:
                raise ReflectionError("offline: no cached reply for this draft")
            if self._provider is None:
                self._provider = self._provider_class(self.settings)
                self._provider.connect()  # the one-off openai import is not this call's latency
                start = time.perf_counter()
            completion, _kind = await self._provider.complete(assessment.messages)
            verdict = parse_reply(completion, preferences, refusal)
            if cache is not None:
                cache.put(key, completion)
            return _outcome(verdict, start)
        except CriticError as exc:
            return Outcome("error", error=exc.message,
                           latency_ms=(time.perf_counter() - start) * 1000)

    async def aclose(self) -> None:
        """Close the client, if one was opened."""
        if self._provider is not None:
            await self._provider.aclose()


def _outcome(verdict: Any, start: float, *, cached: bool = False) -> Outcome:
    return Outcome(verdict.verdict, verdict.text, tuple(verdict.matched_preferences),
                   cached=cached, latency_ms=(time.perf_counter() - start) * 1000)


# -- running ---------------------------------------------------------------------------------


def triage(plan: Plan, item: Item) -> Record | Assessment:
    """Return the record when no model call is needed, else the assessment to send."""
    draft = resolve_item(item)
    if isinstance(draft, BadInput):
        return bad_input_record(plan, draft)
    assessment = assess(plan, draft)
    if not needs_model(plan, assessment):
        return finish(plan, assessment)
    return prepare_messages(plan, assessment)


def decide(plan: Plan, item: Item) -> Record:
    """Return the record of a draft decided without the model (a gate-only plan)."""
    result = triage(plan, item)
    assert isinstance(result, Record), "decide() is for plans that make no model call"
    return result


def run_rendered(plan: Plan, items: Iterable[Item], render: Callable[[Record], str],
                 write: Callable[[str, str], None]) -> Summary:
    """Gate-only: render each record where it is decided, then ``write(verdict, text)`` in order.

    For stateless formats (JSON Lines): with many drafts the records are rendered in the worker
    processes, so only their text comes back.
    """
    from critic_cli import parallel

    assert not plan.reflects, "run_rendered() is for plans that make no model call"
    summary = Summary()
    for verdict, text in parallel.rendered(plan, items, parallel.workers_for(plan.settings),
                                           render):
        summary.verdicts[verdict] += 1
        write(verdict, text)
    summary.seconds = time.perf_counter() - summary.started
    return summary


def run(plan: Plan, items: Iterable[Item], emit: Callable[[Record], None]) -> Summary:
    """Review every item, calling ``emit`` with each record in input order."""
    summary = Summary()
    if not plan.reflects:
        from critic_cli import parallel

        for record in parallel.records(plan, items, parallel.workers_for(plan.settings)):
            summary.add(record)
            emit(record)
    else:
        import asyncio

        asyncio.run(_run_concurrently(plan, items, emit, summary))
    summary.seconds = time.perf_counter() - summary.started
    return summary


async def _run_concurrently(
    plan: Plan, items: Iterable[Item], emit: Callable[[Record], None], summary: Summary
) -> None:
    import asyncio

    jobs = plan.settings.jobs
    limit = asyncio.Semaphore(jobs)
    reflector = Reflector(plan)
    window: deque[asyncio.Task[Record] | Record] = deque()
    most_pending = max(64, jobs * 8)

    async def reflect(assessment: Assessment) -> Record:
        async with limit:
            return finish(plan, assessment, await reflector.ask(assessment))

    async def flush(wait: bool) -> None:
        while window:
            head = window[0]
            if isinstance(head, asyncio.Task):
                if not head.done() and not wait:
                    return
                record = await head
            else:
                record = head
            window.popleft()
            summary.add(record)
            emit(record)
            if wait and len(window) < most_pending:
                return

    try:
        for item in items:
            result = triage(plan, item)
            if isinstance(result, Assessment):
                window.append(asyncio.ensure_future(reflect(result)))
                await asyncio.sleep(0)  # let the call start while the next draft is triaged
            else:
                window.append(result)
            await flush(wait=len(window) >= most_pending)
        while window:
            await flush(wait=True)
    finally:
        for entry in window:
            if isinstance(entry, asyncio.Task):
                entry.cancel()
        await reflector.aclose()


def review_all(plan: Plan, items: Iterable[Item]) -> list[Record]:
    """Review every item and return the records in input order."""
    records: list[Record] = []
    run(plan, items, records.append)
    return records


def review(text: str, activation: dict[str, Any] | None = None,
           settings: Settings | None = None, source: str = "<draft>") -> Record:
    """Review one draft held in memory; the library's front door."""
    from critic_cli.inputs import validate_log

    log = validate_log(activation, source) if activation else {}
    return review_all(plan(settings or Settings()), [Draft(source, text, log)])[0]


def requests(plan: Plan, items: Iterable[Item]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (source, request body) for each draft that would go to the model (dry run)."""
    from critic_cli.provider import request_body, response_kinds

    assert plan.provider is not None
    kind = response_kinds(plan.provider.response_format)[0]
    for item in items:
        result = triage(plan, item)
        if isinstance(result, Assessment):
            yield result.draft.source, request_body(plan.provider, result.messages, kind)
