"""What the daemon runs now: the config and the agents' specs made from it (ADR 0050).

One value the composition root builds and hands to whoever reads the running config (the
fleet, the reloader, the status, the channels' and discovery's keepers); only a reload
replaces what it holds. The inputs that never change while the daemon runs (the config's
path, the environment, the daemon's code, `--log-level`, the daemon's pids) are fixed here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import msgspec

from .._logging import resolve_format
from ..agent import AgentSpec
from ..config import Config, DaemonPaths, RestartPolicy, daemon_paths
from ..skills import SkillCatalogue
from ..subagents import LoadedRevision, SubagentRegistry
from ._spec import build_specs, subagent_runtime_spec


class Running:
    def __init__(
        self,
        config: Config,
        config_path: Path,
        env: Mapping[str, str],
        subagents: SubagentRegistry,
        *,
        zygote_pid: int,
        log_level: str | None = None,
        code_paths: tuple[str, ...] = (),
        skills: SkillCatalogue | None = None,
    ) -> None:
        self.config = config
        # The agents' skills as loaded from `config` (ADR 0056); a reload loads them anew.
        self.skills = skills or SkillCatalogue()
        self.config_path = config_path
        self.env = env
        # The state and runtime dirs: a reload that would move them is refused.
        self.paths: DaemonPaths = daemon_paths(config, env)
        self.specs: dict[str, AgentSpec] = {}  # made at the fleet's start, then by reloads
        self._subagents = subagents
        self._daemon_pids = (os.getpid(), zygote_pid)
        # `zeroclaw --log-level`: every agent's level, whatever the config says (None: its).
        self._log_level = log_level
        # The daemon's own code (ADR 0044), gathered once at its start: read-only to agents.
        self.code_paths = code_paths

    def replace(
        self, config: Config, specs: dict[str, AgentSpec], skills: SkillCatalogue | None = None
    ) -> None:
        self.config = config
        self.specs = specs
        if skills is not None:
            self.skills = skills

    async def scan(self, config: Config, skills: SkillCatalogue) -> dict[str, AgentSpec]:
        """The sub-agent bundles scanned again (which agents may dispatch depends on them),
        then the specs of `config`'s agents with `skills` (loaded from `config`)."""
        await self._subagents.rescan(config, self.config_path)
        return self.specs_of(config, skills)

    def specs_of(self, config: Config, skills: SkillCatalogue) -> dict[str, AgentSpec]:
        specs = build_specs(
            config,
            self.env,
            self.config_path.parent,
            config_path=self.config_path,
            daemon_pids=self._daemon_pids,
            # Agents some loaded sub-agent allows get agent_catalog/agent_dispatch.
            dispatch_callers=self._subagents.callers(),
            code_paths=self.code_paths,
            skills=skills,
        )
        return {alias: self._logging_of(spec) for alias, spec in specs.items()}

    def runtime_spec(self, revision: LoadedRevision) -> AgentSpec:
        return self._logging_of(
            subagent_runtime_spec(
                self.config,
                self.env,
                revision,
                config_path=self.config_path,
                daemon_pids=self._daemon_pids,
                code_paths=self.code_paths,
            )
        )

    def policy(self, alias: str) -> RestartPolicy:
        profile = self.config.agents[alias].runtime_profile
        assert profile is not None
        return self.config.runtime_profiles[profile].restart

    def _logging_of(self, spec: AgentSpec) -> AgentSpec:
        """The spec with the daemon's effective logging: the format resolved on the stderr
        the agent shares with us (it cannot see JOURNAL_STREAM, we can), and the level
        `--log-level` asked for, if any."""
        return msgspec.structs.replace(
            spec,
            log_format=resolve_format(spec.log_format, sys.stderr, self.env),
            log_level=self._log_level or spec.log_level,
        )
