"""The gate's arithmetic, step by step, for ``critic explain``."""

from __future__ import annotations

from typing import Any

from critic_cli import signals


def breakdown(log: dict[str, Any], tags: frozenset[str], threshold: float) -> dict[str, Any]:
    """Return each step of the confidence and the gate decision for an activation log."""
    nodes = log.get("activated_nodes") or []
    paths = log.get("inference_paths") or []
    edges = log.get("traversed_edges") or []
    confidence = signals.compute_confidence(log)
    hit = signals.detect_sensitive_hit(log, tags)
    fires = signals.critic_gate_fires(confidence, hit, threshold)
    strength = signals.seed_strength(log) if log else None
    steps: list[tuple[str, str, str]] = []
    if strength is None:
        why_empty = "the log is empty" if not log else "no activated nodes"
        steps.append(("confidence", f"{confidence:.4f}", f"cold start: {why_empty}"))
        weighted = None
    else:
        coverage = signals.path_coverage(log)
        edge = signals.edge_weight_factor(log)
        weighted = (signals.SEED_WEIGHT * strength + signals.PATH_WEIGHT * coverage
                    + signals.EDGE_WEIGHT * edge)
        steps += [
            ("seed strength", f"{strength:.4f}", f"mean score of {len(nodes)} activated nodes"),
            ("path coverage", f"{coverage:.4f}", f"min(1, {len(paths)} paths / 3)"),
            ("edge-weight factor", f"{edge:.4f}",
             f"min(1, mean weight of {len(edges)} edges / 5)" if edges else "no edges"),
            ("weighted sum", f"{weighted:.4f}",
             f"0.4 × {strength:.4f} + 0.3 × {coverage:.4f} + 0.3 × {edge:.4f}"),
            ("confidence", f"{confidence:.4f}",
             "clamped to [0, 1]" if confidence != weighted else "clamp to [0, 1]: unchanged"),
        ]
    steps.append(("sensitive hit", hit or "none",
                  f"tags checked: {', '.join(sorted(tags))}" if tags else "no sensitive tags"))
    steps.append(("threshold", f"{threshold:.4f}", "fires when confidence < threshold"))
    if hit is not None:
        why = f"sensitive tag {hit!r}"
    elif confidence < threshold:
        why = f"confidence {confidence:.4f} < threshold {threshold:.4f}"
    else:
        why = f"confidence {confidence:.4f} ≥ threshold {threshold:.4f} and no sensitive hit"
    return {
        "seed_strength": strength,
        "path_coverage": signals.path_coverage(log) if strength is not None else None,
        "edge_weight_factor": signals.edge_weight_factor(log) if strength is not None else None,
        "weighted_sum": weighted,
        "confidence": confidence,
        "sensitive_tag_hit": hit,
        "threshold": threshold,
        "fires": fires,
        "why": why,
        "steps": steps,
    }
