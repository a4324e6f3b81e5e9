"""The per-user limits a worker keeps (workflows/owner_limits.py), from its
environment; both off unless set:

    DEEPRESEARCH_USER_MAX_RUNS       runs of one owner going at once
    DEEPRESEARCH_USER_DAILY_TOKENS   prompt + completion tokens of one owner's
                                     runs started in one day (UTC)

Every worker of a deployment should have the same values: the one that runs
a run's check decides for it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from infra.errors import ConfigError

MAX_RUNS_ENV = "DEEPRESEARCH_USER_MAX_RUNS"
DAILY_TOKENS_ENV = "DEEPRESEARCH_USER_DAILY_TOKENS"


@dataclass(frozen=True)
class UserLimits:
    max_runs: int | None = None
    daily_tokens: int | None = None

    @property
    def any(self) -> bool:
        return bool(self.max_runs or self.daily_tokens)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> UserLimits:
        env = os.environ if env is None else env
        return cls(_positive(env, MAX_RUNS_ENV), _positive(env, DAILY_TOKENS_ENV))


def _positive(env: Mapping[str, str], name: str) -> int | None:
    raw = (env.get(name) or "").strip().replace("_", "")
    if not raw or raw in ("0", "off"):
        return None
    if not raw.isdigit():
        raise ConfigError(f"{name}={env.get(name)!r}: give a whole number (0 or unset: no limit)")
    return int(raw)
