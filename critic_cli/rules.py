"""Rule packs: load and validate them, and retrieve the rules relevant to a draft.

A pack is YAML, version 1 (see the README): ``sensitive_tags``, ``preferences`` and ``rules``.
Every problem is reported as ``file:line: path.to.key: reason``.
"""

import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NamedTuple

from critic_cli import yamlsafe
from critic_cli.errors import RuleError, located
from critic_cli.validate import Validator

Action = Literal["refuse", "revise", "flag"]
ACTIONS: tuple[Action, ...] = ("refuse", "revise", "flag")
VALIDATORS = ("luhn",)
DEFAULT_REPLACEMENT = "[REDACTED]"
_RULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class Preference(NamedTuple):
    """One thing the draft must respect; higher priority first."""

    priority: float
    statement: str
    sensitive_tags: frozenset[str] = frozenset()


class Check(NamedTuple):
    """A deterministic pattern check, compiled once with RE2."""

    pattern: str
    action: Action
    regex: Any
    replace: str = DEFAULT_REPLACEMENT
    message: str | None = None
    ignore_case: bool = False
    validate: str | None = None


class Rule(NamedTuple):
    """A procedural rule; sent to reflection when relevant, or always."""

    id: str
    content: str
    always: bool = False
    check: Check | None = None
    source: str = ""
    line: int | None = None


class Ruleset(NamedTuple):
    """Every loaded pack merged: tags, preferences by priority, and rules in load order."""

    sensitive_tags: frozenset[str] = frozenset()
    preferences: tuple[Preference, ...] = ()
    rules: tuple[Rule, ...] = ()

    @property
    def checks(self) -> tuple[Rule, ...]:
        """Return the rules that carry a local check."""
        return tuple(rule for rule in self.rules if rule.check is not None)

    def gate_tags(self, extra: Iterable[str] = ()) -> frozenset[str]:
        """Return the sensitive tags: the packs', the preferences' and any given here."""
        tags = set(self.sensitive_tags) | set(extra)
        for preference in self.preferences:
            tags |= preference.sensitive_tags
        return frozenset(tags)


def compile_pattern(pattern: str, *, ignore_case: bool = False) -> Any:
    """Compile ``pattern`` with RE2; raise ValueError with RE2's reason when it cannot."""
    import re2  # imported here: only packs with checks pay for it

    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(f"pattern does not compile in RE2 (linear time, no backreferences "
                         f"or lookaround): {reason}") from None


def _check(v: Validator, raw: Any, path: tuple[str | int, ...]) -> Check:
    data = v.mapping(
        raw, path,
        ("pattern", "action", "replace", "message", "ignore_case", "validate"),
        ("pattern", "action"),
    )
    pattern = v.text(data["pattern"], (*path, "pattern"))
    action = data["action"]
    v.choice(action, (*path, "action"), ACTIONS)
    ignore_case = v.flag(data.get("ignore_case"), (*path, "ignore_case"))
    try:
        regex = compile_pattern(pattern, ignore_case=ignore_case)
    except ValueError as exc:
        raise v.fail((*path, "pattern"), str(exc)) from None
    replace = data.get("replace")
    if replace is not None and action != "revise":
        raise v.fail((*path, "replace"), "only a revise check replaces text")
    validate = data.get("validate")
    if validate is not None and validate not in VALIDATORS:
        raise v.fail((*path, "validate"), f"expected one of {', '.join(VALIDATORS)}")
    message = data.get("message")
    return Check(
        pattern=pattern,
        action=action,
        regex=regex,
        replace=DEFAULT_REPLACEMENT if replace is None else v.text(
            replace, (*path, "replace"), empty=True),
        message=None if message is None else v.text(message, (*path, "message")),
        ignore_case=ignore_case,
        validate=validate,
    )


def parse_pack(document: Any, lines: yamlsafe.Lines, source: str) -> Ruleset:
    """Validate a loaded pack document and return it as a Ruleset."""
    v = Validator(source, lines, RuleError)
    if document is None:
        document = {}
    top = v.mapping(document, (), ("version", "sensitive_tags", "preferences", "rules"))
    version = top.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise v.fail(("version",), f"unsupported version {version!r} (expected 1)")
    preferences = []
    for i, raw in enumerate(v.items(top.get("preferences"), ("preferences",))):
        path = ("preferences", i)
        data = v.mapping(raw, path, ("priority", "statement", "sensitive_tags"),
                         ("priority", "statement"))
        preferences.append(Preference(
            priority=v.number(data["priority"], (*path, "priority")),
            statement=v.text(data["statement"], (*path, "statement")).strip(),
            sensitive_tags=v.tags(data.get("sensitive_tags"), (*path, "sensitive_tags")),
        ))
    rules = []
    seen: set[str] = set()
    for i, raw in enumerate(v.items(top.get("rules"), ("rules",))):
        path = ("rules", i)
        data = v.mapping(raw, path, ("id", "content", "always", "check"), ("id", "content"))
        rule_id = v.text(data["id"], (*path, "id"))
        if not _RULE_ID.match(rule_id):
            raise v.fail((*path, "id"), "use letters, digits, '.', '_' and '-'")
        if rule_id in seen:
            raise v.fail((*path, "id"), f"duplicate rule id {rule_id!r}")
        seen.add(rule_id)
        check = data.get("check")
        rules.append(Rule(
            id=rule_id,
            content=v.text(data["content"], (*path, "content")).strip(),
            always=v.flag(data.get("always"), (*path, "always")),
            check=None if check is None else _check(v, check, (*path, "check")),
            source=source,
            line=lines.of((*path, "id")),
        ))
    return Ruleset(
        sensitive_tags=v.tags(top.get("sensitive_tags"), ("sensitive_tags",)),
        preferences=tuple(preferences),
        rules=tuple(rules),
    )


