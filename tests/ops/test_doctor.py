"""doctor's checks are pure: each one is pinned here over constructed Facts, case by case.
What the gathering sees on a real machine is tested through the CLI (tests/cli/test_doctor.py).
"""

from __future__ import annotations

import copy
import struct
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from tests.conftest import VALID_DOC
from zeroclaw.config import load_config_text
from zeroclaw.control import (
    AgentStatus,
    DaemonStatus,
    RefusedConnections,
    ReloadStatus,
    RouterStats,
    StatusReply,
)
from zeroclaw.ops import (
    CHECKS,
    CheckResult,
    DaemonFacts,
    DirFacts,
    Facts,
    LmdbFacts,
    LockFacts,
    ProbeFacts,
    ReaderSlot,
    SystemdFacts,
    UnitInfo,
    env_file_names,
    gather_facts,
    parse_lock_readers,
    parse_proc_locks,
    parse_unit,
    run_checks,
)
from zeroclaw.ops._doctor import (
    LMDB_STORES,
    UNCONFINED,
    check_agent_sandboxes,
    check_config,
    check_daemon,
    check_dirs,
    check_lmdb,
    check_locks,
    check_provider_keys,
    check_providers_reachable,
    check_sandbox_in_force,
    check_systemd,
)

RUN = Path("/run/zc")


def config_doc(**agents: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(VALID_DOC)
    doc["providers"]["openai"] = {"o": {"model": "m", "api_key_env": "O_KEY"}}
    doc["providers"]["anthropic"] = {"a": {"model": "m"}}
    for alias, changes in agents.items():
        doc["agents"][alias].update(changes)
    return doc


def facts(abi: int = 7, doc: dict[str, Any] | None = None, **changes: Any) -> Facts:
    config = load_config_text(tomli_w.dumps(doc), base_dir=Path("/tmp")) if doc else None
    base = Facts(Path("/x/zeroclaw.toml"), config, () if doc else ("broken",), abi, Path("/tmp"))
    return replace(base, **changes)


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results}


def statuses(results: list[CheckResult]) -> dict[str, str]:
    return {r.name: r.status for r in results}


def agent(alias: str, pid: int | None = 10, in_force: bool | None = None) -> AgentStatus:
    return AgentStatus(
        alias,
        "running",
        pid,
        0,
        None,
        None,
        0.0,
        0.0,
        "always",
        0,
        None,
        "landlock ABI 7",
        in_force,
    )


ROUTER = RouterStats(
    "ipc:///bus", "key", [], 0, 0, 0, {"delivered": 0}, RefusedConnections(), {}, 0.0
)


def status_reply(*agents: AgentStatus, pid: int = 99) -> StatusReply:
    daemon = DaemonStatus(
        pid, "1.0", 0.0, 12.0, "/x", "/s", str(RUN), True, ReloadStatus("none", None, [], {})
    )
    return StatusReply(daemon, {}, ROUTER, list(agents))


def answered(*agents: AgentStatus, router: Any = "socket", uid: int = 0) -> DaemonFacts:
    return DaemonFacts(RUN, "answered", "", status_reply(*agents), uid, router)


def test_every_result_that_is_not_ok_says_how_to_fix_it() -> None:
    """Run every check over facts that make most of them complain."""
    f = facts(
        0,
        config_doc(alpha={"model_provider": "openai.o"}),
        euid=0,
        dirs=(DirFacts("state dir", Path("/s"), True, True, 1000, 0o777),),
        daemon=DaemonFacts(RUN, "down", "nobody"),
        locks=(LockFacts("daemon lock", RUN / "zeroclaw.lock", True, 42, ()),),
        lmdb=(LmdbFacts("memory", Path("/s/memory"), True, problem="garbage"),),
        systemd=SystemdFacts(Path("/etc/u"), False, Path("/h/u"), False, False),
        probes=(ProbeFacts("openai.o", "http://h/models", "O_KEY", error="refused"),),
    )
    results = run_checks(f)
    assert {r.status for r in results} == {"ok", "warn", "fail"}
    assert all(r.fix for r in results if r.status != "ok")
    assert len(CHECKS) == 13


# --- config --------------------------------------------------------------------------------


def test_config_valid_is_ok_and_invalid_fails_with_its_errors() -> None:
    assert check_config(facts(doc=VALID_DOC))[0].status == "ok"
    bad = check_config(facts(doc=None, config_errors=("x.toml: broken", "line 2")))[0]
    assert (bad.status, bad.message) == ("fail", "x.toml: broken; line 2")
    assert "zeroclaw config init" in bad.fix


