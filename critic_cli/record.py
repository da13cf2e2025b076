"""The record: one plain value per reviewed draft, its dictionary form and JSON Schema."""

import time
from collections import Counter
from typing import Any, Literal, NamedTuple

Verdict = Literal["approve", "flagged", "revise", "refuse", "error"]
VERDICTS: tuple[str, ...] = ("approve", "flagged", "revise", "refuse", "error")
SEVERITY: dict[str, int] = {"approve": 0, "flagged": 1, "revise": 2, "refuse": 3}
FAIL_ON: tuple[str, ...] = ("approve", "flagged", "revise", "refuse", "never")
GATE_REASONS: tuple[str, ...] = ("sensitive_tag", "rule", "low_confidence")
PROVENANCE = "critic-reflection-v1"


def most_severe(*verdicts: str) -> str:
    """Return the most severe of ``verdicts`` (``error`` outranks them all)."""
    if "error" in verdicts:
        return "error"
    return max(verdicts, key=SEVERITY.__getitem__)


def fails(verdict: str, fail_on: str) -> bool:
    """Return True when ``verdict`` is at or above the ``fail_on`` level."""
    if fail_on == "never" or verdict == "error":
        return False
    return SEVERITY[verdict] >= SEVERITY[fail_on]


class Gate(NamedTuple):
    """Whether the gate fired, why, and against which threshold."""

    fired: bool
    reason: str | None
    threshold: float


class Reflection(NamedTuple):
    """Whether the model was asked, which model, from the cache or not, and any failure."""

    ran: bool = False
    model: str | None = None
    cached: bool = False
    error: str | None = None


class Record(NamedTuple):
    """The verdict on one draft: the seed's fields first, then critic's."""

    verdict: str
    confidence_before: float
    sensitive_tag_hit: str | None
    source: str
    gate: Gate
    revised_draft: str | None = None
    refusal_message: str | None = None
    matched_preferences: tuple[str, ...] = ()
    reflection_latency_ms: float = 0.0
    reflection: Reflection = Reflection()
    checks: tuple[dict[str, Any], ...] = ()
    rules_used: tuple[str, ...] = ()
    error: str | None = None
    draft: str = ""

    def __repr__(self) -> str:
        # The draft may hold a secret: keep it out of logs, tracebacks and test output.
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self,
                                                                   strict=True)
                          if name != "draft")
        return f"Record({shown})"

    @property
    def final_text(self) -> str | None:
        """Return the text to ship: the draft, the revised draft, the refusal, or None."""
        if self.verdict == "revise":
            return self.revised_draft
        if self.verdict == "refuse":
            return self.refusal_message
        if self.verdict in ("approve", "flagged"):
            return self.draft
        return None

    def to_dict(self) -> dict[str, Any]:
        """Return the record as the JSON object documented in the README."""
        return {
            "verdict": self.verdict,
            "confidence_before": self.confidence_before,
            "sensitive_tag_hit": self.sensitive_tag_hit,
            "revised_draft": self.revised_draft,
            "refusal_message": self.refusal_message,
            "matched_preferences": list(self.matched_preferences),
            "reflection_latency_ms": self.reflection_latency_ms,
            "provenance": PROVENANCE,
            "source": self.source,
            "gate": {
                "fired": self.gate.fired,
                "reason": self.gate.reason,
                "threshold": self.gate.threshold,
            },
            "reflection": {
                "ran": self.reflection.ran,
                "model": self.reflection.model,
                "cached": self.reflection.cached,
                "error": self.reflection.error,
            },
            "checks": [dict(check) for check in self.checks],
            "rules_used": list(self.rules_used),
            "error": self.error,
        }


class Summary:
    """Counts for the end of a run."""

    def __init__(self) -> None:
        self.verdicts: Counter[str] = Counter()
        self.cache_hits = 0
        self.reflections = 0
        self.started = time.perf_counter()
        self.seconds = 0.0

    def add(self, record: Record) -> None:
        """Count one record."""
        self.verdicts[record.verdict] += 1
        self.cache_hits += record.reflection.cached
        self.reflections += record.reflection.ran

    @property
    def total(self) -> int:
        """Return how many records were counted."""
        return sum(self.verdicts.values())

    def exit_code(self, fail_on: str) -> int:
        """Return 3 when any draft ended in error, 1 when any reached ``fail_on``, else 0."""
        if self.verdicts["error"]:
            return 3
        return int(any(fails(verdict, fail_on) for verdict in self.verdicts))


def _nullable(kind: str, **extra: Any) -> dict[str, Any]:
    return {"type": [kind, "null"], **extra}


def json_schema() -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of a record."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://critic.dev/schemas/record-v1.json",
        "title": "critic record",
        "description": "The verdict critic reached on one draft.",
        "type": "object",
        "additionalProperties": False,
        "required": [
            "verdict", "confidence_before", "sensitive_tag_hit", "revised_draft",
            "refusal_message", "matched_preferences", "reflection_latency_ms", "provenance",
            "source", "gate", "reflection", "checks", "rules_used", "error",
        ],
        "properties": {
            "verdict": {"enum": list(VERDICTS)},
            "confidence_before": {"type": "number", "minimum": 0, "maximum": 1},
            "sensitive_tag_hit": _nullable("string"),
            "revised_draft": _nullable("string"),
            "refusal_message": _nullable("string"),
            "matched_preferences": {"type": "array", "items": {"type": "string"}},
            "reflection_latency_ms": {"type": "number", "minimum": 0},
            "provenance": {"const": PROVENANCE},
            "source": {"type": "string"},
            "gate": {
                "type": "object",
                "additionalProperties": False,
                "required": ["fired", "reason", "threshold"],
                "properties": {
                    "fired": {"type": "boolean"},
                    "reason": {"enum": [*GATE_REASONS, None]},
                    "threshold": {"type": "number", "minimum": 0, "maximum": 1},
                },
            },
            "reflection": {
                "type": "object",
                "additionalProperties": False,
                "required": ["ran", "model", "cached", "error"],
                "properties": {
                    "ran": {"type": "boolean"},
                    "model": _nullable("string"),
                    "cached": {"type": "boolean"},
                    "error": _nullable("string"),
                },
            },
            "checks": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["rule", "action", "line", "column"],
                    "properties": {
                        "rule": {"type": "string"},
                        "action": {"enum": ["refuse", "revise", "flag"]},
                        "line": {"type": "integer", "minimum": 1},
                        "column": {"type": "integer", "minimum": 1},
                    },
                },
            },
            "rules_used": {"type": "array", "items": {"type": "string"}},
            "error": _nullable("string"),
        },
    }
