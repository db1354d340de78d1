"""Wakes the platform cannot fake (issue 37, docs/SPEC.md §3.4), over real processes: the local
substrate as a subprocess on real sockets, with its faults on demand.

- `suspend:ignore:1`: every SuspendActor answers OK and the actor keeps running. In explicit
  mode every ResumeActor then answers resumed=false, on the JSON wire and the ate wire alike:
  every wake is booked failed NOT_SUSPENDED and no TimeToWake sample is booked. In implicit
  mode the router serves the running actor at once, so only the parks read back
  (`population.park_check_share`) can tell: they are booked NOT_SUSPENDED, and the wakes
  after them failed, never as samples.
- `store:throttle`: the snapshot store refuses as a throttled bucket does; both wires' answers
  reach the client as STORE_THROTTLED, retried later, and the run's report names the class.

Each run holds until its own books show enough (a count, never a length of time).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.measure.stats import CONTROL_KIND, TIME_TO_WAKE_ROW, RowStats
from agentsession_core.run.run import Run
from agentsession_core.substrate.ate.substrate import AteSubstrate
from agentsession_core.substrate.errors import (
    NOT_SUSPENDED,
    STORE_THROTTLED,
    FailureClass,
    SubstrateError,
)
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess

pytestmark = pytest.mark.timeout(180)
TOKEN = "wake-truth-token"
GLUTTON = ("benchmark-workloads", "glutton")
CAP_S = 60.0  # only a hang holds this long: every hold ends on its condition
REACHED = "the test's condition was reached"
PARK_CHECK = (CONTROL_KIND, "GetActor_ParkCheck")


@pytest.fixture(scope="module")
def ignoring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    """A substrate that never suspends: room for every actor to stay running."""
    root = tmp_path_factory.mktemp("suspend-ignore")
    with LocalSubstrateProcess(
        workers=2,
        worker_capacity=4,
        store=root / "store",
        token=TOKEN,
        faults=["suspend:ignore:1"],
        log_path=root / "log",
    ) as proc:
        yield proc


@pytest.fixture(scope="module")
def store_faults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    root = tmp_path_factory.mktemp("store-throttle")
    with LocalSubstrateProcess(
        workers=2, store=root / "store", token=TOKEN, log_path=root / "log"
    ) as proc:
        yield proc


def target(proc: LocalSubstrateProcess, wire: str) -> dict[str, Any]:
    if wire == "ate":
        return {"protocol": "ate", "substrate": proc.grpc_url, "router": proc.url, "token": TOKEN}
    return {"substrate": proc.url, "token": TOKEN}


def booked(run: Run, key: tuple[str, str]) -> RowStats:
    return run.recorder.totals().row(*key)


async def hold(out: Path, params: dict[str, Any], until: Callable[[Run], bool]) -> Run:
    """One run: start it, hold until `until(run)` holds on its own books, finish, clean up."""
    from agentsession_core.engine.params import RunParams

    run_params = RunParams(
        out=str(out),
        script="smoke",
        think_scale=0.05,
        seed=11,
        cleanup={"stop_grace_seconds": 2.0, "timeout_seconds": 30},
        **params,
    )
    run = Run(run_params, handle_signals=False)
    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        _, _, reason = await run.hold(CAP_S, should_stop=lambda: REACHED if until(run) else None)
        assert reason == REACHED, f"held {CAP_S} s without reaching the condition: {reason}"
        run.finish("completed")
    assert run.result is not None
    return run


def turnover(**extra: Any) -> dict[str, Any]:
    return {
        "kind": "turnover",
        "sessions": 6,
        "awake": 2,
        "target_rps": 3,
        "registration_quiet_seconds": 0.2,
        "spawn_rate": 50.0,
        **extra,
    }


@pytest.mark.parametrize("wire", ["json", "ate"])
async def test_explicit_wakes_of_actors_that_never_parked_are_failed_not_suspended(
    ignoring: LocalSubstrateProcess, tmp_path: Path, wire: str
) -> None:
    params = {"target": target(ignoring, wire), "population": turnover(resume_mode="explicit")}
    run = await hold(tmp_path, params, lambda r: booked(r, TIME_TO_WAKE_ROW).failures >= 8)
    wakes = booked(run, TIME_TO_WAKE_ROW)
    resumes = booked(run, (CONTROL_KIND, "ResumeActor"))
    # Every wake failed, every failure NOT_SUSPENDED: not one TimeToWake sample.
    assert wakes.count == wakes.failures >= 8
    assert set(wakes.errors) == {NOT_SUSPENDED}
    # ResumeActor's own row agrees: it resumed nothing, so it is no resume either.
    assert resumes.count == resumes.failures and set(resumes.errors) == {NOT_SUSPENDED}
    assert run.result is not None
    report = (run.result.run_dir / "report.html").read_text()
    assert "NOT_SUSPENDED" in report and "not_suspended" in report


async def test_implicit_mode_reads_parks_back_and_fails_the_wakes_after_them(
    ignoring: LocalSubstrateProcess, tmp_path: Path
) -> None:
    params = {
        "target": target(ignoring, "json"),
        "population": turnover(park_check_share=1.0),
    }

    def enough(run: Run) -> bool:
        return booked(run, PARK_CHECK).failures >= 6 and booked(run, TIME_TO_WAKE_ROW).failures >= 3

    run = await hold(tmp_path, params, enough)
    checks = booked(run, PARK_CHECK)
    wakes = booked(run, TIME_TO_WAKE_ROW)
    # What the client can know in implicit mode: the parks read back were all still running.
    assert checks.failures >= 6 and checks.count == checks.failures
    assert set(checks.errors) == {NOT_SUSPENDED}
    # A wake after a park found running is failed NOT_SUSPENDED, never a sample. A wake that
    # began before its park's answer came cannot be told (the check is off the wake path):
    # it is the only kind of sample left, and there are never more failed wakes than finds.
    assert set(wakes.errors) <= {NOT_SUSPENDED}
    assert 3 <= wakes.failures <= checks.failures


async def test_a_resume_answers_resumed_on_both_wires(ignoring: LocalSubstrateProcess) -> None:
    """The wire fact itself: ResumeActor of a SUSPENDED actor says resumed, of one whose
    suspend was ignored says not, on the JSON wire and over gRPC."""
    json_api = HttpSubstrate(ignoring.url, token=TOKEN, control_timeout=30)
    ate_api = AteSubstrate(ignoring.grpc_url, ignoring.url, token=TOKEN, control_timeout=30)
    try:
        await json_api.ensure_atespace("resumed")
        for api, name in ((json_api, "j"), (ate_api, "g")):
            await json_api.create_actor("resumed", name, *GLUTTON)
            first = await api.resume_actor("resumed", name)  # a new actor is SUSPENDED
            assert first.resumed is True and first.status == "RUNNING"
            await api.suspend_actor("resumed", name)  # answered OK, ignored
            assert (await api.get_actor("resumed", name)).status == "RUNNING"
            again = await api.resume_actor("resumed", name)
            assert again.resumed is False and again.status == "RUNNING"
            await json_api.delete_actor("resumed", name)
    finally:
        await json_api.aclose()
        await ate_api.aclose()


async def set_faults(proc: LocalSubstrateProcess, rules: list[str]) -> None:
    await asyncio.to_thread(proc.set_faults, rules)  # PUT /v1/debug/faults


async def test_a_throttling_store_reaches_both_wires_as_store_throttled(
    store_faults: LocalSubstrateProcess,
) -> None:
    json_api = HttpSubstrate(store_faults.url, token=TOKEN, control_timeout=30, router_timeout=30)
    ate_api = AteSubstrate(store_faults.grpc_url, store_faults.url, token=TOKEN, control_timeout=30)
    space = "throttle"
    try:
        await set_faults(store_faults, [])
        await json_api.ensure_atespace(space)
        for name in ("w", "r"):
            await json_api.create_actor(space, name, *GLUTTON)
            await json_api.request(space, name, "ping", json={"message": "x"})
        await json_api.suspend_actor(space, "r")  # its snapshot is in the store
        await set_faults(store_faults, ["store:throttle:1"])
        # A write (SuspendActor) on both control wires: 429 / RESOURCE_EXHAUSTED, in words
        # the client reads as the store's throttling.
        for api in (json_api, ate_api):
            with pytest.raises(SubstrateError) as caught:
                await api.suspend_actor(space, "w")
            error = caught.value
            assert error.code == STORE_THROTTLED, error
            assert error.failure_class is FailureClass.RETRY_LATER
            assert "SlowDown" in error.message
        assert (await json_api.get_actor(space, "w")).status == "RUNNING"
        # A read (a wake's restore): ResumeActor on both wires, and the router's verdict on
        # the JSON wire and as the ate router's text.
        for api in (json_api, ate_api):
            with pytest.raises(SubstrateError) as caught:
                await api.resume_actor(space, "r")
            assert caught.value.code == STORE_THROTTLED, caught.value
            with pytest.raises(SubstrateError) as caught:
                await api.request(space, "r", "ping", json={"message": "x"})
            assert caught.value.code == STORE_THROTTLED, caught.value
            assert caught.value.failure_class is FailureClass.RETRY_LATER
        assert (await json_api.get_actor(space, "r")).status == "SUSPENDED"
    finally:
        await set_faults(store_faults, [])
        for actor in await json_api.list_actors(space):
            await json_api.delete_actor(space, actor.name)
        await json_api.aclose()
        await ate_api.aclose()


async def test_a_run_books_store_throttling_as_its_own_class(
    store_faults: LocalSubstrateProcess, tmp_path: Path
) -> None:
    await set_faults(store_faults, ["store:throttle:0.5"])
    params = {
        "target": target(store_faults, "json"),
        "population": {
            "kind": "closed",
            "sessions": 2,
            "spawn_rate": 50.0,
            "registration_quiet_seconds": 0.0,
        },
    }

    def enough(run: Run) -> bool:
        parks = booked(run, (CONTROL_KIND, "SuspendActor"))
        # …and a step answered: a run stopped before any did ends failed, however the parks
        # went (on a slow box the first throttled parks can come before it).
        return (
            parks.errors[STORE_THROTTLED] >= 2
            and parks.count > parks.failures
            and run.no_step_succeeded() is None
        )

    try:
        run = await asyncio.wait_for(hold(tmp_path, params, enough), CAP_S * 2)
    finally:
        await set_faults(store_faults, [])
    assert run.result is not None
    # Throttled parks are retried later (never counted toward a replacement).
    assert booked(run, (CONTROL_KIND, "DeleteActor")).count == 0
    report = (run.result.run_dir / "report.html").read_text()
    assert STORE_THROTTLED in report and ">throttled<" in report
    failures = json.loads((run.result.run_dir / "status.json").read_text())
    assert failures["status"] == "completed"
