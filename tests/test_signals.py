"""The gate, ported from the seed: every edge case of its arithmetic and tag matching."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from critic_cli.rules import Preference, Ruleset
from critic_cli.signals import (
    DEFAULT_THRESHOLD,
    activation_from_resolved,
    compute_confidence,
    critic_gate_fires,
    detect_sensitive_hit,
)
from tests.conftest import Run, Write

# -- a reference port of the seed formula, written from the seed page, for valid logs ---------


def seed_confidence(log: Mapping[str, Any]) -> float:
    """Return the seed's confidence for a valid log (null counts as absent)."""
    if not log:
        return 0.5
    nodes = log.get("activated_nodes") or []
    paths = log.get("inference_paths") or []
    edges = log.get("traversed_edges") or []
    if not nodes:
        return 0.5
    scores = [0.0 if n.get("score") is None else n["score"] for n in nodes]
    seed_strength = sum(scores) / len(scores)
    path_coverage = min(1.0, len(paths) / 3.0)
    if edges:
        weights = [0.0 if e.get("weight") is None else e["weight"] for e in edges]
        edge_weight_factor = min(1.0, (sum(weights) / len(weights)) / 5.0)
    else:
        edge_weight_factor = 0.0
    confidence = 0.4 * seed_strength + 0.3 * path_coverage + 0.3 * edge_weight_factor
    return max(0.0, min(1.0, confidence))


def log(scores: Sequence[Any] = (), paths: int = 0, weights: Sequence[Any] = ()) -> dict[str, Any]:
    """Return a log with one node per score, ``paths`` paths and one edge per weight."""
    return {
        "activated_nodes": [{"id": f"n{i}", "score": s} for i, s in enumerate(scores)],
        "inference_paths": [["n0"] for _ in range(paths)],
        "traversed_edges": [{"source": "n0", "target": "n1", "weight": w} for w in weights],
    }


# -- confidence --------------------------------------------------------------------------------


def test_empty_log_is_a_cold_start() -> None:
    assert compute_confidence({}) == 0.5


def test_no_activated_nodes_is_a_cold_start_even_with_paths_and_edges() -> None:
    assert compute_confidence(log([], paths=5, weights=[5.0, 5.0])) == 0.5
    assert compute_confidence({"activated_nodes": [], "inference_paths": [["a"]]}) == 0.5
    assert compute_confidence({"inference_paths": [["a"]] * 3}) == 0.5


def test_a_node_without_score_counts_zero() -> None:
    with_missing = {"activated_nodes": [{"id": "a", "score": 1.0}, {"id": "b"}]}
    assert compute_confidence(with_missing) == 0.4 * 0.5
    assert compute_confidence({"activated_nodes": [{"id": "a"}]}) == 0.0


def test_an_edge_without_weight_counts_zero() -> None:
    edges = {"activated_nodes": [{"score": 0.0}],
             "traversed_edges": [{"weight": 5.0}, {"source": "a", "target": "b"}]}
    # mean weight 2.5 → factor 0.5 → 0.3 × 0.5
    assert compute_confidence(edges) == 0.3 * 0.5


def test_null_score_weight_and_properties_count_as_absent() -> None:
    nulls = {
        "activated_nodes": [{"score": 1.0}, {"score": None, "properties": None, "tags": None}],
        "inference_paths": None,
        "traversed_edges": [{"weight": 5.0}, {"weight": None}],
    }
    assert compute_confidence(nulls) == 0.4 * 0.5 + 0.3 * 0.0 + 0.3 * 0.5
    assert detect_sensitive_hit(nulls, frozenset({"x"})) is None
    assert compute_confidence({"activated_nodes": None}) == 0.5


def test_mean_score_above_one_is_not_capped_before_the_clamp() -> None:
    assert compute_confidence(log([3.0])) == 1.0
    # Capped at 1 first, this would give 0.4; uncapped it is 0.4 × 1.5.
    assert compute_confidence(log([1.5])) == pytest.approx(0.6, abs=1e-12)
    assert compute_confidence(log([1.5])) == 0.4 * 1.5
    # A big score makes up for missing paths and edges: 0.4 × 2 + 0 + 0 = 0.8.
    assert compute_confidence(log([2.0, 2.0])) == pytest.approx(0.8, abs=1e-12)


