"""What a stdio MCP server starts with: the installation it may read, its environment."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from zeroclaw.mcp import installation_paths, server_environment
from zeroclaw.mcp._launch import http_headers
from zeroclaw.policy import program_executables

VENV_CFG = "home = /srv/py/3.12/bin\ninclude-system-site-packages = false\n"


def reader(files: dict[str, str]):  # type: ignore[no-untyped-def]
    return files.get


def test_a_venv_console_script_reads_its_venv_and_its_interpreters_library() -> None:
    found = installation_paths(
        "/srv/tools/.venv/bin/mcp-server-time",
        ["/srv/tools/.venv/bin/mcp-server-time", "/srv/py/3.12/bin/python3.12", "/lib/ld.so"],
        read=reader({"/srv/tools/.venv/pyvenv.cfg": VENV_CFG}),
        loaders=["/lib/ld.so"],
    )
    assert found == ("/srv/tools/.venv", "/srv/py/3.12/lib")


def test_an_interpreter_outside_the_system_paths_gives_its_prefix_lib() -> None:
    found = installation_paths(
        "/home/u/bin/server.js",
        ["/home/u/bin/server.js", "/home/u/.nvm/v22/bin/node"],
        read=reader({}),
    )
    assert found == ("/home/u/.nvm/v22/lib",)


def test_an_npm_package_reads_its_outermost_node_modules() -> None:
    """`npm install --prefix P` links P/node_modules/.bin/NAME to the package's script; its
    dependencies sit beside the package, hoisted into the same node_modules."""
    script = "/home/u/npm/node_modules/@mcp/server-everything/dist/index.js"
    found = installation_paths(
        "/home/u/npm/node_modules/.bin/mcp-server-everything",
        [script, "/usr/bin/env", "/usr/bin/node"],
        read=reader({}),
    )
    assert found == ("/home/u/npm/node_modules",)
    # a global install: the link is in <prefix>/bin, the package in <prefix>/lib/node_modules
    found = installation_paths(
        "/home/u/node/bin/mcp-server-x",
        [
            "/home/u/node/lib/node_modules/mcp-server-x/node_modules/dep/cli.js",
            "/home/u/node/bin/node",
        ],
        read=reader({}),
    )
    assert found == ("/home/u/node/lib/node_modules", "/home/u/node/lib")


def test_http_headers_come_from_the_agents_environment_by_name() -> None:
    agent_env = {"MCP_AUTH": "Bearer s3cret", "OTHER": "x"}
    headers, problem = http_headers({"Authorization": "MCP_AUTH", "X-Key": "NOPE"}, agent_env)
    assert headers == {"Authorization": "Bearer s3cret"}
    assert problem == "headers_env names variables the agent does not have: NOPE"
    assert http_headers({}, agent_env) == ({}, "")


@pytest.mark.parametrize(
    "value",
    ["Bearer s3cret\r\nX-Inject: 1", "Bearer s3cret\n", " Bearer s3", "s3cret ", "s\x00", "é"],
)
def test_a_header_value_a_request_cannot_carry_is_named_never_told(value: str) -> None:
    _, problem = http_headers({"Authorization": "MCP_AUTH"}, {"MCP_AUTH": value})
    assert problem.startswith("headers_env variables whose values a header cannot carry")
    assert problem.endswith(": MCP_AUTH") and value.strip() not in problem


def test_spaces_and_tabs_inside_a_header_value_are_fine() -> None:
    assert http_headers({"A": "V"}, {"V": "Bearer a\tb c"}) == ({"A": "Bearer a\tb c"}, "")


def test_what_the_system_paths_already_give_is_not_listed() -> None:
    found = installation_paths(
        "/usr/local/bin/mcp-server-git",
        ["/usr/local/bin/mcp-server-git", "/usr/bin/python3", "/usr/lib/ld.so"],
        read=reader({}),
        loaders=["/usr/lib/ld.so"],
    )
    assert found == ()


def test_the_real_mcp_server_time_of_this_venv() -> None:
    program = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    assert program is not None
    found = installation_paths(program, program_executables(program, "/usr/bin:/bin"))
    assert str(Path(sys.prefix)) in found  # its venv holds its package


def test_the_environment_is_a_shell_commands_plus_only_the_named_variables() -> None:
    agent_env = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "ANTHROPIC_API_KEY": "sk-secret",
        "GIT_TOKEN": "t0k",
        "HOME": "/root",
    }
    env = server_environment(agent_env, ["GIT_TOKEN", "MISSING"], "/ws/alpha", "/run/h")
    assert env["GIT_TOKEN"] == "t0k" and env["PATH"] == "/usr/bin" and env["LANG"] == "C.UTF-8"
    assert env["HOME"] == env["TMPDIR"] == "/run/h"
    assert "ANTHROPIC_API_KEY" not in env and "MISSING" not in env
    assert "sk-secret" not in env.values()
