"""Environments: InterCode's reset / step / submit, one module per language.

Envs are built through their language's spec (``icplay.languages``: ``make_env``,
``EnvFactory``), the one place that knows which languages exist.
"""

from __future__ import annotations

from icplay.envs.base import (HAS_CWD, HAS_SCHEMA, STREAMS_OUTPUT, Env, StepResult, SubmitResult,
                              capabilities_of, parse_submit)

__all__ = ["Env", "StepResult", "SubmitResult", "parse_submit", "capabilities_of", "STREAMS_OUTPUT", "HAS_CWD",
           "HAS_SCHEMA"]