def builtin_pack(name: str) -> str | None:
    """Return the file of a shipped pack named ``name`` (``secrets``, ``pii``, ``default``)."""
    if not re.fullmatch(r"[a-z][a-z0-9-]*", name):
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    # Installed: critic_cli/packs/; from a source checkout: the repository's rules/.
    for folder in (os.path.join(here, "packs"), os.path.join(os.path.dirname(here), "rules")):
        candidate = os.path.join(folder, f"{name}.yaml")
        if os.path.isfile(candidate):
            return candidate
    return None


def load_pack(path: str) -> Ruleset:
    """Read, parse and validate one rule pack file, or a shipped pack by name."""
    if not os.path.exists(path):
        path = builtin_pack(path) or path
    try:
        document, lines = yamlsafe.load_file(path)
    except OSError as exc:
        raise RuleError(f"{path}: cannot read rule pack: {exc.strerror or exc}") from None
    except yamlsafe.YAMLInputError as exc:
        raise RuleError(yamlsafe.describe(path, exc)) from None
    return parse_pack(document, lines, path)


def merge(packs: Sequence[Ruleset]) -> Ruleset:
    """Merge packs: union of tags, preferences by priority (stable), rule ids unique."""
    rules = [rule for pack in packs for rule in pack.rules]
    first: dict[str, Rule] = {}
    for rule in rules:
        if rule.id in first:
            raise RuleError(located(rule.source, rule.line, "rules", f"duplicate rule id "
                                    f"{rule.id!r} (also in {first[rule.id].source})"))
        first[rule.id] = rule
    preferences = sorted(
        (p for pack in packs for p in pack.preferences), key=lambda p: -p.priority
    )
    return Ruleset(
        sensitive_tags=frozenset().union(*(pack.sensitive_tags for pack in packs)),
        preferences=tuple(preferences),
        rules=tuple(rules),
    )


def load_packs(paths: Sequence[str]) -> Ruleset:
    """Load every pack in ``paths`` and merge them."""
    return merge([load_pack(path) for path in paths])


# -- retrieval ------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")
_BM25_K1 = 1.2
_BM25_B = 0.75


# Words too common to say what a rule is about; without this every rule "matches" every draft.
_STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers herself him himself his how i if in into is it its itself just
me more most my myself no nor not now of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these
they this those through to too under until up very was we were what when where which while who
whom why will with would you your yours yourself yourselves draft drafts
""".split())


def _terms(text: str) -> list[str]:
    return [word for word in _WORD.findall(text.lower())
            if len(word) > 1 and word not in _STOPWORDS]


def retrieve(ruleset: Ruleset, query: str, top_k: int) -> list[Rule]:
    """Return the ``always`` rules, then the ``top_k`` others that best match ``query`` (BM25).

    Ties keep load order; a rule that shares no term with the query is never retrieved.
    """
    always = [rule for rule in ruleset.rules if rule.always]
    candidates = [rule for rule in ruleset.rules if not rule.always]
    if top_k <= 0 or not candidates:
        return always
    documents = [_terms(f"{rule.id.replace('-', ' ')} {rule.content}") for rule in candidates]
    average = sum(len(doc) for doc in documents) / len(documents) or 1.0
    frequency: Counter[str] = Counter()
    for doc in documents:
        frequency.update(set(doc))
    query_terms = set(_terms(query))
    scored = []
    for index, doc in enumerate(documents):
        counts = Counter(doc)
        score = 0.0
        for term in query_terms & counts.keys():
            idf = math.log(1 + (len(documents) - frequency[term] + 0.5) / (frequency[term] + 0.5))
            tf = counts[term]
            score += idf * tf * (_BM25_K1 + 1) / (
                tf + _BM25_K1 * (1 - _BM25_B + _BM25_B * len(doc) / average))
        if score > 0:
            scored.append((-score, index))
    scored.sort()
    return always + [candidates[index] for _, index in scored[:top_k]]
