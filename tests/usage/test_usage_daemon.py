"""Usage and budgets through a real daemon (issue 27): what `chat --json`, `zeroclaw usage`,
events, metrics and `status` say, and the refusals budgets give on each channel."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.channels.test_channels_daemon import (
    SECRET,
    free_port,
    post,
    wait_serving,
    webhook_config,
)
from tests.conftest import PATIENCE
from tests.known_secrets import OPENAI_KEY
from tests.schedules.test_schedules_daemon import events
from tests.subagents.helpers import invocation, model_server, write_bundle
from tests.subagents.helpers import start as start_subagents
from tests.supervisor.harness import Daemon, agent_entry, make_config

DaemonFactory = Callable[..., Daemon]


def chat(daemon: Daemon, alias: str, text: str, *, ok: bool = True) -> dict[str, Any]:
    result = daemon.cli("--agent", alias, "chat", "-m", text, "--json")
    assert (result.returncode == 0) == ok, result.stderr + daemon.log()
    return json.loads(result.stdout or result.stderr)  # type: ignore[no-any-return]


def usage(daemon: Daemon, *args: str) -> dict[str, Any]:
    result = daemon.cli("usage", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def priced(root: Path, agents: dict[str, dict[str, Any]], **kw: Any) -> dict[str, Any]:
    doc = make_config(root, agents, **kw)
    doc["providers"]["offline"]["default"] = {
        "price": {"input_per_mtok": "2.5", "output_per_mtok": "10", "cached_input_per_mtok": "1.25"}
    }
    return doc


def test_a_turn_reports_its_usage_and_the_ledger_events_and_metrics_count_it(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(priced(root, {"alpha": agent_entry()}), faults=False).start()
    done = chat(daemon, "alpha", "hello there")
    [step] = done["usage"]
    assert step["provider"] == "offline.default"
    tokens = step["tokens"]
    assert tokens["input_tokens"] > 0 and tokens["output_tokens"] > 0
    expected_pico = tokens["input_tokens"] * 2_500_000 + tokens["output_tokens"] * 10_000_000

    spent = usage(daemon)
    [group] = spent["groups"]
    assert (group["agent"], group["origin"]) == ("alpha", "operator")
    assert (group["turns"], group["steps"]) == (1, 1)
    assert group["input_tokens"] == tokens["input_tokens"]
    assert group["cost_pico"] == expected_pico
    assert spent["schema_version"] and spent["rows"]

    events = daemon.cli("events", "--kind", "usage", "--json")
    assert events.returncode == 0, events.stderr
    [turn] = [json.loads(line)["event"] for line in events.stdout.splitlines()]
    assert turn["agent"] == "alpha" and turn["origin"] == "operator"
    assert turn["providers"] == ["offline.default"]

    metrics = daemon.cli("metrics")
    assert metrics.returncode == 0, metrics.stderr
    line = (
        'zeroclaw_tokens_total{agent="alpha",kind="input",provider="offline.default"} '
        f"{float(tokens['input_tokens'])}"
    )
    assert line in metrics.stdout, metrics.stdout


@contextmanager
def counted_model(root: Path) -> Iterator[tuple[str, Path]]:
    """An OpenAI-compatible loopback model (a process) that logs each request it reads."""
    log = root / "model-requests.log"
    log.touch()
    with model_server("counted", str(log)) as url:
        yield url, log


def requests(log: Path) -> int:
    return len(log.read_text().splitlines())


def refusal(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The `--json` failure of a command: `{ok: false, error: {code, message}}`."""
    assert result.returncode != 0, result.stdout
    failure = json.loads(result.stdout or result.stderr)
    assert failure["ok"] is False, failure
    return failure["error"]  # type: ignore[no-any-return]


def event_kinds(daemon: Daemon, kind: str) -> list[dict[str, Any]]:
    found = daemon.cli("events", "--kind", kind, "--json")
    assert found.returncode == 0, found.stderr
    return [json.loads(line)["event"] for line in found.stdout.splitlines()]


