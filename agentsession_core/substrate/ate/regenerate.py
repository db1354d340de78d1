"""Regenerates the committed Python code for the ate .proto files in proto/.

    python -m agentsession_core.substrate.ate.regenerate

writes proto/{ateapi,glutton,ateapi_sep}_pb2.py, _pb2.pyi and _pb2_grpc.py next to the .proto
files. protoc runs with the directory holding `agentsession_core` as its only import root, so
the generated imports are package paths (`from agentsession_core.substrate.ate.proto import
...`). Needs the dev extra: grpcio-tools is pinned exactly there because the generated text
changes with its version and tests/unit/test_ate_generated.py compares it byte for byte.

ateapi_sep.proto (the newest control API, whole) declares the same `ateapi.*` names as
ateapi.proto, because the package makes the gRPC method paths. Protobuf refuses a second
definition of a name in one descriptor pool, so its generated module is rewritten to load
into a pool of its own (PRIVATE_POOL): a test can then hold a client built from one file and a
server built from the other in one process, as two peers built apart would be.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent / "proto"
# The directory that contains the agentsession_core package.
IMPORT_ROOT = PROTO_DIR.parents[3]
PROTO_FILES = ("ateapi.proto", "glutton.proto", "ateapi_sep.proto")
# Generated modules that load into their own descriptor pool (see the module docstring).
PRIVATE_POOL = ("ateapi_sep_pb2.py",)
_DEFAULT_POOL = "DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile("
# The private pool holds the well-known types the file imports, then the file itself.
_PRIVATE_POOL = """# In a pool of its own (regenerate.py): the default one
# holds ateapi_pb2's definitions of the same names.
_POOL = _descriptor_pool.DescriptorPool()
for _dependency in (google_dot_protobuf_dot_empty__pb2, google_dot_protobuf_dot_timestamp__pb2):
  _POOL.AddSerializedFile(_dependency.DESCRIPTOR.serialized_pb)
DESCRIPTOR = _POOL.AddSerializedFile("""


def generated_names() -> list[str]:
    """The files protoc writes for PROTO_FILES, relative to PROTO_DIR."""
    stems = [name.removesuffix(".proto") for name in PROTO_FILES]
    return [
        f"{stem}{suffix}" for stem in stems for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
    ]


def regenerate(out_root: Path = IMPORT_ROOT) -> Path:
    """Runs protoc into `out_root` (mirroring the package layout under it) and returns the
    directory the generated files landed in."""
    from grpc_tools import protoc  # dev-only dependency, imported when regenerating

    # The well-known types (google/protobuf/timestamp.proto) ship inside grpcio-tools;
    # `python -m grpc_tools.protoc` adds them itself, protoc.main() does not.
    well_known = resources.files("grpc_tools") / "_proto"
    out_root.mkdir(parents=True, exist_ok=True)
    # One protoc run per pool: protoc, too, refuses two definitions of a name in one run.
    private = [name for name in PROTO_FILES if _module(name) in PRIVATE_POOL]
    for group in ([n for n in PROTO_FILES if n not in private], private):
        args = [
            "grpc_tools.protoc",
            f"-I{IMPORT_ROOT}",
            f"-I{well_known}",
            f"--python_out={out_root}",
            f"--pyi_out={out_root}",
            f"--grpc_python_out={out_root}",
            *(str(PROTO_DIR / name) for name in group),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed: {' '.join(args)}")
    where = out_root / PROTO_DIR.relative_to(IMPORT_ROOT)
    for name in PRIVATE_POOL:
        _use_private_pool(where / name)
    return where


def _module(proto: str) -> str:
    return f"{proto.removesuffix('.proto')}_pb2.py"


def _use_private_pool(module: Path) -> None:
    text = module.read_text()
    if text.count(_DEFAULT_POOL) != 1:
        raise RuntimeError(f"{module}: protoc's output changed shape; cannot move it to a pool")
    module.write_text(text.replace(_DEFAULT_POOL, _PRIVATE_POOL))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--out",
        type=Path,
        default=IMPORT_ROOT,
        help="root to write under (default: in place, next to the .proto files)",
    )
    args = parser.parse_args(argv)
    where = regenerate(args.out)
    for name in generated_names():
        print(where / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
