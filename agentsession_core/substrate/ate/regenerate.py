"""Regenerates the committed Python code for the ate .proto files in proto/.

    python -m agentsession_core.substrate.ate.regenerate

writes proto/{ateapi,glutton}_pb2.py, _pb2.pyi and _pb2_grpc.py next to the .proto files.
protoc runs with the directory holding `agentsession_core` as its only import root, so the
generated imports are package paths (`from agentsession_core.substrate.ate.proto import ...`).
Needs the dev extra: grpcio-tools is pinned exactly there because the generated text changes
with its version and tests/unit/test_ate_generated.py compares it byte for byte.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent / "proto"
# The directory that contains the agentsession_core package.
IMPORT_ROOT = PROTO_DIR.parents[3]
PROTO_FILES = ("ateapi.proto", "glutton.proto")


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
    args = [
        "grpc_tools.protoc",
        f"-I{IMPORT_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *(str(PROTO_DIR / name) for name in PROTO_FILES),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")
    return out_root / PROTO_DIR.relative_to(IMPORT_ROOT)


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