def test_a_turn_over_turns_per_hour_is_refused_before_any_provider_call(
    root: Path, daemons: DaemonFactory
) -> None:
    with counted_model(root) as (url, log):
        doc = make_config(
            root,
            {"alpha": agent_entry(model_provider="openai.model", budget={"turns_per_hour": 2})},
        )
        doc["providers"]["openai"] = {"model": {"base_url": url, "model": "m", "max_retries": 0}}
        daemon = daemons(doc, faults=False).start()
        for _ in range(2):
            assert chat(daemon, "alpha", "hi")["reply"] == "fake counted answers"
        assert requests(log) == 2
        refused = daemon.cli("--agent", "alpha", "chat", "-m", "hi", "--json")
        error = refusal(refused)
        assert error["code"] == "budget_exceeded"
        assert "turns_per_hour of agent alpha spent (2 of 2)" in error["message"]
        assert requests(log) == 2  # the model never heard of it
        [exceeded] = event_kinds(daemon, "budget")
        assert exceeded["limit"] == "turns_per_hour" and exceeded["at"] == "start"
        [budget] = daemon.status()["budgets"]
        assert (budget["agent"], budget["scope"]) == ("alpha", "agent")
        assert (budget["turns_last_hour"], budget["turns_per_hour"]) == (2, 2)
        metrics = daemon.cli("metrics").stdout
        assert 'zeroclaw_budget_refusals_total{agent="alpha",limit="turns_per_hour"} 1.0' in metrics


def test_a_budget_crossed_during_a_turn_ends_it_after_its_step_and_refuses_the_next(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = make_config(root, {"alpha": agent_entry(budget={"tokens_per_day": 1})})
    daemon = daemons(doc, faults=False).start()
    ended = chat(daemon, "alpha", "list")  # a tool step, then the budget is spent
    assert ended["stopped"] == "budget_exceeded"
    assert ended["reply"].startswith("(stopped: budget_exceeded: tokens_per_day of agent alpha")
    assert [call["name"] for call in ended["tool_calls"]] == ["file_list"]  # its step ran
    assert len(ended["usage"]) == 1  # and no second provider step
    error = refusal(daemon.cli("--agent", "alpha", "chat", "-m", "hi", "--json"))
    assert error["code"] == "budget_exceeded"
    [step_end, refused] = event_kinds(daemon, "budget")
    assert (step_end["at"], refused["at"]) == ("step", "start")
    [spent] = event_kinds(daemon, "usage")
    assert spent["stopped"] is True and spent["steps"] == 1
    # The day's spend outlives the daemon: a restart still refuses.
    daemon.stop()
    daemon = daemons(doc, faults=False).start()
    assert refusal(daemon.cli("--agent", "alpha", "chat", "-m", "hi", "--json"))["code"] == (
        "budget_exceeded"
    )


def test_outside_senders_have_budgets_of_their_own_and_of_their_channel_together(
    root: Path, daemons: DaemonFactory
) -> None:
    port = free_port()
    doc = webhook_config(root, {"ops": port})
    doc["agents"]["alpha"]["budget"] = {
        "origins": {
            "webhook.ops:ci-bot": {"turns_per_hour": 1},
            "webhook.ops": {"turns_per_hour": 3},
        }
    }
    daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=SECRET)
    wait_serving(daemon, "webhook.ops")
    assert post(port, "ops", {"sender": "ci-bot", "text": "hello 1"}).status_code == 200
    over = post(port, "ops", {"sender": "@CI-Bot", "text": "hello 2"})  # the same sender
    assert (over.status_code, over.json()["error"]) == (429, "budget_exceeded"), over.text
    assert over.headers["retry-after"] == "60"
    # Told whose limit, in the sender's terms: not the agent, other keys or the amounts.
    assert over.json()["message"] == "your turns_per_hour budget is spent; try again later"
    for n in range(2):  # another sender has its own; the channel's three are shared
        assert post(port, "ops", {"sender": "bob", "text": f"hello {n}"}).status_code == 200
    flood = post(port, "ops", {"sender": "mallory", "text": "hello 3"})
    assert (flood.status_code, flood.json()["error"]) == (429, "budget_exceeded")
    told = flood.json()["message"]
    assert told == "this channel's turns_per_hour budget is spent; try again later"
    # The operator's event has it all.
    refusals = [
        e for e in events(daemon, "budget.exceeded") if e["origin"] == "webhook.ops:mallory"
    ]
    assert "every sender of webhook.ops together on agent alpha" in refusals[0]["detail"], refusals
    assert chat(daemon, "alpha", "hi")["reply"]  # the operator's turns are not theirs
    origins = {g["origin"]: g["turns"] for g in usage(daemon)["groups"]}
    assert origins == {"webhook.ops:ci-bot": 1, "webhook.ops:bob": 2, "operator": 1}


