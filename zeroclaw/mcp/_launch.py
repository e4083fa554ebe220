"""What a stdio MCP server is started with: its program on the agent's PATH, the paths its
installation needs read, its whole environment, its Landlock ruleset. Pure but for
`server_ruleset`, which builds the kernel object.

The ruleset is a shell command's (`zeroclaw.tools` program_ruleset, ADR 0012): nested in
the agent's domain, so the server never reaches more than the agent; only the program, its
interpreter (a `#!` line, through `env` too) and their loaders execute; the workspace is
writable only when the agent may write. On top of it the server's installation is
readable: a Python console script's virtual environment (the directory holding
`pyvenv.cfg`) and the standard library of the interpreter it was made from, and for any
interpreter `<prefix>/bin/NAME` its `<prefix>/lib`, and for a program in an npm
installation (its path, or its real path, in a `node_modules` directory: `npm install
--prefix P` links `P/node_modules/.bin/NAME` to the package's script) the outermost
`node_modules`. The forbidden paths, other workspaces
and the daemon's files stay carved out of those trees as out of every other.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from .._process import SpawnTracker
from ..policy import (
    SYSTEM_READ_ONLY,
    PathRules,
    build_ruleset,
    plan_command_sandbox,
)
from ..tools import shell_environment

ReadText = Callable[[str], str | None]


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(4096)
    except OSError:
        return None


def _venv_home(cfg: str) -> str | None:
    for line in cfg.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return value.strip()
    return None


def _node_modules(path: str) -> str | None:
    """The outermost `node_modules` directory `path` lies in (an npm installation: the
    package and the dependencies npm hoisted beside it), or None."""
    parts = path.split("/")
    if "node_modules" not in parts[:-1]:
        return None
    return "/".join(parts[: parts.index("node_modules") + 1])


def installation_paths(
    program: str,
    executables: Collection[str],
    *,
    read: ReadText = _read_text,
    loaders: Collection[str] = (),
) -> tuple[str, ...]:
    """The trees a server's program needs to read besides the system paths. `program` is
    the path found on PATH (not resolved: a venv's script sits in the venv), `executables`
    what the kernel executes for it (`program_executables`), `loaders` those among them
    that are ELF loaders (they need nothing more). Pure given `read`."""
    found: list[str] = []
    bin_dir = posixpath.dirname(program)
    root = posixpath.dirname(bin_dir)
    cfg = read(posixpath.join(root, "pyvenv.cfg"))
    if cfg is not None:
        found.append(root)
        home = _venv_home(cfg)
        if home is not None:
            found.append(posixpath.join(posixpath.dirname(home.rstrip("/")), "lib"))
    for candidate in (program, *executables):
        modules = _node_modules(candidate)
        if modules is not None:
            found.append(modules)
    for executable in executables:
        if executable in loaders or executable == program:
            continue
        where = posixpath.dirname(executable)
        if posixpath.basename(where) == "bin":
            prefix = posixpath.dirname(where)
            if prefix not in ("", "/"):
                found.append(posixpath.join(prefix, "lib"))
    system = tuple(p.rstrip("/") for p in SYSTEM_READ_ONLY)
    # What the system paths already give is not listed again.
    return tuple(
        p for p in dict.fromkeys(found) if not any(p == s or p.startswith(s + "/") for s in system)
    )


def server_environment(
    agent_env: Mapping[str, str], names: Collection[str], workspace: str, home: str
) -> dict[str, str]:
    """A shell command's environment (PATH, LANG, private HOME/TMPDIR/XDG dirs, git told to
    read no user config; `zeroclaw.tools.shell_environment`) plus the variables the
    server's `env` names, with the agent's values; nothing else of the agent's."""
    env = shell_environment(agent_env, workspace, home)
    env.update({name: agent_env[name] for name in names if name in agent_env})
    return env


