"""Agent Substrate's own wire (docs/SPEC.md §2, "ate"): the control API as gRPC
(`ateapi.Control`) and glutton bodies as protobuf through the router. proto/ holds our .proto
files and their committed protoc output (regenerate.py rebuilds it); glutton_codec and
control_codec translate between those messages and the engine's terms; control is the gRPC
client."""