def test_invalid_config_skips_what_needs_one() -> None:
    got = statuses(run_checks(facts(doc=None)))
    assert got["config"] == "fail"
    assert not any(n.startswith(("agent", "provider ")) for n in got)


# --- provider keys ---------------------------------------------------------------------------


def test_a_key_variable_unset_fails_naming_the_variable_and_its_agents() -> None:
    doc = config_doc(alpha={"model_provider": "openai.o"}, beta={"model_provider": "openai.o"})
    result = check_provider_keys(facts(doc=doc))
    assert [(r.name, r.status) for r in result] == [("provider openai.o: key", "fail")]
    assert "O_KEY is not set" in result[0].message and "alpha, beta" in result[0].message
    assert "O_KEY" in result[0].fix


def test_a_key_variable_set_is_ok() -> None:
    doc = config_doc(alpha={"model_provider": "openai.o"})
    result = check_provider_keys(facts(doc=doc, env_set=frozenset({"O_KEY"})))
    assert [(r.status, r.message) for r in result] == [("ok", "O_KEY is set (used by alpha)")]


def test_anthropic_uses_its_default_variable_and_disabled_agents_need_no_key() -> None:
    doc = config_doc(alpha={"model_provider": "anthropic.a"}, beta={"model_provider": "openai.o"})
    doc["agents"]["beta"]["enabled"] = False
    result = by_name(check_provider_keys(facts(doc=doc)))
    assert list(result) == ["provider anthropic.a: key"]
    assert "ANTHROPIC_API_KEY" in result["provider anthropic.a: key"].message


def test_providers_without_a_key_are_not_listed() -> None:
    assert check_provider_keys(facts(doc=VALID_DOC)) == []  # offline


# --- dirs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("d", "status", "fix"),
    [
        (DirFacts("state dir", Path("/s"), True, True, 0, 0o700), "ok", ""),
        (DirFacts("state dir", Path("/s"), False), "warn", "the daemon creates it"),
        (DirFacts("state dir", Path("/s"), True, False, 0, 0o600), "fail", "move /s"),
        (DirFacts("state dir", Path("/s"), True, True, 1000, 0o700), "fail", "chown -R 0 /s"),
        (DirFacts("state dir", Path("/s"), True, True, 0, 0o777), "fail", "chmod 700 /s"),
        (DirFacts("state dir", Path("/s"), True, True, 0, 0o720), "fail", "chmod 700 /s"),
        (DirFacts("state dir", Path("/s"), True, True, 0, 0o755), "warn", "chmod 700 /s"),
    ],
)
def test_dirs(d: DirFacts, status: str, fix: str) -> None:
    [result] = check_dirs(facts(euid=0, dirs=(d,)))
    assert result.status == status and fix in result.fix


def test_a_dir_owned_by_the_running_daemons_user_is_fine_for_root() -> None:
    d = DirFacts("state dir", Path("/s"), True, True, 990, 0o700)
    [result] = check_dirs(facts(euid=0, dirs=(d,), daemon=answered(uid=990)))
    assert result.status == "ok"


# --- daemon and router socket ------------------------------------------------------------------


def test_no_daemon_is_a_warning_with_how_to_start_it() -> None:
    [result] = check_daemon(facts(daemon=DaemonFacts(RUN, "down", "x")))
    assert result.status == "warn" and "zeroclaw daemon" in result.fix


@pytest.mark.parametrize("outcome", ["untrusted", "timeout", "error"])
def test_a_control_socket_that_does_not_serve_us_fails(outcome: Any) -> None:
    [result] = check_daemon(facts(daemon=DaemonFacts(RUN, outcome, "why")))
    assert result.status == "fail" and result.fix


@pytest.mark.parametrize(
    ("router", "status"), [("socket", "ok"), ("missing", "fail"), ("other", "fail")]
)
def test_an_answering_daemon_needs_its_router_socket(router: Any, status: str) -> None:
    got = by_name(check_daemon(facts(daemon=answered(router=router))))
    assert got["daemon"].status == "ok" and "pid 99" in got["daemon"].message
    assert got["router socket"].status == status


# --- locks -------------------------------------------------------------------------------------

LOCK = RUN / "zeroclaw.lock"


