"""Generate the Python gRPC code from proto/ — the one way generated code is made.

    python scripts/gen_proto.py            # regenerate in place
    python scripts/gen_proto.py --check    # exit 1 if the checked-in code is not what proto/ generates

Each .proto maps to the package that owns it; imports inside generated code follow that package path.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {  # proto file -> package directory its code goes to
    "quorum.proto": "quorum/transport/pb",
    "controller.proto": "pykraft/api",
    "broker.proto": "pykraft/api",
}


def generate(out: Path) -> list[Path]:
    produced = []
    for proto, package in TARGETS.items():
        args = [
            "grpc_tools.protoc",
            f"-I{package}={ROOT / 'proto'}",
            f"-I{Path(protoc.__file__).parent / '_proto'}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            f"--pyi_out={out}",
            str(ROOT / "proto" / proto),
        ]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {proto}")
        stem = proto.removesuffix(".proto")
        produced += [Path(package) / f"{stem}{suffix}" for suffix in ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi")]
    return produced


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = generate(Path(tmp))
        stale = [f for f in files if not (ROOT / f).exists() or not filecmp.cmp(Path(tmp) / f, ROOT / f, shallow=False)]
        if args.check:
            for f in stale:
                print(f"{f} is not what proto/ generates: run python scripts/gen_proto.py", file=sys.stderr)
            return 1 if stale else 0
        for f in files:
            (ROOT / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(tmp) / f, ROOT / f)
            print(f"wrote {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
