"""The systemd unit of `zeroclaw service`: rendered from the shipped template, planned, judged.

Pure: the template text, the executable, the config path, the environment and the target root
come in as arguments; the CLI does the reading, writing and running (ADR 0028).

The template is `systemd/zeroclaw.service`, a valid system unit as shipped. Blocks between
`# >>> system unit only` / `# <<< system unit only` are left out of the user unit, blocks
between `# >>> user unit only` / `# <<< user unit only` (comments) out of the system unit.
`ExecStart=`, `ExecReload=` and `WantedBy=` are rewritten; `Documentation=` is added.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from ..config import SYSTEM_CONFIG, user_config_path

Scope = Literal["system", "user"]

UNIT_NAME = "zeroclaw.service"
SERVICE_USER = "zeroclaw"
# The first line of every file `service install` writes; `uninstall` removes only such files.
MARKER = "# Written by `zeroclaw service install`; `zeroclaw service uninstall` removes it."

SYSTEM_UNIT_PATH = PurePosixPath("/etc/systemd/system") / UNIT_NAME
SYSUSERS_PATH = PurePosixPath("/etc/sysusers.d/zeroclaw.conf")

_BLOCK = re.compile(r"^# (>>>|<<<) (system unit|user unit|template) only\s*$")


@dataclass(frozen=True, slots=True)
class UnitSpec:
    """What varies between installs: how to run zeroclaw, which config, where the docs are."""

    scope: Scope
    command: tuple[str, ...]  # the zeroclaw executable, or (python, "-P", "-m", "zeroclaw")
    config_path: Path
    documentation: tuple[str, ...] = ()


def zeroclaw_command(script: str | None, python: str) -> tuple[str, ...]:
    """The installed `zeroclaw` script if there is one, else this interpreter with `-m`.

    `script` is the resolved path of the running script (or None when run as `python -m`);
    the interpreter is kept as given, not resolved: a venv's python is only a venv's python
    through its own path. `-P`: the unit's cwd (`/`) is not put on sys.path, where it would
    be the daemon's code and every workspace inside it (ADR 0044)."""
    if script:
        return (script,)
    return (python, "-P", "-m", "zeroclaw")


def exec_quote(arg: str) -> str:
    """One argument of an `Exec*=` line: `%` and `$` escaped, quoted when it must be."""
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if escaped and not re.search(r"[\s\"'\\;]", escaped):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exec_line(argv: Sequence[str]) -> str:
    return " ".join(exec_quote(a) for a in argv)