@pytest.mark.parametrize(
    ("lock", "daemon", "status", "words"),
    [
        (LockFacts("daemon lock", LOCK, False), None, "ok", "no lock file"),
        (LockFacts("daemon lock", LOCK, True, None, ()), None, "ok", "free"),
        (LockFacts("daemon lock", LOCK, True, 99, (99,)), answered(), "ok", "the daemon"),
        (LockFacts("daemon lock", LOCK, True, 7, (7,)), answered(), "warn", "not the daemon"),
        (LockFacts("daemon lock", LOCK, True, 7, (7,)), None, "fail", "does not answer"),
        (LockFacts("daemon lock", LOCK, True, 42, ()), None, "fail", "stale, left by pid 42"),
        (LockFacts("memory lock", LOCK, True, None, (7,)), None, "warn", "zeroclaw memory"),
        (
            LockFacts("daemon lock", LOCK, True, 7, (7,)),
            DaemonFacts(RUN, "refused", "forbidden"),
            "ok",
            "see 'daemon'",
        ),
    ],
)
def test_locks(lock: LockFacts, daemon: DaemonFacts | None, status: str, words: str) -> None:
    [result] = check_locks(facts(locks=(lock,), daemon=daemon))
    assert result.status == status and words in result.message
    if status == "fail" and "stale" in words:
        assert result.fix.startswith("harmless") and f"rm {LOCK}" in result.fix


# --- LMDB --------------------------------------------------------------------------------------

STORE = Path("/s/memory")
GOOD = LmdbFacts("memory", STORE, True, 8192, None, 4096, 1 << 20, 2, 2, ())


def lmdb_results(store: LmdbFacts) -> dict[str, CheckResult]:
    return by_name(check_lmdb(facts(lmdb=(store,))))


def test_a_healthy_store_is_ok_on_all_three_lines() -> None:
    got = lmdb_results(replace(GOOD, readers=(ReaderSlot(5, 3, True),)))
    assert statuses(list(got.values())) == {
        "memory store": "ok",
        "memory store: map": "ok",
        "memory store: readers": "ok",
    }
    assert "8.0 KiB on disk, format 2" in got["memory store"].message
    assert "(0%)" in got["memory store: map"].message
    assert got["memory store: readers"].message == "1 live reader(s)"


def test_a_store_not_created_yet_is_ok() -> None:
    got = lmdb_results(LmdbFacts("memory", STORE, False))
    assert statuses(list(got.values())) == {"memory store": "ok"}


def test_a_damaged_store_fails_alone_with_how_to_move_it_aside() -> None:
    got = lmdb_results(replace(GOOD, problem="LMDB cannot open it (MDB_INVALID)"))
    assert list(got) == ["memory store"]
    assert got["memory store"].status == "fail"
    assert f"mv {STORE} {STORE}.damaged" in got["memory store"].fix


@pytest.mark.parametrize(("found", "status"), [(3, "fail"), (1, "warn"), (0, "warn"), (2, "ok")])
def test_format_versions(found: int, status: str) -> None:
    assert lmdb_results(replace(GOOD, format_found=found))["memory store"].status == status


def test_a_map_above_80_percent_warns_with_its_next_size() -> None:
    got = lmdb_results(replace(GOOD, used_bytes=850, map_size=1000))["memory store: map"]
    assert got.status == "warn" and "(85%)" in got.message and "memory_map_size" in got.fix
    at_80 = lmdb_results(replace(GOOD, used_bytes=800, map_size=1000))["memory store: map"]
    assert at_80.status == "ok"


def test_stale_readers_are_counted_and_never_cleared() -> None:
    readers = (ReaderSlot(5, 3, True), ReaderSlot(6, 3, False), ReaderSlot(7, 1, False))
    got = lmdb_results(replace(GOOD, readers=readers))["memory store: readers"]
    assert got.status == "warn" and got.message.startswith("2 reader slot(s)")
    assert "pid 6, 7" in got.message and "never clears" in got.fix


def test_an_unknown_lock_file_layout_is_a_warning() -> None:
    got = lmdb_results(replace(GOOD, readers_problem="format 0x2 unknown"))
    assert got["memory store: readers"].status == "warn"


def test_the_format_keys_are_the_stores_own() -> None:
    from zeroclaw.memory import _store as memory_store
    from zeroclaw.subagents import _store as subagent_store

    assert LMDB_STORES == (
        ("memory", "memory", memory_store._FORMAT_KEY, memory_store.FORMAT_VERSION),
        ("sub-agent", "subagents", subagent_store._FORMAT_KEY, subagent_store.FORMAT_VERSION),
    )


