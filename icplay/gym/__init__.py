"""gymnasium environments for icplay (``pip install icplay[gym]``).

Importing this module registers ``icplay/<Title>-v0`` for every language (``icplay/Bash-v0``,
``icplay/SQL-v0``, ``icplay/Python-v0``, and those of installed plug-ins)::

    import gymnasium as gym
    import icplay.gym  # noqa: F401   (or gym.make("icplay.gym:icplay/SQL-v0"))

    env = gym.make("icplay/SQL-v0", sandbox="sqlite")
    query, info = env.reset(seed=0, options={"task": "bookshop-01"})
    observation, reward, terminated, truncated, info = env.step("SELECT 1")
"""

from __future__ import annotations

try:
    import gymnasium
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("icplay.gym needs gymnasium: pip install 'icplay[gym]'") from exc

from icplay.gym.env import AnyText, IcplayEnv
from icplay.languages import all_specs

ENV_IDS = {f"icplay/{spec.title}-v0": spec.name for spec in all_specs()}


def register_envs() -> None:
    """Register icplay's envs with gymnasium (idempotent)."""
    for env_id, env_name in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="icplay.gym.env:IcplayEnv", kwargs={"env_name": env_name},
                               disable_env_checker=True)


register_envs()

__all__ = ["IcplayEnv", "AnyText", "register_envs", "ENV_IDS"]