def test_a_peers_question_over_its_budget_is_refused_to_the_asking_tool(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = make_config(
        root,
        {
            "alpha": agent_entry(),
            "beta": agent_entry(budget={"origins": {"peer:alpha": {"turns_per_hour": 1}}}),
        },
        groups={"ops": {"channel": "cli", "agents": ["alpha", "beta"]}},
    )
    daemon = daemons(doc, faults=False).start()
    assert chat(daemon, "alpha", "ask beta: hello")["reply"].startswith("beta says:")
    again = chat(daemon, "alpha", "ask beta: hello")
    assert [(c["name"], c["error_code"]) for c in again["tool_calls"]] == [
        ("send_message_to_peer", "budget_exceeded")
    ]
    origins = {(g["agent"], g["origin"]): g["turns"] for g in usage(daemon)["groups"]}
    assert origins == {("alpha", "operator"): 2, ("beta", "peer:alpha"): 1}


def test_a_peers_refusal_reaches_an_outside_sender_in_its_terms_through_the_asking_agent(
    root: Path, daemons: DaemonFactory
) -> None:
    """The asking agent's model repeats a tool's refusal in its reply (the offline one does,
    word for word): asked on an outside sender's behalf, the peer's refusal names only the
    peer's limit, never the peer's scopes or the amounts the operator spends."""
    port = free_port()
    doc = webhook_config(root, {"ops": port})
    doc["agents"]["beta"]["budget"] = {"origins": {"peer:alpha": {"turns_per_hour": 1}}}
    doc["peer_groups"]["team"] = {"channel": "cli", "agents": ["alpha", "beta"]}
    doc["peer_groups"]["hooks-ops"]["tools"] = ["send_message_to_peer"]
    daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=SECRET)
    wait_serving(daemon, "webhook.ops")
    assert chat(daemon, "alpha", "ask beta: hello")["reply"].startswith("beta says:")
    answer = post(port, "ops", {"sender": "ci-bot", "text": "ask beta: hello"})
    assert answer.status_code == 200, answer.text
    reply = answer.json()["reply"]
    told = "budget_exceeded (the peer's turns_per_hour budget is spent; try again later)"
    assert told in reply, reply
    assert not any(secret in reply for secret in ("peer:alpha", "agent beta", "1 of 1")), reply
    # The operator's own chain is told it all, and so is the event.
    again = chat(daemon, "alpha", "ask beta: hello")["reply"]
    assert "turns_per_hour of peer:alpha on agent beta spent (1 of 1)" in again, again
    refused = [e["detail"] for e in events(daemon, "budget.exceeded")]
    assert len(refused) == 2 and all("peer:alpha on agent beta" in d for d in refused), refused


def test_a_fallback_chain_answers_from_the_next_and_status_shows_the_open_breaker(
    root: Path, daemons: DaemonFactory
) -> None:
    with model_server("status", "500") as url:
        doc = make_config(
            root,
            {"alpha": agent_entry(model_provider=["openai.down", "offline.default"])},
        )
        doc["providers"]["openai"] = {
            "down": {"base_url": url, "model": "m", "max_retries": 0, "breaker_failures": 1}
        }
        daemon = daemons(doc, faults=False).start()
        done = chat(daemon, "alpha", "hello")
        [step] = done["usage"]
        assert (step["provider"], step["failed"]) == ("offline.default", ["openai.down"])
        status = daemon.wait_for(
            lambda s: any(p["state"] == "open" for p in s.get("providers", []))
        )
        down, offline = status["providers"]
        assert (down["provider"], down["state"], down["failures"]) == ("openai.down", "open", 1)
        assert "HTTP 500" in down["last_error"]
        assert (offline["provider"], offline["state"]) == ("offline.default", "closed")
        text = daemon.cli("status").stdout
        assert "provider  alpha openai.down: open after 1 failure" in text
        [opened] = event_kinds(daemon, "provider")
        assert (opened["provider"], opened["state"]) == ("openai.down", "open")
        by_provider = usage(daemon, "--by", "provider")["groups"]
        assert {g["provider"] for g in by_provider} == {"", "offline.default"}
        metrics = daemon.cli("metrics").stdout
        assert 'zeroclaw_provider_failovers_total{agent="alpha",provider="openai.down"} 1.0' in (
            metrics
        )


