"""Worker pools on the client side (docs/SPEC.md §2.6): each actor name's pool is a function
of the seed and the name, shares follow the weights, the parameter is refused in one line
naming the entry, a selector no pool matches is misconfigured on either wire, and the
breakdown rows stay out of every total."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from agentsession_core.engine.params import parse_params
from agentsession_core.engine.target_params import MAX_POOLS
from agentsession_core.engine.worker_pools import PoolDraw, split_workers
from agentsession_core.errors import UsageError
from agentsession_core.judge.thresholds import parse_threshold
from agentsession_core.judge.verdict import matches
from agentsession_core.measure.health import counts_requests
from agentsession_core.measure.stats import TIME_TO_WAKE_ROW, breakdown
from agentsession_core.substrate.ate import control_codec
from agentsession_core.substrate.errors import FailureClass, ate_router_error, classify
from agentsession_core.substrate.fake import FakeSubstrate
from agentsession_core.substrate.protocol import NO_POOL_MATCH
from local_substrate import persist, store
from local_substrate.actors import Actor

WEIGHTS = {"fast": 3, "slow": 1}


def test_a_name_draws_the_same_pool_every_time_and_in_any_order() -> None:
    names = [f"agent-{i}" for i in range(200)]
    first = PoolDraw(7, WEIGHTS)
    drawn = {name: first.pool_of(name) for name in names}
    # A second draw (another shard, a restart) in another order gives each name its pool.
    again = PoolDraw(7, dict(reversed(WEIGHTS.items())))
    assert {name: again.pool_of(name) for name in reversed(names)} == drawn
    assert first.selector("agent-3") == {"pool": drawn["agent-3"]}
    # The seed matters: another run's names land elsewhere.
    other = PoolDraw(8, WEIGHTS)
    assert any(other.pool_of(name) != drawn[name] for name in names)


def test_shares_follow_the_weights_over_many_names() -> None:
    draw = PoolDraw(1, WEIGHTS)
    counts = Counter(draw.pool_of(f"agent-{i}") for i in range(20_000))
    assert set(counts) == set(WEIGHTS)
    # 3:1 within a few standard deviations (σ of the share ≈ 0.003 at n = 20 000).
    assert counts["fast"] / 20_000 == pytest.approx(0.75, abs=0.015)


def test_a_replacement_draws_afresh() -> None:
    draw = PoolDraw(3, {"a": 1, "b": 1})
    # A replacement's name is new (`-r<generation>`): its pool is its own draw, so over
    # many sessions some replacements change pool while the same names never do.
    moved = sum(draw.pool_of(f"agent-{i}") != draw.pool_of(f"agent-{i}-r1") for i in range(400))
    assert 100 < moved < 300


def test_the_embedded_substrate_splits_its_workers_by_weight() -> None:
    assert split_workers(8, WEIGHTS) == {"fast": 6, "slow": 2}
    assert split_workers(2, WEIGHTS) == {"fast": 1, "slow": 1}  # at least one each
    assert sum(split_workers(7, {"a": 1, "b": 1, "c": 1}).values()) == 7
    with pytest.raises(ValueError):
        split_workers(1, WEIGHTS)


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"Fast": 1}, "pool 'Fast': a pool name is a lowercase DNS-1123 label"),
        ({"-a": 1}, "pool '-a'"),
        ({"a" * 48: 1}, "at most 47 characters"),
        ({"fast": 0}, "pool 'fast': weight 0 is not a positive integer"),
        ({"fast": 1.5}, "weight 1.5 is not"),
        ({"fast": True}, "weight True is not"),
        ({"fast": "2"}, "weight '2' is not"),  # a mapping's weights are integers already
        ("fast:3,slow", "entry 'slow': expected name:weight"),
        ("fast:3,fast:1", "pool 'fast' given twice"),
        (["fast"], "a mapping {pool: weight}"),
    ],
)
def test_bad_pools_are_refused_in_one_line_naming_the_entry(given: object, words: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_params({"target": {"worker_pools": given}})
    line = str(refused.value)
    assert line.startswith("parameter target.worker_pools: ") and words in line, line
    assert "\n" not in line


def test_the_flag_form_and_the_embedded_worker_count() -> None:
    params = parse_params({"target": {"worker_pools": "fast:3, slow:1"}})
    assert params.target.worker_pools == WEIGHTS
    assert parse_params({"target": {"worker_pools": ""}}).target.worker_pools is None
    with pytest.raises(UsageError, match=r"3 pools need at least as many target\.local_workers"):
        parse_params({"target": {"worker_pools": "a:1,b:1,c:1", "local_workers": 2}})


async def test_create_actor_carries_the_selector() -> None:
    fake = FakeSubstrate()
    await fake.ensure_atespace("s")
    await fake.create_actor(
        "s", "a", "benchmark-workloads", "glutton", worker_selector={"pool": "x"}
    )
    await fake.create_actor("s", "b", "benchmark-workloads", "glutton")
    assert fake.selectors == {("s", "a"): {"pool": "x"}, ("s", "b"): {}}
    with_pool = control_codec.create_actor_request("s", "a", "ns", "t", {"pool": "x"})
    assert dict(with_pool.actor.worker_selector.match_labels) == {"pool": "x"}
    without = control_codec.create_actor_request("s", "a", "ns", "t")
    assert not without.actor.HasField("worker_selector")


def test_a_selector_no_pool_matches_is_misconfigured_on_both_wires() -> None:
    text = f"{NO_POOL_MATCH}: actor s/a selects {{'pool': 'gpu'}}"
    # The control API and the JSON router: FAILED_PRECONDITION, which otherwise replaces.
    assert classify("FAILED_PRECONDITION", 412, from_router=True, message=text) is (
        FailureClass.MISCONFIGURED
    )
    assert classify("FAILED_PRECONDITION", 412, from_router=True, message="x") is (
        FailureClass.REPLACE
    )
    # The ate router passes ResumeActor's refusal on in a 503's text.
    error = ate_router_error(503, text.encode(), {})
    assert error.code == "FAILED_PRECONDITION"
    assert error.failure_class is FailureClass.MISCONFIGURED
    assert ate_router_error(503, b"no room", {}).failure_class is FailureClass.RETRY_LATER


def test_breakdown_rows_are_never_counted_twice() -> None:
    fast = breakdown(TIME_TO_WAKE_ROW, "pool", "fast")
    assert fast == ("rps", "TimeToWake:pool=fast")
    assert counts_requests(TIME_TO_WAKE_ROW) and not counts_requests(fast)
    # A pattern without a label never selects a breakdown row; one with a label does.
    assert not matches(fast, "rps_*") and not matches(fast, "TimeToWake*")
    assert matches(fast, "TimeToWake:pool=fast") and matches(fast, "TimeToWake:pool=*")
    assert not matches(TIME_TO_WAKE_ROW, "TimeToWake:pool=*")
    rule = parse_threshold("TimeToWake:pool=slow: p99 < 2s")
    assert (rule.rows, rule.stat) == ("TimeToWake:pool=slow", "p99")
    assert parse_threshold("TimeToWake: p99 < 2s").rows == "TimeToWake"


def test_the_store_keeps_an_actors_selector_and_pool(tmp_path: Path) -> None:
    """A restart on the same store (persist.py) finds each actor bound to its pool."""
    bound = Actor("s", "a", ("ns", "t"), None, selector={"pool": "fast"}, pool="fast")
    free = Actor("s", "b", ("ns", "t"), None)
    for actor in (bound, free):
        persist.record_actor(store.actor_dir(tmp_path, actor.atespace, actor.name), actor)
    saved = {s.name: s for s in persist.scan(tmp_path)}
    assert (saved["a"].selector, saved["a"].pool) == ({"pool": "fast"}, "fast")
    assert (saved["b"].selector, saved["b"].pool) == ({}, None)


def test_router_tls_settings_need_an_https_router() -> None:
    one_server = parse_params({"target": {"substrate": "https://s.test", "router_ca_file": "ca"}})
    assert one_server.target.router_ca_file == "ca"  # the json wire's router is that URL
    for target in (
        {"substrate": "http://s.test", "router_ca_file": "ca"},
        {"substrate": "https://s.test", "router": "http://r.test", "router_ca_file": "ca"},
        {"router_server_name": "r.test"},  # the embedded substrate's router is http://
    ):
        with pytest.raises(UsageError, match=r"apply to an https:// router"):
            parse_params({"target": target})


# ------------------------------------------------------------------ issue 29
@pytest.mark.parametrize(
    "given",
    [
        {"fast": 10**26},
        "fast:100000000000000000000000000",
        "{fast: 100000000000000000000000000, slow: 1}",
        {"fast": 1_000_001},
    ],
    ids=["mapping", "flag form", "help form", "just past the bound"],
)
def test_a_weight_past_the_bound_is_refused_in_one_line(given: object) -> None:
    with pytest.raises(UsageError) as refused:
        parse_params({"target": {"worker_pools": given}})
    line = str(refused.value)
    assert line.startswith("parameter target.worker_pools: pool 'fast': weight "), line
    assert "at most 1,000,000" in line and "\n" not in line and len(line) < 300


def test_too_many_pools_are_refused_in_one_line() -> None:
    many = {f"p{i}": 1 for i in range(MAX_POOLS + 1)}
    with pytest.raises(UsageError, match=rf"target\.worker_pools: {MAX_POOLS + 1} pools"):
        parse_params({"target": {"worker_pools": many, "substrate": "http://x"}})


@pytest.mark.parametrize(
    "text", ["{fast: 3, slow: 1}", " {fast: 3,slow: 1} ", "fast:3,slow:1", "fast: 3, slow: 1"]
)
def test_the_help_form_and_the_flag_form_are_both_taken(text: str) -> None:
    assert parse_params({"target": {"worker_pools": text}}).target.worker_pools == WEIGHTS


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{fast: 3, slow", "not a mapping of pool to weight"),
        ("{fast: 1.5}", "weight 1.5 is not"),
        ("{fast: '2'}", "weight '2' is not"),
        ("{Fast: 1}", "pool 'Fast'"),
        ("{a: &x 1, b: *x}", "not a mapping of pool to weight"),
        ("[fast]", "expected name:weight"),
    ],
)
def test_a_bad_help_form_is_refused_in_one_line(text: str, words: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_params({"target": {"worker_pools": text}})
    line = str(refused.value)
    assert line.startswith("parameter target.worker_pools: ") and words in line, line
    assert "\n" not in line