# A header value a request can carry (RFC 9110 field-value, as h11 checks it before it
# sends): visible ASCII, with spaces and tabs only inside. Anything else (a CR or LF, an env
# file's trailing newline, a leading space, a character that is not ASCII) is refused by
# the HTTP library with a message that quotes the value.
HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?")  # fullmatch


def http_headers(
    headers_env: Mapping[str, str], agent_env: Mapping[str, str]
) -> tuple[dict[str, str], str]:
    """An HTTP server's request headers (header name -> the value of the variable
    `headers_env` names, from the agent's environment), and what is wrong with them ("" when
    nothing): the variables it names that the agent does not have, and those whose values a
    header cannot carry. Values are secrets: nothing here tells or logs them, the variables
    are named."""
    headers = {h: agent_env[v] for h, v in headers_env.items() if v in agent_env}
    missing = sorted({v for v in headers_env.values() if v not in agent_env})
    unusable = sorted(
        {
            v
            for v in headers_env.values()
            if v in agent_env and not HEADER_VALUE.fullmatch(agent_env[v])
        }
    )
    problems = []
    if missing:
        problems.append(
            "headers_env names variables the agent does not have: " + ", ".join(missing)
        )
    if unusable:
        problems.append(
            "headers_env variables whose values a header cannot carry (a control character "
            "such as CR or LF, leading or trailing whitespace, or not ASCII): "
            + ", ".join(unusable)
        )
    return headers, "; ".join(problems)


def server_ruleset(rules: PathRules, program: str, executables: Collection[str], home: str) -> int:
    """A Landlock ruleset fd for one server of an agent with these rules."""
    loaders = {e for e in executables if posixpath.basename(e).startswith("ld-")}
    extra = installation_paths(program, executables, loaders=loaders)
    plan = plan_command_sandbox(
        workspace=str(rules.workspace),
        home=home,
        executables=executables,
        grants=[(str(g.path), g.mode) for g in rules.grants],
        excluded=[str(p) for p in (*rules.forbidden, *rules.other_workspaces)],
        system=(
            (*SYSTEM_READ_ONLY, *extra)
            if rules.workspace_only
            else (*SYSTEM_READ_ONLY, *extra, "/")
        ),
        workspace_writable=rules.may_write,
        code=[str(p) for p in rules.code],
    )
    return build_ruleset(plan)


@dataclass(frozen=True)
class Launch:
    """How to start one stdio server for one agent. `tracker`: the agent's orphan reaper."""

    name: str
    command: str
    args: tuple[str, ...]
    env_names: tuple[str, ...]
    timeout_secs: float
    max_result_bytes: int
    rules: PathRules
    agent_env: Mapping[str, str]
    confine: bool
    home_root: str | None
    tracker: SpawnTracker | None = None
    # The agent's allowed shell commands (none for a readonly agent): a server may run
    # them too (mcp-server-git runs git), as the agent itself may; interpreters never.
    commands: tuple[str, ...] = ()
    # Set: the server runs under the intermediate (`zeroclaw._process.REAPER`, a child
    # subreaper), which kills it and everything it left behind when it ends, when it is
    # stopped, or after this many seconds. For a server started by a process that is no
    # subreaper itself (the daemon's one call for an MCP adapter); an agent is one, and
    # sweeps what its servers leave (`tracker`).
    lifetime_secs: float | None = None
    # Its start's bound: spawn to an answered initialize (a first `npx`/`uvx` run may
    # download); None: timeout_secs, which bounds every request after it.
    startup_timeout_secs: float | None = None

    @property
    def max_line(self) -> int:
        return line_bound(self.max_result_bytes)

    @property
    def start_bound(self) -> float:
        return self.timeout_secs if self.startup_timeout_secs is None else self.startup_timeout_secs


def line_bound(max_result_bytes: int) -> int:
    """The bound of one message from a server (a stdio line, an HTTP body or SSE event): it
    holds the result, JSON-escaped, and its envelope."""
    return max(4 * max_result_bytes, 1024 * 1024)