def test_negative_scores_and_weights_clamp_at_zero() -> None:
    assert compute_confidence(log([-1.0])) == 0.0
    assert compute_confidence(log([0.5], paths=0, weights=[-50.0])) == 0.0
    assert compute_confidence(log([-10.0], paths=3, weights=[5.0])) == 0.0


def test_a_negative_edge_factor_is_not_floored_on_its_own() -> None:
    # 0.4 × 1 + 0.3 × 1 + 0.3 × (−5 / 5) = 0.4: only the sum is clamped, not each term.
    assert compute_confidence(log([1.0], paths=3, weights=[-5.0])) == pytest.approx(0.4)


def test_edge_weight_factor_is_capped_at_one() -> None:
    assert compute_confidence(log([0.0], weights=[5.0])) == compute_confidence(
        log([0.0], weights=[500.0]))
    assert compute_confidence(log([0.0], weights=[500.0])) == 0.3


def test_path_coverage_is_capped_at_three_paths() -> None:
    three = compute_confidence(log([0.5], paths=3))
    assert three == compute_confidence(log([0.5], paths=7))
    assert three == pytest.approx(0.5)
    assert compute_confidence(log([0.5], paths=2)) < three
    assert compute_confidence(log([0.5], paths=1)) == pytest.approx(0.2 + 0.1)


def test_exact_arithmetic_of_a_hand_computed_log() -> None:
    # seed strength (0.5 + 1.0) / 2 = 0.75; coverage 3/3 = 1; edges (2.5 + 2.5) / 2 / 5 = 0.5.
    example = log([0.5, 1.0], paths=3, weights=[2.5, 2.5])
    exact = Fraction(4, 10) * Fraction(3, 4) + Fraction(3, 10) + Fraction(3, 10) * Fraction(1, 2)
    assert exact == Fraction(3, 4)
    assert compute_confidence(example) == pytest.approx(float(exact), abs=1e-15)
    assert compute_confidence(example) == 0.4 * 0.75 + 0.3 * 1.0 + 0.3 * 0.5


def test_integers_are_numbers() -> None:
    assert compute_confidence(log([1, 1], paths=3, weights=[5])) == 1.0


# -- the gate ----------------------------------------------------------------------------------


def test_default_threshold() -> None:
    assert DEFAULT_THRESHOLD == 0.6
    assert critic_gate_fires(compute_confidence({}), None, DEFAULT_THRESHOLD) is True


def test_confidence_exactly_at_the_threshold_does_not_fire() -> None:
    cold = compute_confidence({})
    assert cold == 0.5
    assert critic_gate_fires(cold, None, 0.5) is False
    assert critic_gate_fires(cold, None, math.nextafter(0.5, 1.0)) is True
    at = compute_confidence(log([1.25]))  # 0.4 × 1.25 is exactly 0.5 in binary
    assert at == 0.5
    assert critic_gate_fires(at, None, 0.5) is False


def test_a_sensitive_hit_fires_whatever_the_confidence() -> None:
    assert critic_gate_fires(1.0, "credentials", 0.6) is True
    assert critic_gate_fires(1.0, "credentials", 0.0) is True
    assert critic_gate_fires(1.0, None, 1.0) is False
    assert critic_gate_fires(0.0, None, 0.0) is False


def test_threshold_zero_never_fires_on_confidence_and_one_fires_below_one() -> None:
    assert critic_gate_fires(0.0, None, 0.0) is False
    assert critic_gate_fires(0.999, None, 1.0) is True


# -- sensitive tags ----------------------------------------------------------------------------


def nodes(*tag_specs: dict[str, Any]) -> dict[str, Any]:
    return {"activated_nodes": [{"id": f"n{i}", "score": 1.0, **spec}
                                for i, spec in enumerate(tag_specs)]}


