"""TRL environments, as they are (`rollout.tools.environment`; TRL's `GRPOTrainer(environment_factory=...)`):
a class (or a function returning an instance) whose public methods are the model's tools, with state kept
across the calls of one rollout, a `reset(**row)` that starts a rollout (what it returns, a text or None,
is appended to the row's last user message) and, optionally, a `get_reward()` read once the rollout ends:
the `environment` reward term (`reward.weights: {environment: 1}`, or rows routed to the `environment`
verifier), as TRL adds it as a reward function of weight 1.

`rollout.tools.environment` is one spec (`my_envs.WordleEnv`, imported with the working directory on
`sys.path`, or `path/to/envs.py:WordleEnv`), which every row uses, or `{name: spec}`, each row picking its
environment by its `environment` column (TRL's dict form); only that environment's methods are in its
prompt's tool list (their schemas from their type hints and docstrings, transformers' `get_json_schema`,
as TRL renders them).

One instance per rollout: a group's n rollouts each get their own, reset with the row's columns (`prompt`,
the row's `extra_info` keys, `data_source`, `ground_truth`, and the ground truth as `solution`, as the
`trl_function` verifier hands them). Instances are reused across steps (reset again, TRL's "construct
once, reset often"). reasonrl's groups share one prompt, so the n resets of a row must return the same
text (a reset that draws its task at random makes GRPO's group comparison meaningless; seed it from the
row); a row whose resets differ, or whose reset raises, is an error naming the row.

Where they run: a pool of `rollout.tools.workers` processes (`rollout.instance_pool`), each holding the instances of the rollouts
given to it (a rollout's calls all go to its process, in order); every reset, call and `get_reward` runs
under `rollout.tools.timeout_s`. The classes are the user's code, trusted like a reward function (not in
the sandbox); their arguments are the model's, so a call that raises, hangs or kills its process costs
that call (and, for a process killed, the state of the rollouts it held: their later calls and their
rewards are errors), never the run. What the model sees of a call is TRL's: `str(result)`, or
`{'error': ...}`.

Owns: loading the environments and describing their tools (`describe`), the checks of the setting
(`check_environments`) and of the rows (`check_rows`, when the data loads), what a worker process does with
a request (`_handle`), and the episode of a batch (`generate_episodes`: reset, prompts, the rollouts through
the tool loop, rewards, and the TRL reward functions taking `environments=`, called beside each rollout's
instance before it is freed; `scored_problem` hands their values to the verifier). Does not own: the
processes (`rollout.instance_pool`), the multi-turn loop and the call format (`rollout.tools`), scoring
(`rewards.runner`, which takes the rewards as given results).
"""

from __future__ import annotations

import inspect
import math
import numbers
from dataclasses import replace
from functools import lru_cache

from reasonrl.rollout.function_tools import with_schemas
from reasonrl.rollout.instance_pool import (  # noqa: F401 - LOST: a lost rollout's answer
    LOST,
    InstancePool,
    maybe_awaited,
    run_in_loop,
    shared_reset,
)
from reasonrl.user_code import load_callable

RESERVED = ("reset", "get_reward")
COLUMN = "environment"  # the row's column that picks its environment (the dict form)


def specs(setting) -> dict[str, str]:
    """{name: spec} of `rollout.tools.environment`: one spec is the environment "" every row uses."""
    if isinstance(setting, str):
        return {"": setting}
    if hasattr(setting, "items") and setting and all(isinstance(v, str) for v in setting.values()):
        return {str(k): str(v) for k, v in setting.items()}
    raise ValueError(f"must be a class's import path or path.py:Class, or {{name: that}}; got {setting!r}")


def methods(instance) -> dict:
    """{name: bound method} of an instance's tools: its class's public functions but reset and get_reward."""
    return {name: getattr(instance, name)
            for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
            if name not in RESERVED and not name.startswith("_")}  # fmt: skip


