"""The agent's MCP host against real servers started inside the sandbox: the registry's
`mcp-server-time`, and a hostile server of ours (tests/mcp/hostile_server.py) that hangs,
floods, speaks garbage, exits at once, changes its schema and tries the kernel. Each gives
its typed error and the host keeps serving the other servers. (HTTP servers against the
registry's server-everything: tests/mcp/test_everything.py.)"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import PATIENCE
from zeroclaw._ops import CallRefused
from zeroclaw.agent import McpServerSpec
from zeroclaw.mcp import McpHost
from zeroclaw.policy import PathRules, abi_version, rules_for
from zeroclaw.tools import CommandReaper, ShellSettings, Tool, ToolContext, ToolResult
from zeroclaw.turns import McpPinAnswer, McpPinCall, McpServerState

HOSTILE = Path(__file__).with_name("hostile_server.py")
TIME_SERVER = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
GIT_SERVER = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent))
CONFINED = abi_version() >= 1
ALL_TOOLS = ("echo", "write", "read", "fail", "big", "env")


class Box:
    """An agent's world: its workspace (with the hostile server in it), another agent's,
    a forbidden directory and a daemon file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ws = root / "ws" / "alpha"
        self.ws.mkdir(parents=True)
        shutil.copy(HOSTILE, self.ws / "hostile_server.py")
        (root / "secret").mkdir()
        (root / "secret" / "key").write_text("forbidden key\n")
        (root / "state").mkdir()
        (root / "state" / "daemon.db").write_text("the daemon's\n")
        (root / "homes").mkdir()

    def rules(self, *, may_write: bool = True) -> PathRules:
        return rules_for(
            str(self.ws),
            workspace_only=True,
            may_write=may_write,
            forbidden=[str(self.root / "secret")],
            protected=[str(self.root / "state")],
        )


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


def hostile(name: str, mode: str, **kw: Any) -> McpServerSpec:
    return McpServerSpec(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=("hostile_server.py", mode),  # relative: its cwd is the workspace
        timeout_secs=kw.pop("timeout_secs", 3.0),
        # a loaded machine's python may take seconds to start; the start has its own bound
        startup_timeout_secs=kw.pop("startup_timeout_secs", PATIENCE),
        tools=kw.pop("tools", ALL_TOOLS),
        **kw,
    )


class Daemonside:
    """What the daemon's side of MCP_PIN and MCP_STATE would record (the service itself is
    another package's); `pins`: the first digest seen of each tool, as MCP_PIN keeps them.
    `service=False`: a daemon without the service (it refuses unknown_service)."""

    def __init__(self, service: bool, refuse: str | None = None) -> None:
        self.service = service
        self.refuse = refuse  # a code the service refuses every pin with
        self.pins: dict[tuple[str, str], str] = {}
        self.states: list[McpServerState] = []
        self.state_changed = trio.Event()

    async def pin(self, call: McpPinCall) -> McpPinAnswer:
        if not self.service:
            raise CallRefused("unknown_service", "no service 'mcp'")
        if self.refuse is not None:
            raise CallRefused(self.refuse, "refused by the pin service")
        offered, withheld = [], []
        for tool in call.tools:
            first = self.pins.setdefault((call.server, tool.name), tool.digest)
            (offered if first == tool.digest else withheld).append(tool.name)
        return McpPinAnswer(tuple(offered), tuple(withheld))

    def trust(self, server: str, tool: str) -> None:
        """The operator's `zeroclaw mcp trust`: the next digest seen is the pin."""
        del self.pins[(server, tool)]

    def post(self, state: McpServerState) -> None:
        self.states.append(state)
        self.state_changed.set()
        self.state_changed = trio.Event()

    async def wait_for(self, server: str, status: str) -> McpServerState:
        with trio.fail_after(PATIENCE):
            while True:
                found = [s for s in self.states if s.server == server and s.status == status]
                if found:
                    return found[-1]
                await self.state_changed.wait()


class Offers:
    def __init__(self) -> None:
        self.latest: tuple[Tool[Any], ...] = ()
        self.count = 0
        self.changed = trio.Event()

    def __call__(self, tools: tuple[Tool[Any], ...]) -> None:
        self.latest, self.count = tools, self.count + 1
        self.changed.set()
        self.changed = trio.Event()

    def names(self) -> list[str]:
        return [t.name for t in self.latest]

    def get(self, name: str) -> Tool[Any]:
        return next(t for t in self.latest if t.name == name)


