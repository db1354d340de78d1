"""The local substrate's one set of control operations (local_substrate/control_plane.py),
which both control fronts adapt: every JSON lifecycle verb is served by the plane's method of
its name, and the operations refuse alike whichever wire asked. In memory: no server, no
worker process (an actor is created and deleted without ever running)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from agentsession_core.substrate.protocol import ACTOR_VERBS, DEFAULT_TEMPLATE
from local_substrate.actors import ActorLifecycle
from local_substrate.control_plane import ControlPlane
from local_substrate.protocol import WireError


def plane(tmp_path: Path) -> ControlPlane:
    lifecycle = ActorLifecycle(tmp_path, park_timeout=1.0, pause_budget=0)
    return ControlPlane({DEFAULT_TEMPLATE: 1 << 20}, lifecycle)


def test_every_json_verb_is_a_plane_method_taking_the_actor() -> None:
    for verb in ACTOR_VERBS:
        method = getattr(ControlPlane, verb, None)
        assert method is not None and inspect.iscoroutinefunction(method), verb
        assert list(inspect.signature(method).parameters)[:2] == ["self", "actor"], verb


async def test_actors_are_created_listed_in_pages_and_deleted(tmp_path: Path) -> None:
    p = plane(tmp_path)
    with pytest.raises(WireError) as missing:
        await p.create_actor("space", "a", None, {})
    assert missing.value.code == "NOT_FOUND"
    p.ensure_atespace("space")
    p.ensure_atespace("space")  # a PUT: existing is fine
    with pytest.raises(WireError) as again:
        p.create_atespace("space")  # a create: it is not
    assert again.value.code == "ALREADY_EXISTS"
    for name in ("c", "a", "b"):
        actor = await p.create_actor("space", name, None, {"pool": "fast"})
        assert (actor.status, actor.template, actor.limit) == (
            "SUSPENDED",
            DEFAULT_TEMPLATE,
            1 << 20,
        )
    with pytest.raises(WireError) as twice:
        await p.create_actor("space", "a", None, {})
    assert twice.value.code == "ALREADY_EXISTS"
    with pytest.raises(WireError) as bad:
        await p.create_actor("space", "no/slashes", None, {})
    assert bad.value.code == "INVALID_ARGUMENT"
    with pytest.raises(WireError) as template:
        await p.create_actor("space", "d", ("nope", "nope"), {})
    assert template.value.code == "NOT_FOUND"

    first, token = p.list_actors("space", 2, "")
    assert ([a.name for a in first], token) == (["a", "b"], "b")
    rest, token = p.list_actors("space", 2, token)
    assert ([a.name for a in rest], token) == (["c"], "")
    with pytest.raises(WireError) as negative:
        p.list_actors("space", -1, "")
    assert negative.value.code == "INVALID_ARGUMENT"

    a = p.actor("space", "a")
    with pytest.raises(WireError) as uid:
        await p.delete(a, uid="someone-else")
    assert uid.value.code == "ABORTED"
    with pytest.raises(WireError) as version:
        await p.delete(a, version=a.version + 7)
    assert version.value.code == "ABORTED"
    a.status = "RUNNING"  # as if woken: only any_state deletes it
    with pytest.raises(WireError) as running:
        await p.delete(a, any_state=False)
    assert running.value.code == "FAILED_PRECONDITION"
    a.status = "SUSPENDED"
    await p.delete(a, any_state=False, uid=a.uid, version=a.version)
    with pytest.raises(WireError) as gone:
        p.actor("space", "a")
    assert gone.value.code == "NOT_FOUND"


async def test_revert_takes_only_a_crashed_actor_back_to_suspended(tmp_path: Path) -> None:
    p = plane(tmp_path)
    p.ensure_atespace("space")
    actor = await p.create_actor("space", "a", None, {})
    with pytest.raises(WireError) as suspended:
        await p.revert(actor)
    assert suspended.value.code == "FAILED_PRECONDITION"
    actor.status = "CRASHED"
    await p.revert(actor)
    assert (actor.status, actor.version) == ("SUSPENDED", 1)