# --- Landlock: the kernel, each profile, each running agent ------------------------------------


def with_sandbox(mode: str) -> dict[str, Any]:
    doc = copy.deepcopy(VALID_DOC)
    doc["risk_profiles"]["sup"]["sandbox"] = mode
    return doc


def test_everything_ok_with_landlock_7() -> None:
    got = statuses(run_checks(facts(7, VALID_DOC)))
    for name in ("landlock", "landlock_abstract_unix_scope", "agent alpha: sandbox"):
        assert got[name] == "ok"


def test_old_abi_warns_about_the_abstract_socket_scope() -> None:
    got = statuses(run_checks(facts(5, VALID_DOC)))
    assert got["landlock_abstract_unix_scope"] == "warn"
    assert got["agent alpha: sandbox"] == "ok"


@pytest.mark.parametrize(("abi", "mode"), [(7, "none"), (0, "auto")])
def test_unconfined_agents_are_warned(abi: int, mode: str) -> None:
    got = by_name(check_agent_sandboxes(facts(abi, with_sandbox(mode))))
    assert got["agent alpha: sandbox"].status == "warn"
    assert UNCONFINED in got["agent alpha: sandbox"].message


def test_required_landlock_missing_fails() -> None:
    got = statuses(run_checks(facts(0, with_sandbox("landlock"))))
    assert got["agent alpha: sandbox"] == "fail" and got["landlock"] == "warn"


@pytest.mark.parametrize(
    ("mode", "in_force", "status"),
    [
        ("auto", True, "ok"),
        ("landlock", True, "ok"),
        ("auto", False, "warn"),
        ("none", False, "warn"),
        ("landlock", False, "fail"),
        ("auto", None, "warn"),
        ("landlock", None, "warn"),
    ],
)
def test_sandbox_in_force_as_each_agent_reported_it(
    mode: str, in_force: bool | None, status: str
) -> None:
    f = facts(7, with_sandbox(mode), daemon=answered(agent("alpha", 10, in_force)))
    [result] = check_sandbox_in_force(f)
    assert (result.name, result.status) == ("agent alpha: sandbox in force", status)
    if status != "ok":
        assert "zeroclaw agents restart alpha" in result.fix or "again" in result.fix


def test_agents_not_running_and_no_daemon_report_nothing() -> None:
    assert check_sandbox_in_force(facts(7, VALID_DOC, daemon=answered(agent("a", None)))) == []
    assert check_sandbox_in_force(facts(7, VALID_DOC, daemon=DaemonFacts(RUN, "down"))) == []


# --- systemd -----------------------------------------------------------------------------------

SYS, USER = Path("/etc/systemd/system/zeroclaw.service"), Path("/h/.config/u/zeroclaw.service")


@pytest.mark.parametrize(
    ("s", "statuses_", "words"),
    [
        (SystemdFacts(SYS, False, USER, False, True), ["warn"], "no zeroclaw.service"),
        (SystemdFacts(SYS, True, USER, False, False), ["ok"], "systemd is not running"),
        (SystemdFacts(SYS, True, USER, False, True, "active"), ["ok"], "active"),
        (SystemdFacts(SYS, True, USER, False, True, "failed"), ["warn"], "failed"),
        (SystemdFacts(SYS, False, USER, True, True, None, "inactive"), ["warn"], "inactive"),
        (SystemdFacts(SYS, True, USER, True, False), ["ok", "ok"], "installed"),
    ],
)
def test_systemd(s: SystemdFacts, statuses_: list[str], words: str) -> None:
    results = check_systemd(facts(systemd=s))
    assert [r.status for r in results] == statuses_
    assert words in results[0].message


def test_a_missing_unit_says_how_to_install_it_and_a_stopped_user_unit_uses_user() -> None:
    [missing] = check_systemd(facts(systemd=SystemdFacts(SYS, False, USER, False, False)))
    assert "zeroclaw service install" in missing.fix
    [stopped] = check_systemd(facts(systemd=SystemdFacts(SYS, False, USER, True, True, None, "x")))
    assert "systemctl --user start zeroclaw" in stopped.fix


# --- providers reachable -----------------------------------------------------------------------