@asynccontextmanager
async def hosting(
    box: Box,
    servers: Sequence[McpServerSpec],
    *,
    readonly: bool = False,
    service: bool = False,
    commands: tuple[str, ...] = (),
    refuse: str | None = None,
) -> AsyncIterator[tuple[McpHost, Daemonside, Offers]]:
    daemon, offers = Daemonside(service, refuse), Offers()
    host = McpHost(
        servers,
        rules=lambda: box.rules(may_write=not readonly),
        agent_env={
            "PATH": os.environ["PATH"],
            "LANG": "C.UTF-8",
            "SERVER_TOKEN": "for the server",
            "PROVIDER_KEY": "the agent's own",
        },
        confine=CONFINED,
        home_root=str(box.root / "homes"),
        readonly=readonly,
        pin=daemon.pin,
        post_state=daemon.post,
        on_tools=offers,
        tracker=CommandReaper.instance(),
        commands=commands,
        backoff=(0.05, 0.2),
        max_attempts=3,
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(host.run)
        with trio.fail_after(PATIENCE):
            await host.settled.wait()
        yield host, daemon, offers
        nursery.cancel_scope.cancel()


def context(
    box: Box, *, asks: bool = False, approve: bool = False, asked: list[str] | None = None
) -> ToolContext:
    """A turn's context; its approver says `approve` and notes each question in `asked`."""

    async def approver(what: str) -> bool:
        if asked is not None:
            asked.append(what)
        return approve

    return ToolContext(
        rules=box.rules(),
        shell=ShellSettings(frozenset(), True, True, 1.0, {}),
        reach=None,  # type: ignore[arg-type]  # an MCP tool reaches only its server
        asks_approval=asks,
        approver=approver,
    )


async def run(ctx: ToolContext, tool: Tool[Any], args: dict[str, Any]) -> ToolResult:
    return await tool.run(ctx, tool.decode(args))


@pytest.mark.skipif(TIME_SERVER is None, reason="mcp-server-time is not installed")
async def test_mcp_server_time_lists_its_tools_and_answers_inside_the_sandbox(box: Box) -> None:
    assert TIME_SERVER is not None
    time_server = McpServerSpec(
        name="time", transport="stdio", command=TIME_SERVER, tools=("get_current_time",)
    )
    async with hosting(box, [time_server]) as (host, daemon, offers):
        assert offers.names() == ["mcp__time__get_current_time"]  # convert_time not allowed
        tool = offers.get("mcp__time__get_current_time")
        assert tool.spec.parameters["required"] == ["timezone"]
        result = await run(context(box), tool, {"timezone": "UTC"})
        assert result.ok, result
        assert '"timezone":"UTC"' in result.output and "datetime" in result.output
        ready = await daemon.wait_for("time", "ready")
        assert ready.pid == host.connections["time"].pid
    assert daemon.states[-1].status == "stopped"


async def test_a_daemon_without_the_pin_service_withholds_nothing(box: Box) -> None:
    async with hosting(box, [hostile("h", "ok", tools=("echo", "fail"))]) as (_, _, offers):
        assert offers.names() == ["mcp__h__echo", "mcp__h__fail"]
        result = await run(context(box), offers.get("mcp__h__echo"), {"text": "hi"})
        assert (result.ok, result.output) == (True, "hi")


@pytest.mark.parametrize(
    "code", ["mcp_pins_corrupt", "mcp_pin_limit", "bad_request", "mcp_tool_not_allowed", "timeout"]
)
async def test_a_pin_service_that_refuses_the_listing_withholds_every_tool(
    box: Box, code: str
) -> None:
    # Attack pass (issue 26): only a daemon without the service (unknown_service) means
    # "nothing is pinned". A damaged store, a listing the book refuses (a tool named twice,
    # a server that filled its pins with new names) or a lost call must not turn into
    # "offer every allowed tool unreviewed": that is the rug pull the pins exist to stop.
    async with hosting(
        box, [hostile("h", "ok", tools=("echo", "fail"))], service=True, refuse=code
    ) as (host, _, offers):
        assert offers.names() == []
        await host.wait_settled()  # a turn asks again: still refused, still withheld
        assert offers.names() == []
        # and the model is told why, typed by the service's own code where it has one
        why = host.explain("mcp__h__echo")
        assert why is not None and why.error_code == _told(code), why
        assert code in why.detail


def _told(code: str) -> str:
    return code if code in ("mcp_pins_corrupt", "mcp_pin_limit") else "mcp_unavailable"


@pytest.mark.parametrize(
    ("mode", "code", "detail"),
    [
        ("hang", "mcp_timeout", "no answer to initialize"),
        ("flood", "mcp_unavailable", "a line over"),
        ("garbage", "mcp_unavailable", "garbage on its stdout"),
        ("exit", "mcp_unavailable", "exit status 3"),
    ],
)
async def test_a_hostile_server_gets_its_typed_error_and_the_others_keep_serving(
    box: Box, mode: str, code: str, detail: str
) -> None:
    bad = hostile("bad", mode, timeout_secs=1.5, startup_timeout_secs=1.5)
    servers = [hostile("good", "ok", tools=("echo",)), bad]
    async with hosting(box, servers) as (host, daemon, offers):
        failed = await daemon.wait_for("bad", "restarting")
        assert failed.detail.startswith(code) and detail in failed.detail, failed
        assert offers.names() == ["mcp__good__echo"]  # the bad one never offered a tool
        refused = await host.call("bad", "echo", {})
        assert refused.error_code == "mcp_unavailable"
        result = await run(context(box), offers.get("mcp__good__echo"), {"text": "still here"})
        assert (result.ok, result.output) == (True, "still here")


async def test_a_slow_start_is_bounded_by_the_startup_bound_not_the_call_bound(box: Box) -> None:
    # 'slow-start' reads nothing for 2 s: past its 0.5 s call bound, within its start bound
    patient = hostile("patient", "slow-start", timeout_secs=0.5)
    hasty = hostile("hasty", "slow-start", timeout_secs=PATIENCE, startup_timeout_secs=0.5)
    async with hosting(box, [patient, hasty]) as (host, daemon, offers):
        failed = await daemon.wait_for("hasty", "restarting")
        assert failed.detail == "mcp_timeout: hasty: no answer to initialize in 0.5s", failed
        await daemon.wait_for("patient", "ready")
        result = await run(context(box), offers.get("mcp__patient__echo"), {"text": "late"})
        assert (result.ok, result.output) == (True, "late")
        assert host.status["patient"] == "ready"


async def test_a_server_that_keeps_dying_is_restarted_with_backoff_then_fails(box: Box) -> None:
    async with hosting(box, [hostile("bad", "exit")]) as (_, daemon, _):
        failed = await daemon.wait_for("bad", "failed")
        assert failed.restarts == 2  # max_attempts=3: the first start and two more
        assert [s.status for s in daemon.states] == [
            "starting",
            "restarting",
            "starting",
            "restarting",
            "starting",
            "failed",
        ]


async def test_a_missing_program_is_unavailable(box: Box) -> None:
    missing = McpServerSpec(name="gone", transport="stdio", command=str(box.root / "nope"))
    async with hosting(box, [missing]) as (host, daemon, _):
        state = await daemon.wait_for("gone", "restarting")
        assert state.detail.startswith("mcp_unavailable") and "not on PATH" in state.detail
        assert (await host.call("gone", "x", {})).error_code == "mcp_unavailable"


async def test_tool_errors_timeouts_and_big_results_are_typed(box: Box) -> None:
    servers = [hostile("h", "ok", max_result_bytes=1024), hostile("slow", "slow-call")]
    async with hosting(box, servers) as (_host, _, offers):
        ctx = context(box)
        broke = await run(ctx, offers.get("mcp__h__fail"), {})
        assert (broke.error_code, broke.detail) == ("mcp_tool_error", "it broke")
        big = await run(ctx, offers.get("mcp__h__big"), {"n": 4096})
        assert big.error_code == "mcp_result_too_large"
        fits = await run(ctx, offers.get("mcp__h__big"), {"n": 1000})
        assert fits.ok and fits.output == "x" * 1000
        slow = await run(ctx, offers.get("mcp__slow__echo"), {"text": "hi"})
        assert slow.error_code == "mcp_timeout"


async def test_a_server_gets_only_the_variables_its_config_names(box: Box) -> None:
    servers = [hostile("named", "ok", env=("SERVER_TOKEN",)), hostile("bare", "ok")]
    async with hosting(box, servers) as (_, _, offers):
        ctx = context(box)
        named = (await run(ctx, offers.get("mcp__named__env"), {})).output.split(",")
        bare = (await run(ctx, offers.get("mcp__bare__env"), {})).output.split(",")
    assert "SERVER_TOKEN" in named and "SERVER_TOKEN" not in bare
    assert "PROVIDER_KEY" not in named and "PROVIDER_KEY" not in bare
    assert {"PATH", "HOME", "TMPDIR", "LANG"} <= set(bare)


async def test_a_readonly_agent_is_offered_only_read_only_tools(box: Box) -> None:
    async with hosting(box, [hostile("h", "ok")], readonly=True) as (host, _, offers):
        assert offers.names() == ["mcp__h__echo", "mcp__h__read"]
        # Why the others are not offered: the agent's profile (a listed, allowed tool that
        # is not read-only), said as such; anything else is the engine's to say.
        refused = host.explain("mcp__h__write")
        assert refused is not None and refused.error_code == "mcp_tool_not_allowed"
        assert "not read-only" in refused.detail
        for name in ("mcp__h__echo", "mcp__h__nope", "mcp__other__write"):
            assert host.explain(name) is None, name
    async with hosting(box, [hostile("h", "ok")]) as (host, _, _):
        assert host.explain("mcp__h__write") is None  # offered: nothing to explain


async def test_a_supervised_agent_asks_before_a_tool_that_is_not_read_only(box: Box) -> None:
    async with hosting(box, [hostile("h", "ok")]) as (_, _, offers):
        asked: list[str] = []
        denied = context(box, asks=True, approve=False, asked=asked)
        result = await run(denied, offers.get("mcp__h__write"), {"path": "a.txt"})
        assert result.error_code == "approval_denied"
        assert asked == ['call mcp__h__write {"path": "a.txt"}']
        assert not (box.ws / "a.txt").exists()
        echo = await run(denied, offers.get("mcp__h__echo"), {"text": "free"})
        assert echo.ok and asked == ['call mcp__h__write {"path": "a.txt"}']  # read-only
        approved = context(box, asks=True, approve=True)
        written = await run(approved, offers.get("mcp__h__write"), {"path": "a.txt"})
        assert written.output == "written" and (box.ws / "a.txt").read_text() == "pwned"


async def test_a_changed_schema_is_listed_again_and_pinned_again(box: Box) -> None:
    async with hosting(box, [hostile("h", "change-schema")], service=True) as (
        host,
        daemon,
        offers,
    ):
        assert "mcp__h__echo" in offers.names()
        changed = offers.changed
        result = await run(context(box), offers.get("mcp__h__echo"), {"text": "x"})
        assert result.ok
        with trio.fail_after(PATIENCE):
            await changed.wait()  # list_changed: listed and pinned again
        assert "mcp__h__echo" not in offers.names()  # its digest changed: withheld
        assert "mcp__h__read" in offers.names()
        await host.wait_settled()  # a turn asks again: still withheld
        assert "mcp__h__echo" not in offers.names()
        daemon.trust("h", "echo")
        await host.wait_settled()  # the next turn gets it back, with its new schema
        assert "extra" in offers.get("mcp__h__echo").spec.parameters["properties"]


@pytest.mark.skipif(not CONFINED, reason="this kernel has no Landlock")
async def test_the_kernel_refuses_the_servers_writes_outside_and_reads_of_protected_paths(
    box: Box,
) -> None:
    async with hosting(box, [hostile("h", "ok")]) as (_, _, offers):
        ctx = context(box)
        write, read = offers.get("mcp__h__write"), offers.get("mcp__h__read")
        outside = box.root / "outside.txt"
        assert (await run(ctx, write, {"path": str(outside)})).output == "refused: EACCES"
        assert not outside.exists()
        assert (await run(ctx, write, {"path": "inside.txt"})).output == "written"
        for path in (box.root / "secret" / "key", box.root / "state" / "daemon.db"):
            assert (await run(ctx, read, {"path": str(path)})).output == "refused: EACCES"
        assert (await run(ctx, read, {"path": "inside.txt"})).output == "pwned"


async def test_the_servers_stop_with_the_host(box: Box) -> None:
    async with hosting(box, [hostile("h", "ok")]) as (host, _, _):
        pid = host.connections["h"].pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_an_http_server_that_is_not_listening_is_unavailable_and_retried(
    box: Box,
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = McpServerSpec(
        name="down", transport="http", url=f"http://127.0.0.1:{port}/mcp", tools=("x",)
    )
    async with hosting(box, [down]) as (host, daemon, _):
        state = await daemon.wait_for("down", "restarting")
        assert state.detail.startswith(f"mcp_unavailable: down: cannot reach 127.0.0.1:{port}")
        assert "ECONNREFUSED" in state.detail, state
        assert (await daemon.wait_for("down", "failed")).restarts == 2  # with backoff
        assert (await host.call("down", "x", {})).error_code == "mcp_unavailable"


@pytest.mark.skipif(
    GIT_SERVER is None or shutil.which("git") is None, reason="mcp-server-git or git missing"
)
async def test_mcp_server_git_runs_git_only_when_the_agent_may(box: Box) -> None:
    assert GIT_SERVER is not None
    await trio.run_process(["git", "init", "-q", str(box.ws)])
    git = McpServerSpec(
        name="git",
        transport="stdio",
        command=GIT_SERVER,
        args=("--repository", str(box.ws)),
        tools=("git_status", "git_log"),
        timeout_secs=20.0,
    )
    async with hosting(box, [git], commands=("git", "ls")) as (_, _, offers):
        assert offers.names() == ["mcp__git__git_status", "mcp__git__git_log"]
        status = await run(context(box), offers.get("mcp__git__git_status"), {"repo_path": "."})
        assert status.ok and "hostile_server.py" in status.output, status
    if CONFINED:  # git is not among the agent's commands: the kernel refuses to run it
        async with hosting(box, [git]) as (_, daemon, offers):
            state = await daemon.wait_for("git", "restarting")
            assert state.detail.startswith("mcp_unavailable") and offers.names() == []
