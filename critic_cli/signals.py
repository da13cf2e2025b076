"""The gate: a confidence score and a sensitive-tag hit from an activation log.

A port of the seed's ``signals`` module: same names, signatures and results. The functions
are pure and expect a log that ``critic_cli.inputs`` has validated; ``null`` values count as
absent, where the seed would crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ACTIVATION_KEY",
    "DEFAULT_THRESHOLD",
    "activation_from_resolved",
    "compute_confidence",
    "critic_gate_fires",
    "detect_sensitive_hit",
]

ACTIVATION_KEY = "activation"
DEFAULT_THRESHOLD = 0.6
COLD_START = 0.5
SEED_WEIGHT = 0.4
PATH_WEIGHT = 0.3
EDGE_WEIGHT = 0.3
PATHS_FOR_FULL_COVERAGE = 3.0
EDGE_WEIGHT_SCALE = 5.0


def _clamp01(value: float) -> float:
    return max(0.0, min(1.0, value))


def _number(value: Any) -> float:
    # As the seed sums them: integers stay exact (no float() here), a missing value is 0.0.
    number: float = 0.0 if value is None else value
    return number


def activation_from_resolved(resolved: Any) -> dict[str, Any]:
    """Return the activation log held in a resolved map, or ``{}`` when there is none."""
    if resolved is None:
        return {}
    if isinstance(resolved, Mapping):
        entry = resolved.get(ACTIVATION_KEY)
    else:
        get = getattr(resolved, "get", None)
        entry = get(ACTIVATION_KEY) if callable(get) else None
    if entry is None:
        return {}
    if isinstance(entry, Mapping) and "value" in entry:
        value = entry["value"]  # the JSON spelling of the seed's ResolvedInput wrapper
    else:
        value = getattr(entry, "value", entry)
    return dict(value) if isinstance(value, Mapping) else {}


def seed_strength(activation_log: Mapping[str, Any]) -> float | None:
    """Return the mean score of the activated nodes, or None on a cold start."""
    nodes = activation_log.get("activated_nodes") or []
    if not nodes:
        return None
    return sum(_number(node.get("score")) for node in nodes) / len(nodes)


def path_coverage(activation_log: Mapping[str, Any]) -> float:
    """Return the share of the three inference paths that count as full coverage."""
    paths = activation_log.get("inference_paths") or []
    return min(1.0, len(paths) / PATHS_FOR_FULL_COVERAGE)


def edge_weight_factor(activation_log: Mapping[str, Any]) -> float:
    """Return the mean traversed-edge weight over five, capped at 1 (0 without edges)."""
    edges = activation_log.get("traversed_edges") or []
    if not edges:
        return 0.0
    mean = sum(_number(edge.get("weight")) for edge in edges) / len(edges)
    return min(1.0, mean / EDGE_WEIGHT_SCALE)


def compute_confidence(activation_log: dict[str, Any]) -> float:
    """Return the deterministic confidence in [0, 1]; 0.5 for an empty log or a cold start."""
    if not activation_log:
        return COLD_START
    strength = seed_strength(activation_log)
    if strength is None:
        return COLD_START
    weighted = (
        SEED_WEIGHT * strength
        + PATH_WEIGHT * path_coverage(activation_log)
        + EDGE_WEIGHT * edge_weight_factor(activation_log)
    )
    return _clamp01(weighted)


def node_tags(node: Mapping[str, Any]) -> list[Any]:
    """Return a node's tags: ``tags``, else ``properties.tags``, else none."""
    return node.get("tags") or (node.get("properties") or {}).get("tags") or []


def detect_sensitive_hit(
    activation_log: dict[str, Any], sensitive_tags: frozenset[str]
) -> str | None:
    """Return the first sensitive tag an activated node carries, in node then tag order."""
    if not sensitive_tags:
        return None
    for node in (activation_log or {}).get("activated_nodes") or []:
        for tag in node_tags(node):
            if tag in sensitive_tags:
                return str(tag)
    return None


def critic_gate_fires(confidence: float, sensitive_hit: str | None, threshold: float) -> bool:
    """Return True when confidence is strictly below the threshold or a tag was hit."""
    if confidence < threshold:
        return True
    return sensitive_hit is not None