def test_no_sensitive_tags_is_none() -> None:
    tagged = nodes({"tags": ["credentials"]})
    assert detect_sensitive_hit(tagged, frozenset()) is None
    assert detect_sensitive_hit({}, frozenset({"credentials"})) is None
    assert detect_sensitive_hit(nodes({"tags": ["other"]}), frozenset({"credentials"})) is None


def test_tags_win_over_properties_tags_when_not_empty() -> None:
    both = nodes({"tags": ["ops"], "properties": {"tags": ["credentials"]}})
    assert detect_sensitive_hit(both, frozenset({"credentials"})) is None
    assert detect_sensitive_hit(both, frozenset({"ops", "credentials"})) == "ops"


def test_properties_tags_count_when_tags_are_absent_or_empty() -> None:
    tags = frozenset({"credentials"})
    assert detect_sensitive_hit(nodes({"properties": {"tags": ["credentials"]}}), tags) == (
        "credentials")
    empty = nodes({"tags": [], "properties": {"tags": ["credentials"]}})
    assert detect_sensitive_hit(empty, tags) == "credentials"  # the seed's `or`
    assert detect_sensitive_hit(nodes({"properties": {}}), tags) is None


def test_first_hit_in_node_order_then_tag_order() -> None:
    tags = frozenset({"a", "b", "c"})
    log_ = nodes({"tags": ["x"]}, {"tags": ["c", "b"]}, {"tags": ["a"]})
    assert detect_sensitive_hit(log_, tags) == "c"
    log_ = nodes({"tags": ["b", "c"]}, {"tags": ["a"]})
    assert detect_sensitive_hit(log_, tags) == "b"
    log_ = nodes({"properties": {"tags": ["a"]}}, {"tags": ["b"]})
    assert detect_sensitive_hit(log_, tags) == "a"


def test_gate_tags_are_the_union_of_configured_and_preference_tags() -> None:
    ruleset = Ruleset(
        sensitive_tags=frozenset({"pack"}),
        preferences=(Preference(10, "Never reveal keys", frozenset({"credentials"})),
                     Preference(5, "No medical advice", frozenset({"medical"}))),
    )
    assert ruleset.gate_tags() == {"pack", "credentials", "medical"}
    assert ruleset.gate_tags(["flag"]) == {"pack", "credentials", "medical", "flag"}
    assert Ruleset().gate_tags() == frozenset()


def test_preference_tags_fire_the_gate_through_critic_review(write: Write, run: Run) -> None:
    write("pack.yaml", "sensitive_tags: [pack]\n"
                       "preferences:\n"
                       "  - priority: 1\n"
                       "    statement: Keep it clean\n"
                       "    sensitive_tags: [pref]\n")
    write("draft.txt", "hello\n")
    strong = {"inference_paths": [["a"]] * 3, "traversed_edges": [{"weight": 5}]}
    for tag in ("pack", "pref", "flag"):
        write(f"{tag}.json", json.dumps(
            {"activated_nodes": [{"score": 1, "tags": ["other", tag]}], **strong}))
        result = run("review", "draft.txt", "-a", f"{tag}.json", "-r", "pack.yaml",
                     "-t", "flag", "-f", "json")
        assert result.exit_code == 0, result.output
        record = json.loads(result.stdout)
        assert record["confidence_before"] == 1.0
        assert record["sensitive_tag_hit"] == tag
        assert record["gate"] == {"fired": True, "reason": "sensitive_tag", "threshold": 0.6}
    write("none.json", json.dumps({"activated_nodes": [{"score": 1, "tags": ["other"]}],
                                   **strong}))
    result = run("review", "draft.txt", "-a", "none.json", "-r", "pack.yaml", "-f", "json")
    assert json.loads(result.stdout)["verdict"] == "approve"


# -- activation_from_resolved ------------------------------------------------------------------

RAW = {"activated_nodes": [{"id": "a", "score": 1.0}]}


