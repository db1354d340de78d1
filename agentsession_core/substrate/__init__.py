"""The substrate under test (docs/SPEC.md §2): the interface the engine drives
(interface.py), its errors and their classification (errors.py), the wire names
(protocol.py), the HTTP client (http.py) and an in-memory fake for tests (fake.py). The
embedded local substrate is a package of its own (local_substrate/), which shares this
package's wire modules.

HttpSubstrate is imported on first use: it pulls in httpx and aiohttp, which a test that
only needs FakeSubstrate should not pay for.

Every module here that loads gRPC (the ate wire's client, the local substrate's ateapi.Control
server) comes through this package first, so gRPC's C core is told, unless the environment
already says otherwise, to log errors only: its INFO lines ("Handshake failed with error
SSL_ERROR_SSL ...") would land on a run's stderr beside the one line that says what is wrong.
gRPC reads the setting once, when it is first imported.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.fake import FakeSubstrate
from agentsession_core.substrate.interface import ActorInfo, RouterResponse, Substrate, Template

if TYPE_CHECKING:
    from agentsession_core.substrate.http import HttpSubstrate

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

__all__ = [
    "ActorInfo",
    "FakeSubstrate",
    "HttpSubstrate",
    "RouterResponse",
    "Substrate",
    "SubstrateError",
    "Template",
]


def __getattr__(name: str) -> Any:
    if name == "HttpSubstrate":
        from agentsession_core.substrate.http import HttpSubstrate

        return HttpSubstrate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