def test_without_a_daemon_usage_reads_the_ledger(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(priced(root, {"alpha": agent_entry()}), faults=False).start()
    chat(daemon, "alpha", "hello")
    daemon.stop()
    result = daemon.cli("usage", "--json", "--since", "1d")
    assert result.returncode == 0, result.stderr
    assert "read the usage ledger" in result.stderr
    [group] = json.loads(result.stdout)["groups"]
    assert (group["agent"], group["turns"], group["steps"]) == ("alpha", 1, 1)
    bad = daemon.cli("usage", "--since", "last tuesday")
    assert bad.returncode == 2 and "--since" in bad.stderr


def test_a_sub_agents_steps_are_its_own_account_from_the_dispatch_origin(
    root: Path, daemons: DaemonFactory
) -> None:
    write_bundle(root / "subagents", "summarizer")
    daemon = start_subagents(daemons, root)
    record = invocation(daemon, "summarizer", "The sky was grey. Then it rained.")
    assert record["state"] == "succeeded", (record, daemon.log())
    groups = {(g["agent"], g["origin"]): g for g in usage(daemon)["groups"]}
    spent = groups[("sub:summarizer", "subagent:cli")]
    assert spent["turns"] == 1 and spent["steps"] >= 1 and spent["input_tokens"] > 0
    metrics = daemon.cli("metrics").stdout
    assert (
        'zeroclaw_tokens_total{agent="sub:summarizer",kind="input",provider="offline.default"}'
        in (metrics)
    )


def test_attack_a_senders_session_compactions_are_charged_to_the_sender(
    root: Path, daemons: DaemonFactory
) -> None:
    # Attack pass: each compaction's summary step comes after its turn closed, and was
    # charged to the agent as origin `unknown`: a sender whose session kept compacting
    # made the agent spend beyond the sender's own budget, and the ledger did not say who.
    port = free_port()
    doc = webhook_config(root, {"ops": port})
    doc["agents"]["alpha"]["memory"] = {"history_budget_tokens": 64}
    daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=SECRET)
    wait_serving(daemon, "webhook.ops")
    for n in range(8):
        text = f"message {n}: " + "words to make the session long " * 4
        answer = post(port, "ops", {"sender": "mallory", "text": text, "session": "s"})
        assert answer.status_code == 200, answer.text
    key = "webhook.ops:mallory/s"
    shown = daemon.cli("sessions", "show", key, "--agent", "alpha", "--json")
    assert '"summary"' in shown.stdout, shown.stdout + shown.stderr  # it did compact
    groups = {g["origin"]: g for g in usage(daemon)["groups"]}
    assert set(groups) == {"webhook.ops:mallory"}, groups
    mallory = groups["webhook.ops:mallory"]
    assert mallory["turns"] == 8 and mallory["steps"] > 8  # its turns' steps and summaries


def test_attack_a_flood_of_concurrent_turns_is_not_all_admitted_before_any_spend(
    root: Path, daemons: DaemonFactory
) -> None:
    # Attack pass: admission compared the day's spend, which a turn adds only when its
    # first step is reported; six messages posted at once (a slow model holding the
    # first) were all admitted against a channel budget the first alone spent, so a
    # flood spent as many times the budget as it had turns in flight. Now each turn in
    # flight counts the least it will spend (its message) until its first step is in.
    gate, seen = root / "model-may-answer", root / "model-asked"
    flood = 6
    with model_server("gated", str(gate), str(seen)) as url:
        port = free_port()
        doc = webhook_config(root, {"ops": port})
        doc["providers"]["openai"] = {
            "fake": {"base_url": url, "model": "m", "api_key_env": "FAKE_OPENAI_KEY"}
        }
        doc["agents"]["alpha"]["model_provider"] = "openai.fake"
        # a message of 400 characters is about 100 tokens: the first turn spends the day
        doc["agents"]["alpha"]["budget"] = {"origins": {"webhook.ops": {"tokens_per_day": 50}}}
        daemon = daemons(doc, faults=False)
        daemon.start(HOOK_SECRET=SECRET, FAKE_OPENAI_KEY=OPENAI_KEY)
        wait_serving(daemon, "webhook.ops")
        answers: list[int] = []

        def send(n: int) -> None:
            body = {"sender": f"sender-{n}", "text": f"message {n} " + "x" * 400}
            answers.append(post(port, "ops", body).status_code)

        threads = [threading.Thread(target=send, args=(n,), daemon=True) for n in range(flood)]
        for thread in threads:
            thread.start()

        def asked() -> int:
            return len(seen.read_text().splitlines()) if seen.exists() else 0

        deadline = time.monotonic() + PATIENCE
        while asked() + len(answers) < flood:  # each turn reached the model, or was refused
            assert time.monotonic() < deadline, (asked(), answers, daemon.log())
            time.sleep(0.05)
        gate.touch()
        for thread in threads:
            thread.join(PATIENCE)
        assert sorted(answers) == [200] + [429] * (flood - 1), answers
        turns = sum(g["turns"] for g in usage(daemon)["groups"])
        assert turns == 1