def test_without_network_providers_are_not_checked() -> None:
    [result] = check_providers_reachable(facts(probes=None))
    assert (result.status, result.message) == ("ok", "not checked; use --network to check")


@pytest.mark.parametrize(
    ("probe", "status", "words"),
    [
        (ProbeFacts("openai.o", "u", "K", 200, None, 0.1), "ok", "HTTP 200"),
        (ProbeFacts("openai.o", "u", "K", None, "ConnectError"), "fail", "failed: ConnectError"),
        (ProbeFacts("openai.o", "u", "K", 401), "fail", "key was refused"),
        (ProbeFacts("openai.o", "u", "K", 404), "warn", "HTTP 404"),
        (ProbeFacts("openai.o", "u", "K", 503), "warn", "HTTP 503"),
    ],
)
def test_probes(probe: ProbeFacts, status: str, words: str) -> None:
    [result] = check_providers_reachable(facts(probes=(probe,)))
    assert result.status == status and words in result.message
    assert result.name == "provider openai.o: reachable"


# --- the parsers gather_facts uses -------------------------------------------------------------


def lock_file(*slots: tuple[int, int], magic: int = 0xBEEFC0DE, fmt: int = 0x10001) -> bytes:
    data = bytearray(8192)
    struct.pack_into("<II", data, 0, magic, fmt)
    struct.pack_into("<I", data, 56, len(slots))
    for i, (pid, txnid) in enumerate(slots):
        struct.pack_into("<Qi", data, 128 + 64 * i, txnid, pid)
    return bytes(data)


def test_parse_lock_readers_lists_used_slots() -> None:
    assert parse_lock_readers(lock_file((11, 3), (0, 0), (12, 2**64 - 1))) == [
        (11, 3),
        (12, 2**64 - 1),
    ]


@pytest.mark.parametrize("data", [b"", lock_file(magic=1), lock_file(fmt=2)])
def test_parse_lock_readers_refuses_what_it_does_not_know(data: bytes) -> None:
    with pytest.raises(ValueError, match=r"lock\.mdb"):
        parse_lock_readers(data)


def test_parse_proc_locks_finds_the_holders_of_one_inode() -> None:
    dev = (8 << 8) | 1
    text = (
        "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF\n"
        "1: -> FLOCK  ADVISORY  WRITE 999 08:01:5678 0 EOF\n"
        "2: POSIX  ADVISORY  READ 77 08:01:9999 0 EOF\n"
        "3: FLOCK  ADVISORY  WRITE 55 08:01:5678 0 EOF\n"
    )
    assert parse_proc_locks(text, dev, 5678) == (55, 1234)
    assert parse_proc_locks(text, dev, 1) == ()


# --- what doctor may not look at, and the system service's user -------------------------------


def test_what_doctor_may_not_read_is_a_warning_saying_to_run_it_as_root() -> None:
    denied = "Permission denied"
    f = facts(
        dirs=(DirFacts("state dir", Path("/s"), True, unreadable=denied),),
        locks=(LockFacts("memory lock", Path("/s/memory.lock"), True, unreadable=denied),),
        lmdb=(LmdbFacts("memory", STORE, True, unreadable=denied),),
    )
    results = check_dirs(f) + check_locks(f) + check_lmdb(f)
    assert [r.status for r in results] == ["warn"] * 3
    assert all(denied in r.message and "sudo zeroclaw doctor" in r.fix for r in results)


def test_a_daemon_refusing_doctor_is_a_warning() -> None:
    daemon = DaemonFacts(RUN, "refused", "forbidden: uid 1000 may not connect")
    [result] = check_daemon(facts(daemon=daemon))
    assert result.status == "warn" and "sudo zeroclaw doctor" in result.fix


def service(uid: int | None, dynamic: bool = False, user: str = "zeroclaw") -> SystemdFacts:
    return SystemdFacts(SYS, True, USER, False, False, None, None, user, uid, dynamic)


@pytest.mark.parametrize(
    ("systemd", "owner", "status"),
    [
        (service(998), 998, "ok"),  # root looks at a stopped service's dirs
        (service(998), 997, "fail"),
        (service(None, dynamic=True), 61200, "ok"),  # DynamicUser=: systemd picks the uid
        (service(None, dynamic=True), 1000, "fail"),
    ],
)
def test_the_system_services_user_may_own_the_dirs(
    systemd: SystemdFacts, owner: int, status: str
) -> None:
    d = DirFacts("state dir", Path("/s"), True, True, owner, 0o700)
    [result] = check_dirs(facts(euid=0, dirs=(d,), systemd=systemd))
    assert result.status == status


