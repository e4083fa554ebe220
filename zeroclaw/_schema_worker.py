"""A schema-validation worker: `python -m zeroclaw._schema_worker PARENT_PID`.

Top-level and light on purpose: it loads msgspec, jsonschema and RE2, not the sub-agents
package (a cold worker is on a dispatch's path). Reads `Check` frames on stdin, answers
each with one frame on stdout, until stdin closes. The daemon kills it (SIGKILL) when a
check outlives its bound, so nothing here needs to be interruptible: jsonschema runs to
the end or the process ends (ADR 0046). It dies with the daemon (PR_SET_PDEATHSIG), its
address space is capped, so a schema that makes validation allocate without end costs
this process, never the daemon, and Landlock leaves it reading only its own code.
"""

from __future__ import annotations

import functools
import os
import resource
import sys
from typing import Any

import msgspec

from ._framing import HEADER, encode_frame
from ._prctl import set_death_signal, set_not_dumpable
from ._schema_check import (
    MAX_WORKER_FRAME,
    Check,
    Invalid,
    Unusable,
    Valid,
    WorkerAnswer,
    check_decoder,
    encode,
)

_READ = (1 << 2) | (1 << 3)  # LANDLOCK_ACCESS_FS_READ_FILE | READ_DIR (the kernel's ABI)
_SYSTEM_LIBRARIES = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/lib32", "/usr/local/lib")
ADDRESS_SPACE_BYTES = 1 << 30  # ample for jsonschema over a frame's input; finite


@functools.lru_cache(maxsize=64)
def _validator(schema: bytes) -> Any:
    from ._jsonschema import SchemaValidator

    return SchemaValidator(msgspec.json.decode(schema))


def answer(check: Check) -> WorkerAnswer:
    """One check, as pure as jsonschema is: the best-matching error, or valid."""
    from jsonschema.exceptions import best_match

    try:
        instance = msgspec.json.decode(check.instance)
        error = best_match(_validator(check.schema).iter_errors(instance))
    except Exception as exc:  # RecursionError, an unresolvable $ref: the schema's fault
        return Unusable(f"{type(exc).__name__}: {exc}"[:500])
    if error is None:
        return Valid()
    return Invalid(error.message[:2000], json_pointer(error.absolute_path))


def json_pointer(path: Any) -> str:
    """As zeroclaw.subagents.json_pointer (this process does not load that package)."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else ""


def _read_exactly(stream: Any, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def serve(stdin: Any, stdout: Any) -> None:
    while True:
        header = _read_exactly(stdin, HEADER.size)
        if header is None:
            return
        (size,) = HEADER.unpack(header)
        if size > MAX_WORKER_FRAME:
            return  # the daemon never sends one: not a daemon talking
        payload = _read_exactly(stdin, size)
        if payload is None:
            return
        stdout.write(encode_frame(encode(answer(check_decoder.decode(payload)))))
        stdout.flush()


def confine() -> bool:
    """Landlock for the rest of this process's life: read the interpreter's, zeroclaw's and
    the system's library directories (for lazy imports), write nothing anywhere, neither signal
    nor reach an abstract socket outside its domain, no network at all (no TCP by Landlock,
    no IP socket by seccomp: a check needs none); no new privileges. False where the kernel
    has no Landlock (the check still runs: it only reads what it was sent)."""
    import zeroclaw

    from .policy import (
        SandboxPlan,
        SandboxUnavailable,
        abi_version,
        build_ruleset,
        cap_last_cap,
        decide_confinement,
        enforce_ruleset,
        forbid_user_namespaces,
    )

    roots = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.path.dirname(zeroclaw.__file__),
        *_SYSTEM_LIBRARIES,  # shared objects loaded late (libgcc_s for unwinding)
    }
    rules = tuple((root, _READ) for root in sorted(roots) if os.path.isdir(root))
    # A probe's confinement: TCP handled, no port to reach (ADR 0043).
    nowhere = decide_confinement("probe", abi_version(), cap_last_cap=cap_last_cap())
    try:
        ruleset = build_ruleset(SandboxPlan(rules), nowhere)
    except SandboxUnavailable:
        return False
    try:
        enforce_ruleset(ruleset)
    finally:
        os.close(ruleset)
    forbid_user_namespaces(no_inet=True)  # stacked on enforce_ruleset's: no UDP either
    return True


def main(argv: list[str]) -> int:
    set_death_signal(int(argv[1]))
    set_not_dumpable()
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))
    # Imported before the first check, so that the first check pays no import.
    from . import _jsonschema  # noqa: F401

    confine()
    serve(sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