def test_activation_from_resolved_with_the_value_wrapper() -> None:
    assert activation_from_resolved({"activation": {"value": RAW}}) == RAW
    wrapped = SimpleNamespace(value=RAW)  # the seed's ResolvedInput
    assert activation_from_resolved({"activation": wrapped}) == RAW


def test_activation_from_resolved_without_the_wrapper() -> None:
    assert activation_from_resolved({"activation": RAW}) == RAW
    result = activation_from_resolved({"activation": RAW})
    assert result is not RAW  # a copy, as the seed's dict(value)


def test_activation_from_resolved_with_none() -> None:
    assert activation_from_resolved(None) == {}
    assert activation_from_resolved({}) == {}
    assert activation_from_resolved({"activation": None}) == {}
    assert activation_from_resolved({"other": RAW}) == {}


def test_activation_from_resolved_with_a_non_mapping_value() -> None:
    assert activation_from_resolved({"activation": [1, 2]}) == {}
    assert activation_from_resolved({"activation": "text"}) == {}
    assert activation_from_resolved({"activation": {"value": [RAW]}}) == {}
    assert activation_from_resolved({"activation": SimpleNamespace(value=3)}) == {}


def test_activation_from_resolved_with_a_non_mapping_resolved() -> None:
    class Store:
        def get(self, key: str) -> Any:
            return {"value": RAW} if key == "activation" else None

    assert activation_from_resolved(Store()) == RAW
    assert activation_from_resolved(object()) == {}
    assert activation_from_resolved(SimpleNamespace(get="not callable")) == {}


# -- properties --------------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)
number = st.one_of(finite, st.integers(min_value=-(10**6), max_value=10**6), st.none())
tag = st.sampled_from(["a", "b", "c", "credentials", "ops"])
tag_list = st.one_of(st.none(), st.lists(tag, max_size=4))
node = st.fixed_dictionaries(
    {},
    optional={
        "score": number,
        "tags": tag_list,
        "properties": st.one_of(st.none(), st.fixed_dictionaries({}, optional={"tags": tag_list})),
    },
)
edge = st.fixed_dictionaries({}, optional={"weight": number})
valid_log = st.one_of(
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "activated_nodes": st.one_of(st.none(), st.lists(node, max_size=6)),
            "inference_paths": st.one_of(st.none(), st.lists(st.just(["a", "b"]), max_size=6)),
            "traversed_edges": st.one_of(st.none(), st.lists(edge, max_size=6)),
        },
    ),
)
relaxed = settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])


@relaxed
@given(valid_log)
def test_confidence_is_always_within_zero_and_one(activation: dict[str, Any]) -> None:
    confidence = compute_confidence(activation)
    assert 0.0 <= confidence <= 1.0
    assert not math.isnan(confidence)


@relaxed
@given(valid_log)
def test_confidence_equals_the_seed_formula(activation: dict[str, Any]) -> None:
    expected = seed_confidence(activation)
    assert compute_confidence(activation) == expected


@relaxed
@given(valid_log, st.frozensets(tag, max_size=3),
       st.floats(min_value=0.0, max_value=1.0, allow_nan=False))
def test_gate_fires_on_low_confidence_or_a_hit(
    activation: dict[str, Any], tags: frozenset[str], threshold: float
) -> None:
    confidence = compute_confidence(activation)
    hit = detect_sensitive_hit(activation, tags)
    assert hit is None or hit in tags
    fires = critic_gate_fires(confidence, hit, threshold)
    assert fires == (confidence < threshold or hit is not None)


def test_integer_scores_are_summed_exactly_as_the_seed_does() -> None:
    log = {"activated_nodes": [{"score": 100000000000000001}, {"score": -100000000000000000}],
           "inference_paths": [1, 2, 3]}
    assert compute_confidence(log) == seed_confidence(log) == 0.5


def test_resolved_value_null_counts_as_absent(run: Any, write: Any) -> None:
    write("log.json", '{"activation": {"value": null}}')
    write("d.txt", "x")
    result = run("review", "d.txt", "-a", "log.json", "-f", "json", "--no-config")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["confidence_before"] == 0.5
