"""Where episodes run: one unit of work behind three executors.

The unit is ``run_episode(task, spec) -> Trajectory`` (``episode.py``): one episode of a
task under a ``RunSpec`` — plain, serialisable specs of the env, the policy, the protocol
and the limits (``specs.py``), never live objects (a model client holding a lock, a
sandbox pool), so a spec crosses a process or machine boundary and each executor builds
its own live objects from it:

- ``local.py``: ``Runner``, worker threads on this machine (``icplay run -j N``);
- ``ray.py``: ``RayRunner``, actors spread over a Ray cluster (``icplay run --ray``);
- ``aio.py``: ``run_episodes``, many episodes from one asyncio event loop.

All three save each trajectory through the same store, so a run resumes the same way.
"""

from icplay.executors.episode import FatalEpisodeError, run_episode
from icplay.executors.specs import EnvSpec, PolicySpec, RunSpec

__all__ = ["EnvSpec", "FatalEpisodeError", "PolicySpec", "RunSpec", "run_episode"]