@lru_cache(maxsize=8)
def _described(items: tuple[tuple[str, str], ...]) -> dict[str, dict]:
    from transformers.utils import get_json_schema

    out = {}
    for name, spec in items:
        where = f"environment {spec!r}"
        factory = load_callable(spec)
        try:
            instance = factory()
        except Exception as e:  # the user's constructor: its own error, named
            raise ValueError(f"{where}: making an instance failed ({type(e).__name__}: {e})") from None
        if not callable(getattr(instance, "reset", None)):
            raise ValueError(f"{where} has no reset method (TRL's environments define reset)")
        tools = methods(instance)
        if not tools:
            raise ValueError(f"{where} has no public method to call as a tool")
        schemas = []
        for method, fn in tools.items():
            try:
                schemas.append(get_json_schema(fn))
            except Exception as e:  # a parameter without a type hint or an Args: line
                raise ValueError(f"{where}: method {method!r} has no schema from its type hints and docstring "
                                 f"({e})") from None  # fmt: skip
        out[name] = {"spec": spec, "tools": list(tools), "schemas": schemas,
                     "reward": callable(getattr(instance, "get_reward", None))}  # fmt: skip
    return out


def describe(setting) -> dict[str, dict]:
    """{name: {spec, tools, schemas, reward}} of each environment, from one probe instance each (as TRL
    probes them); ValueError naming the environment and what is wrong."""
    return _described(tuple(specs(setting).items()))


def check_environments(cfg) -> None:
    """ConfigError naming what cannot work with `rollout.tools.environment` (or verl's tools,
    `rollout.tools.verl_config`, run the same way)."""
    from reasonrl.algorithms import ADVANTAGES
    from reasonrl.config import ConfigError
    from reasonrl.rollout.tool_formats import TOOL_ALIASES, TOOLS

    tools = cfg.rollout.tools
    try:
        check_environment_functions(cfg.reward.options, tools.environment if tools.enabled else None)
    except ValueError as e:
        raise ConfigError(f"reward.options.{e}") from None
    key = "environment" if tools.environment is not None else "verl_config"
    if not tools.enabled or getattr(tools, key) is None:
        return
    try:
        if key == "environment":
            described = describe(tools.environment)
        else:
            from reasonrl.rollout.verl_tools import describe as describe_verl

            described = describe_verl(tools.verl_config)
    except ValueError as e:
        raise ConfigError(f"rollout.tools.{key}: {e}") from None
    from reasonrl.rollout.function_tools import load_tools

    taken = {*TOOLS, *TOOL_ALIASES, *(load_tools(list(tools.functions)) if tools.functions else ())}
    for d in described.values():
        clash = sorted(set(d["tools"]) & taken)
        if clash:
            raise ConfigError(f"rollout.tools.{key}: {d['spec']}'s tool {clash[0]!r} has the name of "
                              f"another tool")  # fmt: skip
    why = {"rollout.interaction.enabled": cfg.rollout.interaction.enabled,  # attempts would need the state
           f"algo.adv_estimator={cfg.algo.adv_estimator} (a greedy baseline rollout)":
               "baseline_rewards" in ADVANTAGES.get(cfg.algo.adv_estimator).needs,
           "algo.guidance.enabled": cfg.algo.guidance.enabled}  # fmt: skip
    for what, refused in why.items():
        if refused:
            raise ConfigError(f"rollout.tools.{key} with {what}: its rollouts are not episodes of an "
                              f"environment")  # fmt: skip
    weights = dict(cfg.reward.weights or {})
    if "environment" in weights and not any(d["reward"] for d in described.values()):
        raise ConfigError("reward.weights has an environment term, but no environment of "
                          "rollout.tools.environment defines get_reward")  # fmt: skip


def check_environment_functions(reward_options, environment) -> None:
    """InputError naming a TRL reward function of `reward_options` that takes `environments=` where there are
    none (`environment`: rollout.tools.environment's setting, or None): TRL passes them with
    environment_factory, so without it the function has nothing to read."""
    from reasonrl.rewards.verifiers.trl_function import environment_functions

    options = dict((reward_options or {}).get("trl_function") or {})
    try:
        specs = environment_functions(options)
    except ValueError:  # a function that does not load: its own check names it
        return
    if specs and environment is None:
        from reasonrl.errors import InputError

        raise InputError(f"trl_function: {specs[0]} takes environments=, the rollouts' environment instances (TRL's "
                         "environment_factory): set rollout.tools.environment (--tool-environment in an eval)")  # fmt: skip


