"""A project with one secret of every kind planted where discovery finds it, and a hostile
`gemini` on PATH: shared by the probe tests and the conformance driver (ADR 0047)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import get_args

from tests.discovery.helpers import SYSTEM_PYTHON, Project
from zeroclaw.discovery import SecretKind

# One marker per kind (distinct, so a leak names its kind); key-shaped ones have the shape.
SECRETS: dict[SecretKind, tuple[str, ...]] = {
    "option_value": ("SECRETopt1joined", "SECRETopt2spaced", "SECRETopt3short"),
    "key_shaped": ("sk-SECRETkey4abcdefgh", "ghp_SECRETkey5abcdefgh"),
    "auth_header": ("SECRETauth6bearer",),
    "url_userinfo": ("SECRETurl7userinfo",),
    "url_parameter": ("SECRETurl8apikey", "SECRETurl9token"),
    "env_value": ("SECRETenv10value",),
    "probe_output": ("SECRETprobe11line", "sk-SECRETprobe12abcdefgh"),
}
assert set(SECRETS) == set(get_args(SecretKind)), "a new secret kind needs a planted secret"
ALL_SECRETS = tuple(s for values in SECRETS.values() for s in values)

# The fake probe: tries to write outside, to read a shadow-like file and /etc/shadow, starts
# a grandchild in a session of its own that would sleep for minutes, then prints a version
# line with secrets. Its version token says what it managed: forked.wrote.read.read_etc.
GEMINI = """
import os, sys, time
def attempt(action):
    try:
        action()
        return 1
    except OSError:
        return 0
wrote = attempt(lambda: open({outside!r}, "w").write("escaped"))
read = attempt(lambda: open({shadow!r}).read())
read_etc = attempt(lambda: open("/etc/shadow").read())
ready_r, ready_w = os.pipe()
first = os.fork()
if first == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(ready_w, b"up")
        time.sleep(600)
    os._exit(0)
os.waitpid(first, 0)
forked = 1 if os.read(ready_r, 2) == b"up" else 0
print(f"\\x1b]52;c;aGk=\\x07gemini {{forked}}.{{wrote}}.{{read}}.{{read_etc}} "
      "api_key={probe1} {probe2}")
"""


class Planted:
    """Paths of the hostile program's targets, the program, and the project."""

    def __init__(self, project: Project) -> None:
        self.project = project
        base = project.base
        self.outside = base / "outside" / "escaped.txt"
        self.shadow = base / "secret" / "shadow"
        (base / "outside").mkdir(exist_ok=True)
        self.shadow.parent.mkdir(exist_ok=True)
        self.shadow.write_text("root:SHADOW-HASH:19000::::::\n")
        probe1, probe2 = SECRETS["probe_output"]
        self.gemini = project.python_program(
            "gemini",
            GEMINI.format(
                outside=str(self.outside), shadow=str(self.shadow), probe1=probe1, probe2=probe2
            ),
        )
        self._manifests()

    def _manifests(self) -> None:
        opt1, opt2, opt3 = SECRETS["option_value"]
        key1, key2 = SECRETS["key_shaped"]
        (auth,) = SECRETS["auth_header"]
        (userinfo,) = SECRETS["url_userinfo"]
        param1, param2 = SECRETS["url_parameter"]
        (env_value,) = SECRETS["env_value"]
        args = [
            "serve",
            f"--api-key={opt1}",
            "--token",
            opt2,
            "-p",
            opt3,
            key1,
            key2,
            "--header",
            f"Authorization: Bearer {auth}",
        ]
        self.project.file(
            "adapters/leaky.yaml",
            "id: leaky\ntransport: cli\ncommand: gemini\ncapabilities: [code.review]\n"
            f"args: {json.dumps(args)}\n",
        )
        servers = {
            "remote": {
                "url": f"https://user:{userinfo}@mcp.example.test/sse?api_key={param1}"
                f"&model=m&token={param2}",
                "env": {"SERVICE_TOKEN": env_value},
            },
            "local": {"command": "gemini", "args": [f"--api-key={opt1}", key1]},
        }
        self.project.file("mcp/claude.json", json.dumps({"mcpServers": servers}))

    def leftovers(self) -> list[int]:
        """Processes still running the hostile program (its setsid'd grandchild)."""
        found = []
        needle = str(self.gemini).encode()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if needle in cmdline.split(b"\0"):
                found.append(int(name))
        return found


def leaked(text: str, kind: SecretKind | None = None) -> list[str]:
    """The planted secrets (of `kind`, or all) that `text` holds."""
    values = SECRETS[kind] if kind is not None else ALL_SECRETS
    return [s for s in values if s in text]


__all__ = ["ALL_SECRETS", "SECRETS", "SYSTEM_PYTHON", "Planted", "leaked"]
