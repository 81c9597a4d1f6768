"""Regenerate the Python stubs in cuzktui/proto/ from protos/cuzk/v1/proving.proto.

Usage: python protos/generate.py [OUTPUT_DIR]

The stubs are committed; tests/test_proto_stubs.py regenerates them into a temporary
directory and fails when the committed copies differ. grpcio-tools and mypy-protobuf are
pinned in pyproject so that the output is byte-for-byte reproducible.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
PROTO_FILE = PROTO_ROOT / "cuzk" / "v1" / "proving.proto"
DEFAULT_OUT = ROOT / "cuzktui" / "proto"
GENERATED = ("proving_pb2.py", "proving_pb2.pyi", "proving_pb2_grpc.py", "proving_pb2_grpc.pyi")


def generate(out_dir: Path) -> list[Path]:
    """Write the stubs into out_dir with package-relative imports; return their paths."""
    from grpc_tools import protoc

    # protoc finds the mypy plugins on PATH; they sit beside this interpreter in a venv.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")

    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "protoc",
            f"-I{PROTO_ROOT}",
            f"--python_out={tmp}",
            f"--grpc_python_out={tmp}",
            f"--mypy_out={tmp}",
            f"--mypy_grpc_out={tmp}",
            str(PROTO_FILE),
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for name in GENERATED:
            text = (Path(tmp) / "cuzk" / "v1" / name).read_text()
            # Generated code imports "cuzk.v1.proving_pb2"; the stubs live inside our package.
            text = text.replace("from cuzk.v1 import proving_pb2", "from . import proving_pb2")
            text = text.replace("import cuzk.v1.proving_pb2", "from . import proving_pb2")
            text = text.replace("cuzk.v1.proving_pb2.", "proving_pb2.")
            target = out_dir / name
            target.write_text(text)
            written.append(target)
    return written


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    for path in generate(out):
        print(path)


if __name__ == "__main__":
    main()
