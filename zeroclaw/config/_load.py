"""Read a TOML file into a validated `Config`, collecting every problem into one ConfigError.

Validation runs in two passes so an operator sees all mistakes at once:

1. the whole document through the pydantic models (shape, types, ranges, unknown keys);
2. if that fails, each broken entry is pruned and the rest validated again, so the
   cross-entry rules of `_rules.py` still run over everything that is well-formed.
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ._errors import ConfigError, ConfigIssue, KeyPath, did_you_mean
from ._locate import system_dir_defaults
from ._models import Config
from ._resolve import daemon_paths
from ._rules import Declared, check_rules

# How deep a "named entry" sits under each top-level table: a broken entry is pruned whole.
_ENTRY_DEPTH = {
    "daemon": 1,
    "providers": 3,
    "channels": 3,
    "risk_profiles": 2,
    "runtime_profiles": 2,
    "agents": 2,
    "peer_groups": 2,
}

MAX_CONFIG_BYTES = 16 * 1024 * 1024


def load_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Config:
    """Read, parse and validate the file at `path`; raise ConfigError on any problem."""
    source = os.fspath(path)
    try:
        with open(source, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise _file_error(
            source, "file not found; create one with 'zeroclaw config init'"
        ) from None
    except IsADirectoryError:
        raise _file_error(source, "is a directory, not a config file") from None
    except PermissionError:
        raise _file_error(source, "permission denied reading the config file") from None
    except OSError as exc:
        raise _file_error(source, f"cannot read the config file: {exc.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise _file_error(source, f"larger than {MAX_CONFIG_BYTES} bytes; refusing to parse")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _file_error(source, f"not valid UTF-8 (byte offset {exc.start})") from None
    base_dir = Path(os.path.abspath(source)).parent
    defaults = system_dir_defaults(source, os.environ if env is None else env)
    return load_config_text(
        text, source=source, base_dir=base_dir, env=env, daemon_defaults=defaults
    )


def load_config_text(
    text: str,
    *,
    source: str = "<string>",
    base_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    daemon_defaults: Mapping[str, str] | None = None,
) -> Config:
    """Parse and validate TOML text; relative paths resolve against `base_dir`.
    `daemon_defaults`: `[daemon]` keys the file gets when it does not set them (the system
    config's dirs, `system_dir_defaults`)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, [_syntax_issue(exc)]) from None
    except RecursionError:
        raise ConfigError(source, [ConfigIssue((), _TOO_DEEP)]) from None
    if daemon_defaults:
        table = doc.setdefault("daemon", {})
        if isinstance(table, dict):  # anything else is reported by validation as it is
            for key, value in daemon_defaults.items():
                table.setdefault(key, value)
    return validate_document(doc, source=source, base_dir=base_dir, env=env)


def validate_document(
    doc: dict[str, Any],
    *,
    source: str = "<string>",
    base_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Validate an already-parsed document; raise ConfigError listing every problem."""
    env = os.environ if env is None else env
    deep = _too_deep(doc)
    if deep is not None:
        raise ConfigError(source, [ConfigIssue(deep, _TOO_DEEP)])
    context = {"base_dir": base_dir}
    issues: list[ConfigIssue] = []
    try:
        config: Config | None = Config.model_validate(doc, context=context)
    except ValidationError as exc:
        issues.extend(_issues_from_pydantic(exc))
        config = _salvage(doc, exc, context)
    if config is not None:
        issues.extend(check_rules(config, Declared.from_document(doc), env))
    if issues:
        raise ConfigError(source, _dedupe(issues))
    assert config is not None
    return config


# --------------------------------------------------------------------------- helpers


MAX_DEPTH = 16  # the deepest real key is agents.<a>.workspace.access.<b>: depth 5
_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels; no zeroclaw setting is this deep"


def _too_deep(doc: object) -> KeyPath | None:
    """The path where nesting passes MAX_DEPTH, found without recursion."""
    stack: list[tuple[object, KeyPath]] = [(doc, ())]
    while stack:
        node, path = stack.pop()
        if len(path) > MAX_DEPTH:
            return path[:MAX_DEPTH]
        if isinstance(node, dict):
            stack.extend((child, (*path, str(key))) for key, child in node.items())
        elif isinstance(node, list):
            stack.extend((child, (*path, i)) for i, child in enumerate(node))
    return None


def runtime_dir_hint(path: str | os.PathLike[str], env: Mapping[str, str]) -> Path:
    """Where a daemon for this config file keeps its sockets, even if the file is invalid.

    Operators run `zeroclaw status` precisely when something is wrong, e.g. right after a
    reload was refused; that must not depend on the file being valid now. A file nested
    too deeply to be a config at all is the exception: a ConfigError (exit 2).
    """
    try:
        return daemon_paths(load_config(path, env), env).runtime_dir
    except ConfigError as exc:
        if any(issue.message == _TOO_DEEP for issue in exc.issues):
            raise  # not a config with a typo: no command should guess its way past it
        if not os.path.exists(path):
            # A --config or $ZEROCLAW_CONFIG naming no file is a usage error (exit 2), not
            # a daemon that is down: there is no daemon of a config that does not exist.
            raise
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES)
        text = raw.decode("utf-8", "replace")
    except OSError:
        text = ""
    try:
        table = tomllib.loads(text).get("daemon")
    except (tomllib.TOMLDecodeError, RecursionError):
        table = _scan_daemon_paths(text)  # a syntax error elsewhere must not hide these
    table = table if isinstance(table, dict) else {}
    partial = {k: table[k] for k in ("state_dir", "runtime_dir") if isinstance(table.get(k), str)}
    partial = {**system_dir_defaults(path, env), **partial}
    base_dir = Path(os.path.abspath(path)).parent
    try:
        config = Config.model_validate({"daemon": partial}, context={"base_dir": base_dir})
    except ValidationError:
        config = Config()
    return daemon_paths(config, env).runtime_dir


_DAEMON_HEADER = re.compile(r"^\s*\[\s*daemon\s*\]\s*(#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")
_PATH_LINE = re.compile(
    r"""^\s*(state_dir|runtime_dir)\s*=\s*(?:"([^"\\]*)"|'([^']*)')\s*(#.*)?$"""
)


