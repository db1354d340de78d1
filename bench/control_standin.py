"""A fast stand-in for ateapi.Control (bench/control.py's target): a grpc.aio server on the
generated stubs that answers every call at once from an in-memory dict of actors, so what the
bench measures is the generator's side of each call, not a substrate's work.

  python bench/control_standin.py            # prints grpc://127.0.0.1:PORT, serves until killed

Each answer carries `x-server-elapsed-us` like the real API's (the engine books it); an actor
asked about that was never created is made on the spot, so a generator can park and wake any
name without registering it first.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

import grpc
import uvloop

from agentsession_core.substrate.ate.proto import ateapi_pb2 as pb
from agentsession_core.substrate.ate.proto import ateapi_pb2_grpc as pb_grpc

ELAPSED = (("x-server-elapsed-us", "5"),)
GIB = str(2**30)


class FastControl(pb_grpc.ControlServicer):
    def __init__(self) -> None:
        self.actors: dict[tuple[str, str], pb.Actor] = {}

    def _actor(self, ref: pb.ObjectRef) -> pb.Actor:
        key = (ref.atespace, ref.name)
        actor = self.actors.get(key)
        if actor is None:
            actor = self.actors[key] = pb.Actor(
                metadata=pb.ResourceMetadata(atespace=ref.atespace, name=ref.name, version=1)
            )
        return actor

    def _set(self, ref: pb.ObjectRef, state: int, context: Any) -> pb.Actor:
        actor = self._actor(ref)
        actor.status.state = state
        actor.metadata.version += 1
        context.set_trailing_metadata(ELAPSED)
        return actor

    async def GetActorTemplate(self, request: Any, context: Any) -> pb.ActorTemplate:
        ref = request.actor_template
        context.set_trailing_metadata(ELAPSED)
        return pb.ActorTemplate(
            metadata=pb.ResourceMetadata(atespace=ref.atespace, name=ref.name),
            resources=pb.Resources(limits=[pb.Limits(name="memory", quantity=GIB)]),
        )

    async def CreateAtespace(self, request: Any, context: Any) -> pb.Atespace:
        context.set_trailing_metadata(ELAPSED)
        return request.atespace

    async def CreateActor(self, request: Any, context: Any) -> pb.Actor:
        meta = request.actor.metadata
        ref = pb.ObjectRef(atespace=meta.atespace, name=meta.name)
        return self._set(ref, pb.ACTOR_STATE_RUNNING, context)

    async def GetActor(self, request: Any, context: Any) -> pb.Actor:
        context.set_trailing_metadata(ELAPSED)
        return self._actor(request.actor)

    async def ListActors(self, request: Any, context: Any) -> pb.ListActorsResponse:
        context.set_trailing_metadata(ELAPSED)
        mine = [a for (space, _), a in self.actors.items() if space == request.atespace]
        return pb.ListActorsResponse(actors=mine)

    async def ResumeActor(self, request: Any, context: Any) -> pb.ResumeActorResponse:
        actor = self._set(request.actor, pb.ACTOR_STATE_RUNNING, context)
        return pb.ResumeActorResponse(actor=actor, resumed=True)

    async def SuspendActor(self, request: Any, context: Any) -> pb.SuspendActorResponse:
        return pb.SuspendActorResponse(
            actor=self._set(request.actor, pb.ACTOR_STATE_SUSPENDED, context)
        )

    async def PauseActor(self, request: Any, context: Any) -> pb.PauseActorResponse:
        return pb.PauseActorResponse(actor=self._set(request.actor, pb.ACTOR_STATE_PAUSED, context))

    async def DeleteActor(self, request: Any, context: Any) -> pb.Actor:
        context.set_trailing_metadata(ELAPSED)
        return self.actors.pop((request.actor.atespace, request.actor.name), pb.Actor())


async def serve(port: int) -> None:
    server = grpc.aio.server()
    pb_grpc.add_ControlServicer_to_server(FastControl(), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(f"grpc://127.0.0.1:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    uvloop.run(serve(args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
