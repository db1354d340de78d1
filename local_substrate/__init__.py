"""The local substrate: a small but real actor platform (a control API and router in one
aiohttp process, one OS process per worker with real memory, snapshots on disk, requests
parked while an actor wakes), the product's third part and the embedded default target.

It speaks the platform's wires (the JSON API, ateapi.Control over gRPC, protobuf bodies
through the router), so it shares with the client side only the wire's modules
(agentsession_core.substrate's protocol, op limits and ate codecs), the script's quantities
and payloads, and the errors; the client side reaches it only through launcher.py and
metric_names.py. pyproject.toml's layering contract holds both directions."""