def _scan_daemon_paths(text: str) -> dict[str, str]:
    """Read state_dir/runtime_dir from the [daemon] table of a file that does not parse."""
    found: dict[str, str] = {}
    inside = False
    for line in text.splitlines():
        if _DAEMON_HEADER.match(line):
            inside = True
        elif _ANY_HEADER.match(line):
            inside = False
        elif inside and (match := _PATH_LINE.match(line)):
            found.setdefault(match[1], match[2] if match[2] is not None else match[3])
    return found


def _file_error(source: str, message: str) -> ConfigError:
    return ConfigError(source, [ConfigIssue((), message)])


_SYNTAX_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_SYNTAX_END = re.compile(r"\s*\(at end of document\)\s*$")


def _syntax_issue(exc: tomllib.TOMLDecodeError) -> ConfigIssue:
    message = str(exc)
    match = _SYNTAX_POSITION.search(message)
    if match:
        text = message[: match.start()]
        return ConfigIssue((), f"invalid TOML: {text}", int(match[1]), int(match[2]))
    if _SYNTAX_END.search(message):
        return ConfigIssue((), f"invalid TOML: {_SYNTAX_END.sub('', message)} at end of file")
    return ConfigIssue((), f"invalid TOML: {message}")


def _issues_from_pydantic(exc: ValidationError) -> list[ConfigIssue]:
    issues = []
    for err in exc.errors(include_url=False, include_input=False):
        loc: KeyPath = tuple(err["loc"])
        kind = err["type"]
        if kind == "extra_forbidden":
            key = str(loc[-1])
            hint = did_you_mean(key, _field_names_at(loc[:-1]))
            issues.append(ConfigIssue(loc, f"unknown key {key!r}{hint}"))
        elif kind == "missing":
            issues.append(ConfigIssue(loc, "required key is missing"))
        else:
            message = err["msg"].removeprefix("Value error, ")
            issues.append(ConfigIssue(loc, message))
    return issues


def _field_names_at(loc: KeyPath) -> list[str]:
    """The valid keys of the model that `loc` points into (for 'did you mean')."""
    model: Any = Config
    parts = list(loc)
    while parts:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
        field = model.model_fields.get(str(parts.pop(0)))
        if field is None:
            return []
        model = _unwrap(field.annotation)
        if typing.get_origin(model) is dict:
            if not parts:
                return []
            parts.pop(0)  # the entry's alias
            model = _unwrap(typing.get_args(model)[1])
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """Strip Optional[...] so nested models can be walked."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return args[0] if len(args) == 1 else annotation
    return annotation


def _salvage(doc: dict[str, Any], exc: ValidationError, context: dict[str, Any]) -> Config | None:
    """Drop every entry that failed and validate the rest, so cross-entry rules still run."""
    pruned = copy.deepcopy(doc)
    for err in exc.errors(include_url=False, include_input=False):
        loc = tuple(err["loc"])
        if not loc:
            return None
        depth = _ENTRY_DEPTH.get(str(loc[0]), 1)
        _delete(pruned, loc[: min(len(loc), depth)])
    try:
        return Config.model_validate(pruned, context=context)
    except ValidationError:
        return None


def _delete(doc: Any, loc: KeyPath) -> None:
    node = doc
    for part in loc[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    if isinstance(node, dict):
        node.pop(loc[-1], None)


def _dedupe(issues: list[ConfigIssue]) -> list[ConfigIssue]:
    seen: set[tuple[KeyPath, str]] = set()
    out = []
    for issue in issues:
        if (issue.path, issue.message) not in seen:
            seen.add((issue.path, issue.message))
            out.append(issue)
    return out
