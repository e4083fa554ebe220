"""Log lines: the priority prefix journald reads, the text format on a TTY, and when each
applies (issue 14, ADR 0031)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from tests.known_secrets import TEST_SECRETS, assert_no_secret_logged, secrets_in
from zeroclaw._logging import (
    JournalFormatter,
    JsonFormatter,
    TextFormatter,
    resolve_format,
    stream_is_journal,
    syslog_priority,
)


def record(level: int, msg: str = "hello %s", **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("zeroclaw.test", level, __file__, 1, msg, ("world",), None)
    rec.__dict__.update(extra)
    return rec


@pytest.mark.parametrize(
    ("level", "prefix"),
    [
        (logging.CRITICAL, "<2>"),
        (logging.ERROR, "<3>"),
        (logging.WARNING, "<4>"),
        (logging.INFO, "<6>"),
        (logging.DEBUG, "<7>"),
    ],
)
def test_a_journal_line_starts_with_the_priority_of_its_level(level: int, prefix: str) -> None:
    line = JournalFormatter().format(record(level, alias="alpha"))
    assert line.startswith(prefix)
    entry = json.loads(line[len(prefix) :])  # what journald stores: the bare JSON line
    assert entry["msg"] == "hello world" and entry["alias"] == "alpha"
    assert entry["level"] == logging.getLevelName(level).lower()


def test_levels_between_the_named_ones_take_the_priority_below() -> None:
    assert syslog_priority(logging.INFO + 5) == 6
    assert syslog_priority(logging.ERROR + 1) == 3
    assert syslog_priority(5) == 7  # below debug
    assert syslog_priority(logging.CRITICAL + 10) == 2


def test_a_journal_line_with_a_traceback_is_still_one_line() -> None:
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        rec = record(logging.ERROR)
        rec.exc_info = sys.exc_info()
    line = JournalFormatter().format(rec)
    assert "\n" not in line and line.startswith("<3>")
    assert "ValueError" in json.loads(line[3:])["exc"]


def test_plain_json_has_no_prefix() -> None:
    line = JsonFormatter().format(record(logging.ERROR))
    assert json.loads(line)["level"] == "error"


def test_text_on_a_tty_is_unchanged() -> None:
    rec = record(logging.WARNING, alias="alpha", pid=7)
    stamp = time.strftime("%H:%M:%S", time.localtime(rec.created))
    expected = f"{stamp} WARNING zeroclaw.test: hello world  [alias=alpha pid=7]"
    assert TextFormatter().format(rec) == expected


# --- which format, for which stderr -----------------------------------------------------------


@pytest.fixture
def tty() -> Iterator[TextIO]:
    parent, child = os.openpty()
    stream = os.fdopen(child, "w")
    yield stream
    stream.close()
    os.close(parent)


@pytest.fixture
def plain_file(tmp_path: Path) -> Iterator[TextIO]:
    with (tmp_path / "stderr").open("w") as stream:
        yield stream


def journal_stream(stream: TextIO) -> dict[str, str]:
    info = os.fstat(stream.fileno())
    return {"JOURNAL_STREAM": f"{info.st_dev}:{info.st_ino}"}


def test_auto_is_text_on_a_tty(tty: TextIO) -> None:
    assert resolve_format("auto", tty, {}) == "text"
    assert resolve_format("auto", tty, journal_stream(tty)) == "text"


def test_auto_and_json_are_plain_json_off_the_journal(plain_file: TextIO) -> None:
    assert resolve_format("auto", plain_file, {}) == "json"
    assert resolve_format("json", plain_file, {}) == "json"


def test_stderr_that_is_the_journal_gets_the_prefix(plain_file: TextIO) -> None:
    env = journal_stream(plain_file)
    assert stream_is_journal(plain_file, env)
    assert resolve_format("auto", plain_file, env) == "journal"
    assert resolve_format("json", plain_file, env) == "journal"
    assert resolve_format("text", plain_file, env) == "text"  # asked for: kept


def test_a_journal_stream_of_another_file_is_not_ours(plain_file: TextIO, tmp_path: Path) -> None:
    with (tmp_path / "other").open("w") as other:
        env = journal_stream(other)  # e.g. stderr redirected away from the journal
    assert not stream_is_journal(plain_file, env)
    assert resolve_format("auto", plain_file, env) == "json"
    for junk in ("", "garbage", "1:", ":2", "a:b"):
        assert not stream_is_journal(plain_file, {"JOURNAL_STREAM": junk})


def test_an_agent_keeps_the_format_the_daemon_resolved(plain_file: TextIO) -> None:
    # The agent shares the daemon's stderr but not its environment: "journal" stands.
    assert resolve_format("journal", plain_file, {}) == "journal"


# --- the secrets check of the end-to-end suite ------------------------------------------------


def test_the_secrets_check_catches_a_secret_in_a_log(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    log.write_text('{"msg": "fine"}\n{"msg": "key is ' + TEST_SECRETS[0] + '"}\n')
    assert secrets_in(log.read_text()) == [TEST_SECRETS[0]]
    with pytest.raises(AssertionError, match="holds test secrets"):
        assert_no_secret_logged(log)


def test_the_secrets_check_passes_a_clean_or_missing_log(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    assert_no_secret_logged(log)  # never written
    log.write_text('{"msg": "nothing to see"}\n')
    assert_no_secret_logged(log)
