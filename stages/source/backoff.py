"""Exponential backoff with jitter, for reconnecting to cameras."""

from __future__ import annotations

import random

from pydantic import Field

from vapipe.pipeline.stage import StageConfig


class ReconnectConfig(StageConfig):
    """The ``[nodes.NAME.reconnect]`` table of a live source."""

    initial_s: float = Field(0.5, gt=0)
    """Wait before the first retry."""
    max_s: float = Field(30.0, gt=0)
    """The wait doubles up to this."""
    max_attempts: int = Field(0, ge=0)
    """Failed attempts in a row before the run fails; 0 = keep trying forever."""
    jitter: float = Field(0.25, ge=0, le=1)
    """Each wait is randomly shortened or lengthened by up to this fraction, so that many
    cameras that dropped together do not reconnect in lockstep."""


class Backoff:
    def __init__(self, config: ReconnectConfig, rng: random.Random | None = None) -> None:
        self.config = config
        self.attempt = 0
        self._rng = rng or random.Random()

    def failed(self) -> None:
        """One more attempt failed."""
        self.attempt += 1

    def next_wait(self) -> float:
        """The wait before the next attempt: doubling from ``initial_s``, jittered, and never
        above ``max_s``."""
        cfg = self.config
        base = min(cfg.max_s, cfg.initial_s * 2 ** max(self.attempt - 1, 0))
        return min(cfg.max_s, max(0.0, base * (1 + self._rng.uniform(-cfg.jitter, cfg.jitter))))

    def exhausted(self) -> bool:
        """``max_attempts`` attempts have failed in a row."""
        return bool(self.config.max_attempts) and self.attempt >= self.config.max_attempts

    def reset(self) -> None:
        self.attempt = 0