def check_rows(problems: list, where: str, rollout) -> None:
    """InputError naming the first row that cannot be an episode, when the data loads (`rollout`: the run's
    rollout section): one routed to the `environment` verifier in a run with no rollout.tools.environment,
    rollout.tools.verl_config or rollout.agent, or (the dict form) one whose `environment` column names none
    of its environments."""
    from reasonrl.errors import InputError
    from reasonrl.rewards.routing import verifier_name

    setting = rollout.tools.environment if rollout.tools.enabled else None
    named = None if setting is None else specs(setting)
    verl_tools = rollout.tools.enabled and rollout.tools.verl_config is not None
    episodes = setting is not None or verl_tools or rollout.agent.path is not None
    for i, p in enumerate(problems):
        if not episodes and verifier_name(p) == "environment":
            raise InputError(f"{where} row {i} (uid {p.uid!r}): routed to the environment verifier, whose reward "
                             f"an environment, verl's tools or an agent gives: set rollout.tools.environment, "
                             f"rollout.tools.verl_config or rollout.agent.path")  # fmt: skip
        why = None if named is None else _unknown_column(p, named)
        if why:
            raise InputError(f"{where} row {i} (uid {p.uid!r}): {why}")


def _handle(op: str, key: int, args: list, named: dict, state: dict):
    """A request in a worker process (`rollout.instance_pool`): "start" imports the classes, once (before the
    process is ready); the others run on the process's event loop (`_handle_async`)."""
    if op == "start":
        state.setdefault("factories", {}).update((name, load_callable(spec)) for name, spec in named.items())
        return None
    return run_in_loop(state, _handle_async(op, key, args, named, state))


async def _handle_async(op: str, key: int, args: list, named: dict, state: dict):
    """One request: the instances live by key, free ones pooled; the pool runs different rollouts' requests
    side by side (an async method awaiting a server lets the others go on)."""
    factories, live, free = (state.setdefault(k, {}) for k in ("factories", "live", "free"))
    if op == "reset":
        name, row = args
        if name not in factories:
            factories[name] = load_callable(named[name])
        pool = free.setdefault(name, [])
        instance = pool.pop() if pool else factories[name]()
        live[key] = (name, instance)
        got = await maybe_awaited(instance.reset(**row))
        if got is not None and not isinstance(got, str):
            raise ValueError(f"reset returned {type(got).__name__}, not a text or None")
        return got
    name, instance = live[key]
    if op == "call":
        method, arguments = args
        fn = methods(instance).get(method)
        if fn is None:
            raise ValueError(f"there is no tool named {method!r}")
        inspect.signature(fn).bind(**arguments)  # arguments that do not fit: the model's mistake, named
        return str(await maybe_awaited(fn(**arguments)))
    if op == "reward":
        got = await maybe_awaited(instance.get_reward())
        if isinstance(got, bool) or not isinstance(got, numbers.Real) or not math.isfinite(got):
            raise ValueError(f"get_reward returned {got!r}, not a finite number")
        return float(got)
    if op == "functions":  # TRL reward functions taking environments=: called beside this rollout's instance
        from reasonrl.rewards.verifiers.trl_function import call_with_environment, label

        specs, call = args
        return {label(spec): await call_with_environment(instance, spec, *call) for spec in specs}
    if op == "end":
        free.setdefault(name, []).append(live.pop(key)[1])
        return None
    raise ValueError(f"unknown request {op!r}")


