"""One worker's glutton holding several actors (docs/SPEC.md §2.7): each request works on the
actor the router named (REQUESTED_ACTOR, set per request), each actor's arrays its own; a
request naming none is for the only running actor, and refused when several run."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_substrate.glutton import REQUESTED_ACTOR, ActorState, Glutton
from local_substrate.protocol import WireError


def glutton_with(tmp_path: Path, *actors: str) -> Glutton:
    glutton = Glutton(seed=1, max_op_bytes=1 << 20, max_burn_millis=10, max_parallel=1)
    for actor in actors:
        files = tmp_path / actor.replace("/", "@")
        files.mkdir()
        glutton.running[actor] = ActorState(actor=actor, limit=1 << 20, files_dir=files)
    return glutton


async def write_as(glutton: Glutton, actor: str | None, size: int) -> int:
    token = REQUESTED_ACTOR.set(actor)
    try:
        return await glutton.write_ram("k", size, "truncate")
    finally:
        REQUESTED_ACTOR.reset(token)


async def test_each_request_works_on_the_actor_it_names(tmp_path: Path) -> None:
    glutton = glutton_with(tmp_path, "s/a", "s/b")
    assert await write_as(glutton, "s/a", 1000) == 1000
    assert await write_as(glutton, "s/b", 3000) == 3000
    assert glutton.running["s/a"].used() == 1000
    assert glutton.running["s/b"].used() == 3000
    assert glutton.running["s/a"].arrays["k"] != glutton.running["s/b"].arrays["k"][:1000]


async def test_a_request_for_an_actor_not_here_or_for_none_of_several(tmp_path: Path) -> None:
    glutton = glutton_with(tmp_path, "s/a", "s/b")
    with pytest.raises(WireError, match="actor s/gone does not run on this worker"):
        await write_as(glutton, "s/gone", 10)
    with pytest.raises(WireError, match="runs 2 actors; the request names none"):
        await write_as(glutton, None, 10)
    (tmp_path / "alone").mkdir()
    alone = glutton_with(tmp_path / "alone", "s/c")
    assert await write_as(alone, None, 10) == 10  # the only one: as with one actor per worker