def render_unit(template: str, spec: UnitSpec) -> str:
    """The unit `service install` writes for `spec`, from the template's text."""
    base = [*spec.command, "--config", os.fspath(spec.config_path)]
    out = [MARKER]
    skipping: str | None = None
    for line in template.splitlines():
        block = _BLOCK.match(line)
        if block:
            opening, kind = block[1] == ">>>", block[2].removesuffix(" unit")
            if opening and kind != spec.scope and skipping is None:
                skipping = kind
            elif not opening and skipping == kind:
                skipping = None
            continue  # the markers themselves stay in the template
        if skipping:
            continue
        key = line.partition("=")[0]
        if key == "Description":
            out.append(line)
            out.extend(f"Documentation={doc}" for doc in spec.documentation)
        elif key == "ExecStart":
            out.append(f"ExecStart={exec_line([*base, 'daemon'])}")
        elif key == "ExecReload":
            prefix = "+" if spec.scope == "system" else ""
            out.append(f"ExecReload={prefix}{exec_line([*base, 'reload'])}")
        elif key == "WantedBy":
            target = "multi-user.target" if spec.scope == "system" else "default.target"
            out.append(f"WantedBy={target}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def sysusers_snippet() -> str:
    """The `zeroclaw` system user and group, home the state dir, no login (sysusers.d(5))."""
    return (
        f"{MARKER}\n"
        "# The system user of zeroclaw.service (ADR 0028). Removing this file does not remove\n"
        "# the user: files in /var/lib/zeroclaw stay owned by it. `userdel zeroclaw` if wanted.\n"
        f'u {SERVICE_USER} - "zeroclaw daemon" /var/lib/zeroclaw\n'
    )


def written_by_us(text: str) -> bool:
    return text.startswith(MARKER + "\n")


# --------------------------------------------------------------------------- where


def user_unit_path(env: Mapping[str, str]) -> PurePosixPath:
    """~/.config/systemd/user/zeroclaw.service, honouring $XDG_CONFIG_HOME."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or "~", ".config")
    return PurePosixPath(os.path.expanduser(base)) / "systemd" / "user" / UNIT_NAME


def unit_path(scope: Scope, env: Mapping[str, str]) -> PurePosixPath:
    return SYSTEM_UNIT_PATH if scope == "system" else user_unit_path(env)


def under_root(root: Path, path: PurePosixPath) -> Path:
    """`path` inside the target root (`/` on a real install, a temp dir in tests)."""
    return root / path.relative_to("/") if path.is_absolute() else root / path


def service_config_path(scope: Scope, explicit: str | None, env: Mapping[str, str]) -> Path:
    """The config the unit runs with: --config, $ZEROCLAW_CONFIG, else the scope's default."""
    chosen = explicit or env.get("ZEROCLAW_CONFIG")
    if chosen:
        return Path(os.path.abspath(os.path.expanduser(chosen)))
    return SYSTEM_CONFIG if scope == "system" else user_config_path(env)


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True, slots=True)
class FileWrite:
    path: Path
    content: str
    mode: int = 0o644


@dataclass(frozen=True, slots=True)
class InstallPlan:
    """Everything `install` does, in order, and what it tells the operator afterwards."""

    files: tuple[FileWrite, ...]
    commands: tuple[tuple[str, ...], ...]  # run only if the manager is reachable
    skipped: tuple[tuple[str, ...], ...]  # what to run by hand, since it could not be run here
    next_steps: tuple[str, ...]
    warnings: tuple[str, ...] = field(default=())


def systemctl(scope: Scope, *args: str) -> tuple[str, ...]:
    return ("systemctl", *(("--user",) if scope == "user" else ()), *args)


def install_plan(
    template: str,
    spec: UnitSpec,
    root: Path,
    env: Mapping[str, str],
    *,
    manager_running: bool,
    have_sysusers: bool,
    config_exists: bool,
    executables: Sequence[str] = (),
) -> InstallPlan:
    """`executables`: the resolved files the unit will execute (the script, its interpreter),
    checked against what the unit hides from the service."""
    unit = unit_path(spec.scope, env)
    files = [FileWrite(under_root(root, unit), render_unit(template, spec))]
    run: list[tuple[str, ...]] = []
    by_hand: list[tuple[str, ...]] = []
    if spec.scope == "system":
        sysusers = under_root(root, SYSUSERS_PATH)
        files.insert(0, FileWrite(sysusers, sysusers_snippet()))
        # The bare name: systemd-sysusers looks it up in sysusers.d beneath --root.
        rooted = () if root == Path("/") else (f"--root={root}",)
        create_user = ("systemd-sysusers", *rooted, SYSUSERS_PATH.name)
        (run if have_sysusers else by_hand).append(create_user)
    reload = systemctl(spec.scope, "daemon-reload")
    (run if manager_running and root == Path("/") else by_hand).append(reload)
    steps = [" ".join(systemctl(spec.scope, "enable", "--now", UNIT_NAME))]
    steps.append(" ".join(systemctl(spec.scope, "status", UNIT_NAME)))
    if spec.scope == "user":
        steps.append(
            f"loginctl enable-linger {env.get('USER') or '$USER'}  "
            "# keep it running after you log out, and start it at boot"
        )
    return InstallPlan(
        tuple(files),
        tuple(run),
        tuple(by_hand),
        tuple(steps),
        unit_warnings(spec, config_exists, executables),
    )


