"""Locust side of bench/run.py: FastHttpUser doing the same POST /ping, with the same header
and body, as an agentsession zero-think ping session. `ParkedUser` waits an hour between
tasks (Locust's equivalent of a parked session, for the memory-per-user figure)."""

from locust import FastHttpUser, constant, task

BODY = b'{"message":"agentsession"}'
HEADERS = {"ate-target-actor": "bench/agent-0", "Content-Type": "application/json"}


class PingUser(FastHttpUser):
    wait_time = constant(0)

    @task
    def ping(self) -> None:
        self.client.post("/ping", data=BODY, headers=HEADERS)


class ParkedUser(FastHttpUser):
    wait_time = constant(3600)

    @task
    def ping(self) -> None:
        self.client.post("/ping", data=BODY, headers=HEADERS)