def test_a_unit_running_as_a_user_that_does_not_exist_fails() -> None:
    got = by_name(check_systemd(facts(systemd=service(None))))
    assert got["systemd unit: user"].status == "fail"
    assert "useradd --system" in got["systemd unit: user"].fix
    assert "systemd unit: user" not in by_name(check_systemd(facts(systemd=service(998))))
    dynamic = service(None, dynamic=True)
    assert "systemd unit: user" not in by_name(check_systemd(facts(systemd=dynamic)))


def test_parse_unit_reads_the_service_section() -> None:
    text = (
        "[Unit]\nUser=nope\n[Service]\n# User=commented\nUser=zeroclaw\nDynamicUser=yes\n"
        'Environment=A=1 "B=two words"\nEnvironmentFile=-/etc/zeroclaw/env\n'
        "EnvironmentFile=/etc/other\n[Install]\nEnvironment=C=3\n"
    )
    assert parse_unit(text) == UnitInfo(
        "zeroclaw", True, ("A", "B"), (("/etc/zeroclaw/env", True), ("/etc/other", False))
    )
    assert parse_unit("[Service]\nUser=a\nUser=\n") == UnitInfo()
    assert env_file_names("# c\nA=1\n; d\n B = 2\nnot a line\n9X=1\n") == ("A", "B")


def test_a_key_the_system_unit_sets_is_ok_though_this_shell_lacks_it() -> None:
    doc = config_doc(alpha={"model_provider": "openai.o"})
    systemd = replace(service(998), unit_env={"O_KEY": "/etc/zeroclaw/env"})
    [result] = check_provider_keys(facts(doc=doc, systemd=systemd))
    assert result.status == "ok"
    assert result.message == "O_KEY is set by /etc/zeroclaw/env for the service (used by alpha)"


def test_gather_reads_the_system_unit_and_its_environment_file(tmp_path: Path) -> None:
    """gather_facts over real files: a unit, its EnvironmentFile, a config naming a key."""
    (tmp_path / "env").write_text("O_KEY=sk-never-shown\n")
    (tmp_path / "zeroclaw.service").write_text(
        f"[Service]\nUser=root\nEnvironmentFile=-{tmp_path / 'env'}\n"
    )
    doc = config_doc(alpha={"model_provider": "openai.o"})
    doc["daemon"] = {"state_dir": str(tmp_path / "s"), "runtime_dir": str(tmp_path / "r")}
    config = tmp_path / "zeroclaw.toml"
    config.write_text(tomli_w.dumps(doc))
    env = {"HOME": str(tmp_path), "HOOK_SECRET": "x"}
    f = gather_facts(config, env=env, system_unit_dir=tmp_path)
    assert f.systemd is not None and f.systemd.service_uid == 0
    assert f.systemd.unit_env == {"O_KEY": str(tmp_path / "env")}
    assert f.env_set == frozenset()
    got = by_name(run_checks(f))
    assert got["provider openai.o: key"].status == "ok"
    assert "sk-never-shown" not in repr(f)


def test_a_daemon_run_as_root_is_a_warning_with_its_fix() -> None:
    """Issue 24 (ADR 0043): root is said, whether the daemon runs or its unit would."""
    from zeroclaw.ops._doctor import check_daemon_user

    (root,) = check_daemon_user(facts(daemon=answered(uid=0)))
    assert root.status == "warn" and "runs as root" in root.message
    assert "capability" in root.message and "zeroclaw service install" in root.fix
    (user,) = check_daemon_user(facts(daemon=answered(uid=998)))
    assert user.status == "ok" and "uid 998" in user.message
    unit = SystemdFacts(Path("/etc/u"), True, Path("/h/u"), False, True, service_user=None)
    (rooted,) = check_daemon_user(facts(systemd=unit))
    assert rooted.status == "warn" and rooted.message.startswith("/etc/u runs the daemon as root")
    assert rooted.fix
    named = replace(unit, service_user="zeroclaw", service_uid=998)
    assert check_daemon_user(facts(systemd=named)) == []
    assert check_daemon_user(facts(systemd=replace(unit, dynamic_user=True))) == []
    assert "daemon user" in statuses(run_checks(facts(daemon=answered(uid=0))))
