"""Reading what scanners find on disk, under the scan's limits and inside each source's root.

Every file is listed in name order up to `max_files_per_dir`, resolved (symlinks included)
and refused as `path_not_allowed` when it leaves its root, opened without following a
final symlink and without blocking on a FIFO, checked to be a regular file no larger than
`max_manifest_bytes`, and parsed by its suffix (YAML with the safe loader, JSON, TOML).
Nothing found is ever executed. Schema errors become diagnostics that say where (a JSON
pointer), what was expected, and a short, redacted summary of what was there.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._yaml import YamlError, safe_load
from ._context import Limits
from ._model import Diagnostic
from ._redact import REDACTED, is_secret_key

if TYPE_CHECKING:
    import jsonschema

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class FileFacts:
    """A manifest as read: its canonical path, display path, content hash and mtime."""

    path: Path
    display: str
    sha256: str
    mtime: float


class Unreadable(Exception):
    """The file cannot be used; `diagnostic` says why."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def display_path(path: Path, home: Path | None, base: Path | None = None) -> str:
    """`path` as an operator reads it: relative to the config's directory, or `~/...`."""
    for root, prefix in ((base, ""), (home, "~/")):
        if root is not None:
            try:
                rel = path.relative_to(root)
            except ValueError:
                continue
            return f"{prefix}{rel}" if str(rel) != "." else (prefix.rstrip("/") or ".")
    return str(path)


def inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def list_files(
    directory: Path, suffixes: Iterable[str], limits: Limits, display: str
) -> tuple[list[Path], list[Diagnostic]]:
    """Files in `directory` (not recursive) with one of `suffixes`, in name order, at most
    `max_files_per_dir`. A missing directory has none."""
    wanted = tuple(suffixes)
    try:
        names = sorted(
            entry.name
            for entry in os.scandir(directory)
            if entry.name.endswith(wanted) and not entry.name.startswith(".")
        )
    except (FileNotFoundError, NotADirectoryError):
        return [], []
    except PermissionError:
        return [], [Diagnostic("error", "permission_denied", f"{display}: permission denied")]
    notes: list[Diagnostic] = []
    if len(names) > limits.max_files_per_dir:
        notes.append(
            Diagnostic(
                "warning",
                "io",
                f"{display}: {len(names)} files, only the first {limits.max_files_per_dir} "
                "(by name) were read (max_files_per_dir)",
            )
        )
        names = names[: limits.max_files_per_dir]
    return [directory / name for name in names], notes


def read_file(path: Path, root: Path, limits: Limits, display: str) -> tuple[bytes, FileFacts]:
    """The bytes of `path`, which must stay inside `root` once symlinks are resolved."""
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if not inside(real, real_root):
        raise Unreadable(
            Diagnostic(
                "error",
                "path_not_allowed",
                f"{display} resolves outside {real_root} (a symlink leads out)",
                source=display,
            )
        )
    try:
        fd = os.open(real, _OPEN)
    except PermissionError:
        raise Unreadable(
            Diagnostic(
                "error", "permission_denied", f"{display}: permission denied", source=display
            )
        ) from None
    except OSError as exc:
        raise Unreadable(
            Diagnostic("error", "io", f"{display}: {exc.strerror}", source=display)
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(
                Diagnostic("error", "io", f"{display}: not a regular file", source=display)
            )
        if info.st_size > limits.max_manifest_bytes:
            raise Unreadable(
                Diagnostic(
                    "error",
                    "schema_invalid",
                    f"{display}: {info.st_size} bytes, over max_manifest_bytes "
                    f"({limits.max_manifest_bytes})",
                    source=display,
                )
            )
        data = os.read(fd, limits.max_manifest_bytes + 1)
        if len(data) > limits.max_manifest_bytes:  # it grew while we looked
            raise Unreadable(
                Diagnostic(
                    "error", "schema_invalid", f"{display}: over max_manifest_bytes", source=display
                )
            )
    finally:
        os.close(fd)
    facts = FileFacts(real, display, hashlib.sha256(data).hexdigest(), info.st_mtime)
    return data, facts


def parse(data: bytes, suffix: str, display: str) -> Any:
    """YAML (safe loader), JSON or TOML by suffix; a syntax error is `invalid_yaml`."""
    try:
        text = data.decode("utf-8")
        if suffix in (".yaml", ".yml"):
            return safe_load(text)
        if suffix == ".json":
            return json.loads(text)
        if suffix == ".toml":
            return tomllib.loads(text)
    except (UnicodeDecodeError, YamlError, json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise Unreadable(
            Diagnostic("error", "invalid_yaml", f"{display}: cannot parse: {first}", source=display)
        ) from None
    except RecursionError:
        raise Unreadable(
            Diagnostic("error", "invalid_yaml", f"{display}: nested too deeply", source=display)
        ) from None
    raise Unreadable(
        Diagnostic("error", "unsupported_kind", f"{display}: unknown file type", source=display)
    )


def schema_diagnostics(
    document: Any, schema: dict[str, Any], display: str, limit: int = 10
) -> list[Diagnostic]:
    """Every way `document` breaks `schema` (the first `limit`), as diagnostics."""
    # jsonschema loads with the first manifest checked: none, none loaded (ADR 0067).
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.path)))
    out = []
    for error in errors[:limit]:
        pointer = "".join(f"/{str(p).replace('~', '~0').replace('/', '~1')}" for p in error.path)
        key = str(error.path[-1]) if error.path else ""
        out.append(
            Diagnostic(
                "error",
                "schema_invalid",
                f"{display}{' at ' + pointer if pointer else ''}: {_expected(error)}",
                source=display,
                pointer=pointer or "/",
                expected=_expected(error),
                actual=REDACTED if is_secret_key(key) else summary(error.instance),
            )
        )
    return out


def _expected(error: jsonschema.ValidationError) -> str:
    value: Any = error.validator_value
    instance: Any = error.instance
    if error.validator == "required":
        present = instance if isinstance(instance, dict) else {}
        missing = [name for name in value if name not in present]
        return f"required: {', '.join(missing)}"
    if error.validator == "additionalProperties":
        return "no other keys (" + error.message.split("(")[-1].rstrip(")") + ")"
    if error.validator in ("type", "enum", "const", "pattern", "minItems", "maxLength"):
        return f"{error.validator} {json.dumps(value)[:80]}"
    return str(error.validator)


def summary(value: Any) -> str:
    """What was there, short and without content that could be a secret's."""
    if isinstance(value, dict):
        return f"an object with {len(value)} key{'s' if len(value) != 1 else ''}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"[:40]
