"""What the kernel must let a program execute for it to run at all: the program, its ELF
loader, and for a script the interpreter its `#!` line names (through `/usr/bin/env NAME`
too, resolved on the program's PATH), each with its own loader. A command sandbox that
allows only the program would make every script fail with "permission denied"."""

from __future__ import annotations

import os
import shutil

from ._landlock import loader_of

MAX_DEPTH = 4  # a script whose interpreter is a script whose ... (rare; bounded)
SHEBANG_BYTES = 256


def _shebang(program: str) -> list[str]:
    try:
        with open(program, "rb") as fh:
            head = fh.read(SHEBANG_BYTES)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", errors="replace")
    return line.split()


def program_executables(program: str, path: str) -> tuple[str, ...]:
    """Real paths the kernel executes to run `program` (see the module docstring)."""
    found: list[str] = []
    current: str | None = program
    for _ in range(MAX_DEPTH):
        if current is None:
            break
        real = os.path.realpath(current)
        if real in found:
            break
        found.append(real)
        loader = loader_of(real)
        if loader is not None:
            found.append(os.path.realpath(loader))
            break  # an ELF program: nothing further
        words = _shebang(real)
        if not words:
            break
        interpreter = words[0]
        if os.path.basename(interpreter) == "env":
            found.append(os.path.realpath(interpreter))
            loader = loader_of(os.path.realpath(interpreter))
            if loader is not None:
                found.append(os.path.realpath(loader))
            name = next((w for w in words[1:] if not w.startswith("-")), None)
            current = shutil.which(name, path=path) if name else None
        else:
            current = interpreter
    return tuple(dict.fromkeys(found))
