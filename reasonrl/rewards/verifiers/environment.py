"""Verifier `environment`: the reward a TRL environment gives its rollout (`rollout.tools.environment`: its
`get_reward()` once the rollout ends, read in the rollout's own instance by `rollout.environments`), or an
OpenRLHF agent its episode (`rollout.agent`: its steps' rewards summed, `rollout.agents`), or verl's tools
their calls (`rollout.tools.verl_config`: their step rewards summed, `rollout.verl_tools`). As a
reward term (`reward.weights: {correctness: 1, environment: 1}`, TRL's weight-1 reward from the environment)
or as the routed verifier of rows the environment alone scores (`reasonrl data prepare trl --option
answer=environment`), when its reward is also the sample's correctness (clipped to [0, 1]).

The runner takes each completion's reward as given (`RewardRunner.score(given=...)`): this function is only
called for a completion that was no episode (a run with no `rollout.tools.environment`, `verl_config` or
`rollout.agent`),
which is a verifier error scoring 0, never a reward. A rollout whose environment has no `get_reward` scores 0,
reason `no_environment_reward` (TRL leaves it out); one whose `get_reward` failed, reason `error: ...`.
Owns: that refusal. Does not own: the environments (`rollout.environments`).
"""

from __future__ import annotations

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.types import Problem


@VERIFIERS.register("environment")
def environment(response: str, problem: Problem) -> RewardResult:  # noqa: ARG001
    return RewardResult(0.0, {"reason": "error: the completion was no environment's rollout (the environment "
                                        "verifier needs rollout.tools.environment, rollout.tools.verl_config or rollout.agent)"})  # fmt: skip


environment.run_mode = "inline"  # type: ignore[attr-defined]