_HIDDEN_BY_PROTECT_HOME = ("/home", "/root", "/run/user")


def unit_warnings(
    spec: UnitSpec, config_exists: bool, executables: Sequence[str] = ()
) -> tuple[str, ...]:
    """What would stop the unit from starting, said before it is installed."""
    warnings = []
    if spec.scope == "system":
        checked = [("zeroclaw", spec.command[0])]
        checked.extend(("its interpreter", p) for p in executables if p != spec.command[0])
        checked.append(("the config", str(spec.config_path)))
        for what, path in dict.fromkeys(checked):
            if any(path == top or path.startswith(top + "/") for top in _HIDDEN_BY_PROTECT_HOME):
                warnings.append(
                    f"{what} is at {path}, which ProtectHome=yes hides from the service: "
                    "install zeroclaw and its config outside /home and /root (e.g. a venv in "
                    "/opt/zeroclaw, the config in /etc/zeroclaw)"
                )
    if not config_exists:
        warnings.append(
            f"{spec.config_path} does not exist yet: create it with "
            f"'zeroclaw --config {spec.config_path} config init'"
        )
    return tuple(warnings)


# --------------------------------------------------------------------------- status


UnitFileState = Literal["absent", "current", "stale", "foreign"]


def judge_unit_file(installed: str | None, wanted: str) -> UnitFileState:
    """Is the installed unit what `install` would write now?"""
    if installed is None:
        return "absent"
    if not written_by_us(installed):
        return "foreign"
    return "current" if installed == wanted else "stale"


def parse_show(text: str) -> dict[str, str]:
    """`systemctl show` output: one Key=Value a line."""
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key] = value
    return props


def configured_command(unit_text: str) -> str | None:
    """The ExecStart= of an installed unit, to show the operator what runs."""
    for line in unit_text.splitlines():
        if line.startswith("ExecStart="):
            return line.removeprefix("ExecStart=")
    return None


def user_exists(passwd: str, name: str = SERVICE_USER) -> bool:
    """Does /etc/passwd (its text) have this user?"""
    return any(line.split(":", 1)[0] == name for line in passwd.splitlines())


# --------------------------------------------------------------------------- uninstall


@dataclass(frozen=True, slots=True)
class UninstallPlan:
    before: tuple[tuple[str, ...], ...]  # stop and disable first, when the manager is here
    remove: tuple[Path, ...]
    after: tuple[tuple[str, ...], ...]
    refused: tuple[str, ...]  # files that are not ours: nothing is removed at all


def uninstall_plan(
    scope: Scope,
    root: Path,
    env: Mapping[str, str],
    contents: Mapping[Path, str | None],
    *,
    manager_running: bool,
) -> UninstallPlan:
    """`contents` maps each file install may have written (see `owned_paths`) to its text,
    None when absent. A file without our marker is refused, and then nothing is removed."""
    present = {path: text for path, text in contents.items() if text is not None}
    refused = tuple(
        f"{path} was not written by 'zeroclaw service install' (no marker line); "
        "remove it yourself if it is yours to remove"
        for path, text in present.items()
        if not written_by_us(text)
    )
    if refused or not present:
        return UninstallPlan((), (), (), refused)
    live = manager_running and root == Path("/")
    unit_there = under_root(root, unit_path(scope, env)) in present
    before = (systemctl(scope, "disable", "--now", UNIT_NAME),) if live and unit_there else ()
    after = (systemctl(scope, "daemon-reload"),) if live else ()
    return UninstallPlan(before, tuple(present), after, ())


def owned_paths(scope: Scope, root: Path, env: Mapping[str, str]) -> tuple[Path, ...]:
    """Every file `install` writes for this scope, beneath the target root."""
    unit = under_root(root, unit_path(scope, env))
    return (unit, under_root(root, SYSUSERS_PATH)) if scope == "system" else (unit,)
