"""Build hook: generates the gRPC stubs of idem.v1 from the repository's proto/ files.

The stubs are never checked in, so they cannot drift from the contract: every wheel is built
from the .proto files next to it. grpc_tools writes modules that import each other as
``idem.v1.*``; they are placed under ``idem_client._pb`` and their imports rewritten to match,
so the package never claims the top-level name ``idem``.

Where the .proto files are looked for, in order: ``$IDEM_PROTO_DIR``, ``proto/`` beside this
file (an sdist carries a copy there), ``../../proto`` (this directory inside the repository).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
PROTOS = ("idem/v1/idempotency.proto", "idem/v1/admin.proto")
IMPORT = re.compile(r"^from idem\.v1 import", re.MULTILINE)


def proto_root() -> Path:
    """The directory holding idem/v1/*.proto."""
    candidates = [os.environ.get("IDEM_PROTO_DIR"), HERE / "proto", HERE.parent.parent / "proto"]
    for candidate in candidates:
        if candidate and all((Path(candidate) / p).is_file() for p in PROTOS):
            return Path(candidate)
    raise RuntimeError("idem .proto files not found: set IDEM_PROTO_DIR to the repository's proto/")


def generate(out: Path) -> None:
    """Writes idem_client/_pb/idem/v1/*_pb2*.py(i) under `out`."""
    from grpc_tools import protoc  # build requirement, imported only when building

    package = out / "idem_client" / "_pb"
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    root = proto_root()
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{root}",
        f"-I{include}",
        f"--python_out={package}",
        f"--pyi_out={package}",
        f"--grpc_python_out={package}",
        *PROTOS,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {root}")
    for directory in (package, package / "idem", package / "idem" / "v1"):
        (directory / "__init__.py").write_text('"""Generated from proto/idem/v1 at build time."""\n')
    for module in (package / "idem" / "v1").glob("*.py*"):
        text = module.read_text()
        module.write_text(IMPORT.sub("from idem_client._pb.idem.v1 import", text))


class BuildPy(build_py):
    """build_py that adds the generated stubs to the build."""

    def run(self) -> None:
        super().run()
        if not self.dry_run:
            generate(Path(self.build_lib))


class Sdist(sdist):
    """sdist that carries the .proto files, so a wheel can be built from it alone."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        root = proto_root()
        for proto in PROTOS:
            target = Path(base_dir) / "proto" / proto
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / proto, target)


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
