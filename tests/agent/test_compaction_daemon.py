"""A session's compaction through a real daemon (ADR 0059), with a loopback model that holds
the summary request as long as the test needs: kill -9 of the daemon while the summary is
asked loses no turn and stores nothing; after the restart the next turns compact the
session once, facts and summary together."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
from pathlib import Path

from tests.agent.test_chat_daemon import DaemonFactory, chat
from tests.conftest import PATIENCE
from tests.known_secrets import OPENAI_KEY
from tests.subagents.helpers import model_server
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.memory import MemoryStore, Scope

TURNS_AT_MOST = 20  # a 64-token history is due for a compaction well before
CHAT = ("--agent", "alpha", "chat", "-m")


def held(state_dir: Path) -> tuple[list[int], object, list[tuple[str, str]]]:
    """alpha's session "s" as stored: its turns' numbers, its summary, its facts."""
    store = MemoryStore(state_dir / "memory")
    try:
        window, _ = store.context(Scope("alpha"), "s", history_tokens=10**6)
        facts = [
            (r.key, r.content) for r in store.export(Scope("alpha")) if r.category == "compacted"
        ]
        return [seq for seq, _ in window.turns], window.digest, sorted(facts)
    finally:
        store.close()


def test_kill_9_while_the_summary_is_asked_loses_nothing_and_the_next_turn_compacts_once(
    root: Path, daemons: DaemonFactory
) -> None:
    mark, gate = root / "summary-asked", root / "summary-may-answer"
    with model_server("summary-gated", str(mark), str(gate)) as url:
        doc = make_config(root, {"alpha": agent_entry()})
        doc["providers"]["openai"] = {
            "fake": {"base_url": url, "model": "m", "api_key_env": "FAKE_OPENAI_KEY"}
        }
        doc["agents"]["alpha"]["model_provider"] = "openai.fake"
        doc["agents"]["alpha"]["memory"] = {"history_budget_tokens": 64}
        state_dir = Path(doc["daemon"]["state_dir"])
        daemon = daemons(doc, faults=False).start(FAKE_OPENAI_KEY=OPENAI_KEY)
        turns = 0
        while True:
            assert turns < TURNS_AT_MOST, daemon.log()
            asking = daemon.cli_popen(
                *CHAT,
                f"message {turns}",
                "--json",
                "--session",
                "s",
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            # A turn's answer is out before its compaction asks for the summary, and the
            # session's next turn waits for that compaction (ADR 0038): a chat started
            # before the summary was asked never ends. So the summary is watched for while
            # each chat runs, not only between them (a file: nothing to await).
            while asking.poll() is None and not mark.exists():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    asking.wait(timeout=0.05)
            if mark.exists():
                break
            out, err = asking.communicate(timeout=PATIENCE)
            assert asking.returncode == 0, err + daemon.log()
            assert json.loads(out)["reply"] == "fake answer"
            turns += 1
        daemon.signal(signal.SIGKILL)  # the summary request is open, nothing compacted yet
        daemon.wait_exit()
        out, _ = asking.communicate(timeout=PATIENCE)
        if asking.returncode == 0:  # its answer was out before its own compaction asked
            assert json.loads(out)["reply"] == "fake answer"
            turns += 1
        seqs, digest, facts = held(state_dir)
        assert seqs == list(range(2 * turns)) and digest is None and facts == []

        gate.touch()
        daemon.start(FAKE_OPENAI_KEY=OPENAI_KEY)
        # The first turn compacts after its answer; the second waits for that compaction.
        for text in ("again", "and again"):
            assert chat(daemon, "alpha", text, session="s")["reply"] == "fake answer"
        shown = daemon.cli("sessions", "show", "s", "--agent", "alpha", "--json", timeout=PATIENCE)
        assert '"summary": "what was said"' in shown.stdout, shown.stdout
        daemon.stop()
    seqs, digest, facts = held(state_dir)
    assert digest is not None and digest.first_seq == 0  # type: ignore[attr-defined]
    through = digest.through_seq  # type: ignore[attr-defined]
    # Every turn is either held or summarised, never both, never neither.
    assert seqs == list(range(through + 1, 2 * turns + 4))
    # One fact per compaction, each under its own range's key: none twice.
    assert facts and all(content == "the one fact" for _, content in facts)
    ranges = [int(key.split("/")[2]) for key, _ in facts]
    assert len(set(ranges)) == len(ranges) and max(ranges) == through