class Environments(InstancePool):
    """The environments of `rollout.tools.environment` in `workers` processes (`rollout.instance_pool`), each
    request under `timeout_s`. Create once per engine; `close` stops the processes."""

    trl_environments = True  # its instances are TRL's environments (TRL reward functions get them)

    def __init__(self, setting, workers: int = 4, timeout_s: float = 5.0) -> None:
        self.described = describe(setting)
        named = {name: d["spec"] for name, d in self.described.items()}
        super().__init__(named, _handle, _handle_async, workers, timeout_s, "rollout.tools.environment")

    def begin(self, rows: list[tuple[str, dict]]) -> tuple[list[int], list[tuple[str, object]]]:
        """Keys of new rollouts, one per (environment, reset arguments), and each reset's (status, value)."""
        keys = self.new_keys(len(rows))
        return keys, self.ask([("reset", k, name, row) for k, (name, row) in zip(keys, rows)])

    @staticmethod
    def shown_error(text: str) -> str:
        """What the model sees of a call that failed (TRL's {'error': ...})."""
        return str({"error": text})


def _unknown_column(problem, names) -> str | None:
    """Why a row picks none of the environments `names` by its `environment` column (the dict form), or None."""
    if "" in names or problem.extra_info.get(COLUMN) in names:
        return None
    return (f"its {COLUMN} column is {problem.extra_info.get(COLUMN)!r}, not one of rollout.tools.environment's "
            f"({', '.join(names)})")  # fmt: skip


def environment_of(problem, described: dict[str, dict]) -> str:
    """The environment a row uses: "" (the one), or its `environment` column's (the dict form); ValueError
    naming the row otherwise."""
    why = _unknown_column(problem, described)
    if why:
        raise ValueError(f"row {problem.uid!r}: {why}")
    return "" if "" in described else problem.extra_info[COLUMN]


def shown_problem(problem, observation: str | None, schemas: list[dict]):
    """The row as its rollouts see it: the reset's text appended to the last user message (TRL's), the
    environment's tools in its template arguments' `tools` (one listed by name already is left)."""
    prompt = list(problem.prompt)
    if observation is not None:
        prompt[-1] = {**prompt[-1], "content": str(prompt[-1]["content"]) + observation}
    listed = with_schemas(problem.chat_template_kwargs.get("tools") or [], schemas)
    return replace(
        problem, prompt=prompt, chat_template_kwargs={**problem.chat_template_kwargs, "tools": listed}
    )


def generate_episodes(
    loop, problems: list, params, max_prompt_tokens: int | None = None, scoring=None
) -> list:
    """One RolloutGroup per row, each rollout an episode of its own environment instance: reset with the row,
    generated through the tool loop `loop` (a `ToolRolloutEngine`), its `get_reward` read into the
    completion's `env_reward` (`env_reason` says how it went). `scoring`: (the reward runner, its think-block
    policy), whose TRL reward functions taking `environments=` are called beside each rollout's instance
    before it is freed (`env_functions`). ValueError naming a row whose reset failed or whose n resets differ."""
    from reasonrl.data.prompts import encode_prompts
    from reasonrl.errors import InputError
    from reasonrl.rewards.verifiers.trl_function import columns
    from reasonrl.types import RolloutGroup

    env, n = loop.environments, params.n
    names = [environment_of(p, env.described) for p in problems]
    keys, resets = env.begin([(name, {"prompt": p.prompt, **columns(p)}) for p, name in zip(problems, names)
                              for _ in range(n)])  # fmt: skip
    try:
        shown = []
        for i, (p, name) in enumerate(zip(problems, names)):
            where = f"rollout.tools.environment: {env.described[name]['spec']} for row {p.uid!r}"
            text = shared_reset(resets[i * n : (i + 1) * n], where, "texts", "the environment's")
            shown.append(shown_problem(p, text, env.described[name]["schemas"]))
        try:
            prompt_ids = encode_prompts(loop.tokenizer, shown, max_prompt_tokens)
        except InputError as e:  # (the budget was checked without the reset's text and the methods' schemas)
            raise InputError(f"{e} (with rollout.tools.environment's reset text and tools in it)") from None
        episodes = [(k, names[j // n]) for j, k in enumerate(keys)]
        completions = loop.generate(prompt_ids, params, episodes=episodes)
        rewarded = [j for j, (_, name) in enumerate(episodes) if env.described[name]["reward"]]
        asks = [("reward", keys[j]) for j in rewarded]
        calls = _function_calls(env, scoring, loop.tokenizer, shown, completions, n)
        replies = env.ask(asks + [("functions", keys[j], *call) for j, call in calls])
    finally:
        env.end(keys)
    rewards = dict(zip(rewarded, replies))
    values = {j: _function_values(call[0], got) for (j, call), got in zip(calls, replies[len(asks) :])}
    groups = []
    for i, (p, ids, cs) in enumerate(zip(shown, prompt_ids, completions)):
        scored = []
        for j, c in enumerate(cs, start=i * n):
            status, value = rewards.get(j, ("none", None))
            if status == "ok" and isinstance(value, list):  # verl's tools: their step rewards
                c = replace(c, env_reward=sum(value), env_reason=TOOL_REWARDS, tool_rewards=tuple(value))
            elif status == "ok":
                c = replace(c, env_reward=value, env_reason=REWARDED)
            else:
                c = replace(c, env_reason=NO_REWARD if status == "none" else f"error: get_reward: {value}")
            scored.append(replace(c, env_functions=values[j]) if j in values else c)
        groups.append(RolloutGroup(p, ids, scored))
    return groups


def _function_calls(
    env, scoring, tokenizer, shown: list, completions: list, n: int
) -> list[tuple[int, tuple]]:
    """[(rollout index, (specs, call arguments))] of the TRL reward functions taking `environments=` in the
    runner's options (`scoring`: (runner, think-block policy)), each rollout's completion as the verifiers
    read it; [] without such functions (or with verl's tools, whose instances are no TRL environments)."""
    from reasonrl.data.prompts import prompt_opens_think, scoring_text
    from reasonrl.rewards.verifiers.trl_function import environment_functions

    if scoring is None or not env.trl_environments:
        return []
    scorer, think_from_prompt = scoring
    options = dict((getattr(scorer, "options", None) or {}).get("trl_function") or {})
    specs = environment_functions(options)
    if not specs:
        return []
    state = getattr(scorer, "trainer_state", None)
    setting = (options.get("format", "conversational"), options.get("tokenizer", ""),
               options.get("label_key", "solution"), dict(state) if state else None)  # fmt: skip
    out = []
    for i, (p, cs) in enumerate(zip(shown, completions)):
        opens = think_from_prompt and prompt_opens_think(tokenizer, p)
        out += [
            (i * n + j, (specs, (scoring_text(c.answer_text, opens), p, *setting))) for j, c in enumerate(cs)
        ]
    return out


def _function_values(specs: list[str], reply: tuple[str, object]) -> dict[str, dict]:
    """{function: what it gave} of one rollout's "functions" request; each an error where the request failed."""
    from reasonrl.rewards.verifiers.trl_function import label

    status, value = reply
    if status == "ok":
        return dict(value)
    return {label(s): {"error": f"{s}: {status} beside the environment: {value}"} for s in specs}


def scored_problem(problem, completion):
    """The row a verifier scores `completion` against: with verl's tools its extra_info holds the rollout's
    `tool_rewards` and `turn_scores`, as verl hands them to its reward function; with TRL reward functions
    taking `environments=`, what they gave beside its instance (`trl_function` reads it); the row otherwise."""
    from reasonrl.rewards.verifiers.trl_function import ENVIRONMENT_VALUES

    extra = {}
    if completion.env_reason == TOOL_REWARDS:
        extra.update(tool_rewards=list(completion.tool_rewards), turn_scores=[])
    if completion.env_functions is not None:
        extra[ENVIRONMENT_VALUES] = completion.env_functions
    return replace(problem, extra_info={**problem.extra_info, **extra}) if extra else problem


REWARDED, NO_REWARD = "environment_reward", "no_environment_reward"
TOOL_REWARDS = "tool_rewards"  # verl's tools (`rollout.verl_tools`): the sum of their calls' step rewards


def given_results(completions) -> list[dict | None]:
    """What the `environment` reward term of each completion is (`rewards.runner`'s given results): its
    environment's reward; None for a completion that was no episode (the verifier says so)."""
    from reasonrl.types import RewardResult

    return [{"environment": RewardResult(c.env_reward or 0.0, {"reason": c.env_reason})} if c.env_reason else None
            for c in completions]  # fmt: skip
