"""OpenRLHF agents, as they are (`rollout.agent.path`; OpenRLHF's `--agent_func_path agent_func.py`): a
file whose `AgentExecutor` (a `MultiTurnAgentExecutor` of its `AgentInstance`) runs multi-turn episodes.
Each episode gets a fresh instance; `reset({"observation": prompt, "label": label})` returns its first
observation (`{"observation": text}`), and after each of the model's turns `step({"observation_text",
"action_text", "label", "sampling_params"})` returns `rewards`, `environment_feedback` (text appended after
the turn, its markup written by the agent: role markers as the template's tokens, as OpenRLHF tokenizes
it) and `done`. The episode ends when the agent says done or the token budget (`rollout.max_new_tokens`,
feedback included, as OpenRLHF's `generate_max_len`) ends; its reward is the sum of its steps' rewards (as
OpenRLHF's), the `environment` reward term (`reward.verifier: environment`, which `reasonrl convert openrlhf`
sets, or `reward.weights: {environment: 1}` beside other terms).

The file runs unchanged: `from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor` works
without OpenRLHF installed (the bases here stand in for its module), async and plain methods alike (an
`async def __init__`, as OpenRLHF's older examples write it, too); `rewards` may be a tensor or a number.
What reasonrl's groups need beyond OpenRLHF: the n resets of a row return the same observation (the group
shares one prompt; an error naming the row otherwise). Not run: an `AgentExecutor` overriding `execute`
(token-level control of the engine: refused when the recipe loads, unless it only calls the base's); the
`sampling_params` a step returns (the recipe's sampling holds for every turn) and `scores` (OpenRLHF's dynamic
filtering reads them; reasonrl's `algo.dynamic_sampling` reads the rewards). The numbers of the last step's
`extra_logs` are logged (`rollout/agent/log/<name>/*`).

Where the instances live: `rollout.agent.workers` processes (`rollout.instance_pool`; one event loop each,
so an agent's aiohttp session lives across its steps), every reset and step under `rollout.agent.timeout_s`;
a step that raises, hangs or kills its process ends that episode (its reward a verifier error), never the run.

Owns: loading the agent (`agent_class`, the stand-in bases), the checks (`check_agent`, `check_agent_rows`),
what a worker does with a request (`_handle`), `AgentRolloutEngine` (the engine wrapper that runs the
episodes, `generate_groups`) and the `rollout/agent/*` metrics. Does not own: the engines, the next turns'
generation within each one's budget (`rollout.interaction.next_attempts`), the processes, scoring (the
runner takes the rewards as given results, `rollout.environments.given_results`).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

from reasonrl.rollout.instance_pool import (
    InstancePool,
    finite_number,
    maybe_awaited,
    run_in_loop,
    shared_reset,
)
from reasonrl.rollout.interaction import Attempts, next_attempts
from reasonrl.user_code import load_function, stand_in

DONE, UNFINISHED = "agent_done", "agent_unfinished"  # a rewarded episode's env_reason


class AgentInstanceBase(ABC):  # openrlhf.utils.agent's, for files written against it
    @abstractmethod
    def __init__(self, *args, **kwargs):
        pass

    async def reset(self, states: dict, **kwargs):
        return states

    @abstractmethod
    async def step(self, states: dict, **kwargs): ...


class AgentExecutorBase:  # openrlhf.utils.agent's: what matters here is the instance class it runs
    def __init__(self, agent_instance_cls=None, *args, **kwargs):
        self.agent_instance_cls = agent_instance_cls


class MultiTurnAgentExecutor(AgentExecutorBase):
    pass


def _only_calls_base(fn) -> bool:
    """True when `fn`'s body (after a docstring) is `return [await] super().execute(...)`."""
    try:
        body = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0].body
    except (OSError, TypeError, SyntaxError, IndexError, AttributeError):
        return False
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    value = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
    value = value.value if isinstance(value, ast.Await) else value
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "execute"
            and isinstance(value.func.value, ast.Call) and getattr(value.func.value.func, "id", "") == "super")  # fmt: skip


def _handed_to_base(init):
    """The class an executor's `__init__` hands `super().__init__` first, else its module's AgentInstance."""
    names = getattr(init, "__globals__", {})
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError, SyntaxError):
        return names.get("AgentInstance")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__"
                and isinstance(node.func.value, ast.Call) and node.args and isinstance(node.args[0], ast.Name)):  # fmt: skip
            return names.get(node.args[0].id)
    return names.get("AgentInstance")


def agent_class(spec: str):
    """The AgentInstance class `spec` runs: `agent_func.py` (its `AgentExecutor`'s instance class, else its
    `AgentInstance`) or `path.py:Name` (an executor or instance class); ValueError naming what is wrong."""
    stand_in("openrlhf.utils.agent", [AgentInstanceBase, AgentExecutorBase, MultiTurnAgentExecutor])
    path, _, name = spec.partition(":")
    if not path.endswith(".py"):
        raise ValueError(f"{spec!r} is not a Python file (agent_func.py, or path.py:Class)")
    try:
        found = load_function(path, name or "AgentExecutor")
    except ValueError as e:
        if name or "defines no function" not in str(e):
            raise
        found = load_function(path, "AgentInstance")
    cls = found
    if inspect.isclass(found) and (issubclass(found, AgentExecutorBase) or hasattr(found, "execute")):
        # an executor: the instance class it runs; its own execute (not OpenRLHF's) would drive the engine
        own = next((k.__dict__["execute"] for k in found.__mro__ if "execute" in k.__dict__
                    and k.__module__ not in ("openrlhf.utils.agent", __name__)), None)  # fmt: skip
        if own is not None and not _only_calls_base(own):
            raise ValueError(f"{spec}: {found.__name__} overrides execute(); reasonrl runs the turns itself (as "
                             "OpenRLHF's MultiTurnAgentExecutor), calling the AgentInstance's reset and step: "
                             "drop the override")  # fmt: skip
        try:
            cls = found().agent_instance_cls
        except TypeError:  # an older executor taking the engine and more: the class it hands its base
            cls = _handed_to_base(found.__init__)
        if cls is None:
            raise ValueError(f"{spec}: {found.__name__} names no AgentInstance class")
    if not inspect.isclass(cls) or not callable(getattr(cls, "step", None)):
        raise ValueError(
            f"{spec}: {getattr(cls, '__name__', cls)!r} is no agent instance class (no step method)"
        )
    return cls


def _step_reply(got) -> dict:
    if not isinstance(got, dict):
        raise ValueError(f"step returned {type(got).__name__}, not a dict")
    missing = [k for k in ("rewards", "environment_feedback", "done") if k not in got]
    if missing:
        raise ValueError(f"step returned no {', '.join(missing)}")
    feedback = got["environment_feedback"]
    if not isinstance(feedback, str):
        raise ValueError(f"step returned environment_feedback={type(feedback).__name__}, not a text")
    done = got["done"]
    done = done.item() if hasattr(done, "item") else done
    return {"reward": finite_number(got["rewards"], "step returned rewards"), "feedback": feedback, "done": bool(done),
            "logs": _logged(got.get("extra_logs"))}  # fmt: skip


def _logged(extra) -> dict[str, float]:
    """The numbers of a step's `extra_logs` (tensors and numpy values holding one too); the rest left out."""
    out = {}
    for name, value in (extra if isinstance(extra, dict) else {}).items():
        try:
            out[str(name)] = finite_number(value, str(name))
        except (ValueError, RuntimeError, TypeError):  # not one finite number: not a metric
            continue
    return out


def _handle(op: str, key: int, args: list, named: dict, state: dict):
    """A request in a worker process (`rollout.instance_pool`): "start" loads the class, once (before the
    process is ready); the others run on the process's event loop (`_handle_async`)."""
    if op == "start":
        state["cls"] = agent_class(named[""])
        return None
    return run_in_loop(state, _handle_async(op, key, args, named, state))


async def _handle_async(op: str, key: int, args: list, named: dict, state: dict):  # noqa: ARG001 - the pool's
    """One request: a fresh instance per episode, by key; the pool runs different episodes' requests side by
    side (an agent awaiting a server lets the others go on)."""
    live = state.setdefault("live", {})
    if op == "reset":
        cls = state["cls"]
        if inspect.iscoroutinefunction(cls.__init__):  # `async def __init__` (OpenRLHF's older examples)
            instance = cls.__new__(cls)
            await instance.__init__()
        else:
            instance = cls()
        live[key] = instance
        got = await maybe_awaited(instance.reset(args[0]))
        observation = got.get("observation") if isinstance(got, dict) else got
        if not isinstance(observation, str):
            raise ValueError(f"reset returned {type(got).__name__} with no observation text")
        return observation
    if op == "step":
        return _step_reply(await maybe_awaited(live[key].step(args[0])))
    if op == "end":
        live.pop(key, None)
        return None
    raise ValueError(f"unknown request {op!r}")


class Agents(InstancePool):
    """The agent of `rollout.agent` (`cfg`) in its worker processes; ValueError when the file does not load."""

    def __init__(self, cfg) -> None:
        agent_class(cfg.path)  # here first: an error names the file before any process starts
        super().__init__({"": cfg.path}, _handle, _handle_async, cfg.workers, cfg.timeout_s, "rollout.agent")
        self.spec = cfg.path


@dataclass
class _Episode:
    key: int
    group: int
    label: object
    text: str  # OpenRLHF's observation_text: the observation, each action and its feedback
    attempts: Attempts = field(default_factory=Attempts)
    reward: float = 0.0
    reason: str = UNFINISHED
    budget: int = 0  # the tokens its last turn could take
    logs: dict = field(default_factory=dict)


class AgentRolloutEngine:
    """`engine` whose rollouts are episodes of the agent `cfg` (`rollout.agent`), started from their rows
    (`generate_groups`, which `rollout.scored.generate_groups` calls for an engine that is `episodic`)."""

    runs_agent = episodic = True

    def __init__(self, engine, tokenizer, cfg) -> None:
        self.engine, self.tokenizer, self.cfg = engine, tokenizer, cfg
        self.agents = Agents(cfg)

    def __getattr__(self, name):  # anything else an engine offers (stats, wake, sleep, ...)
        return getattr(self.engine, name)

    def sync_weights(self, model, version: int | None = None) -> None:
        self.engine.sync_weights(model, version)

    def close(self) -> None:
        self.agents.close()
        self.engine.close()

    def generate(self, prompts, params):
        raise ValueError("rollout.agent: episodes start from their rows (generate_groups)")

    def generate_groups(
        self, problems: list, params, max_prompt_tokens: int | None = None, scoring=None
    ) -> list:
        """One RolloutGroup per row, each rollout an episode of its own agent instance (`env_reward`: its
        steps' rewards summed; `env_reason`: agent_done, agent_unfinished or the error that ended it).
        `scoring` is not read (TRL reward functions get environments, not OpenRLHF's agents)."""
        from reasonrl.types import RolloutGroup

        tok, n = self.tokenizer, params.n
        keys = self.agents.new_keys(len(problems) * n)
        try:
            problems, prompts, episodes = self._reset(problems, keys, n, max_prompt_tokens)
            firsts = [c for cs in self.engine.generate(prompts, params) for c in cs]
            for e, c in zip(episodes, firsts):
                e.attempts.first, e.budget = c, params.max_new_tokens
                e.attempts.add(c)
            self._turns(episodes, prompts, params)
        finally:
            self.agents.end(keys)
        groups = []
        for i, (p, ids) in enumerate(zip(problems, prompts)):
            done = []
            for e in episodes[i * n : (i + 1) * n]:
                c = e.attempts.completion(tok)
                rewarded = not e.reason.startswith("error")
                done.append(replace(c, env_reward=e.reward if rewarded else None, env_reason=e.reason,
                                    env_logs=e.logs or None))  # fmt: skip
            groups.append(RolloutGroup(p, ids, done))
        return groups

    def _reset(self, problems, keys, n, max_prompt_tokens):
        """(the rows as their episodes see them: a row whose resets returned another observation has that text
        as its prompt, plain; each row's prompt ids; the episodes). ValueError naming a row whose reset failed
        or whose n resets differ."""
        from reasonrl.data.prompts import encode_prompt, prompt_text
        from reasonrl.errors import InputError

        texts = [prompt_text(self.tokenizer, p) for p in problems]
        states = [
            {"observation": t, "label": p.ground_truth} for t, p in zip(texts, problems) for _ in range(n)
        ]
        resets = self.agents.ask([("reset", k, s) for k, s in zip(keys, states)])
        shown_rows, prompts, episodes = [], [], []
        for i, p in enumerate(problems):
            where = f"rollout.agent: {self.agents.spec} for row {p.uid!r}"
            shown = shared_reset(resets[i * n : (i + 1) * n], where, "observations", "the agent's")
            if shown == texts[i]:
                ids = encode_prompt(self.tokenizer, p)
            else:  # (what the verifiers' think-block policy and rollouts.jsonl read is what the model saw)
                ids = self.tokenizer(shown, add_special_tokens=False)["input_ids"]
                p = replace(p, prompt=[{"role": "user", "content": shown}], apply_chat_template=False)
            if max_prompt_tokens is not None and len(ids) > max_prompt_tokens:
                raise InputError(f"{where}: the observation its reset returned has {len(ids)} tokens > "
                                 f"data.max_prompt_tokens={max_prompt_tokens}")  # fmt: skip
            shown_rows.append(p)
            prompts.append(list(ids))
            episodes += [_Episode(k, i, p.ground_truth, shown) for k in keys[i * n : (i + 1) * n]]
        return shown_rows, prompts, episodes

    def _turns(self, episodes: list[_Episode], prompts, params) -> None:
        """Step every episode still going after its last turn; generate the next turns of those the agent
        answered with feedback that fits, in one engine call per round."""
        live, round_ = episodes, 0
        while live:
            steps = []
            for (
                e
            ) in live:  # (vLLM's names; max_tokens: the budget the turn was generated with, as OpenRLHF's)
                sampling = SimpleNamespace(n=1, temperature=params.temperature, top_p=params.top_p,
                                           top_k=params.top_k, max_tokens=e.budget, seed=params.seed)  # fmt: skip
                steps.append(("step", e.key, {"observation_text": e.text, "action_text": e.attempts.texts[-1],
                                              "label": e.label, "sampling_params": sampling}))  # fmt: skip
            resumed = []
            for e, (status, value) in zip(live, self.agents.ask(steps)):
                if status != "ok":
                    e.reason = f"error: step: {value}"
                    continue
                e.reward, e.logs = (
                    e.reward + value["reward"],
                    value["logs"],
                )  # (the last step's logs, as OpenRLHF's)
                e.text += e.attempts.texts[-1] + value["feedback"]
                if value["done"]:
                    e.reason = DONE
                    continue
                feedback = value["feedback"]
                ids = self.tokenizer(feedback, add_special_tokens=False)["input_ids"] if feedback else []
                if e.attempts.finish != "stop" or len(e.attempts.tokens) + len(ids) >= params.max_new_tokens:
                    continue  # the budget ends here (cut, or no room for the feedback and a turn)
                e.attempts.between(ids)
                e.budget = params.max_new_tokens - len(e.attempts.tokens)
                resumed.append(e)
            if not resumed:
                return
            round_ += 1
            seed = None if params.seed is None else params.seed + 15485863 * round_
            next_attempts(self.engine, self.tokenizer, [(prompts[e.group], e.attempts) for e in resumed],
                          replace(params, n=1, seed=seed))  # fmt: skip
            live = resumed


def agent_metrics(completions) -> dict[str, float]:
    """`rollout/agent/*`: turns per episode, the share the agent ended (done), and of steps that failed; and
    `rollout/agent/log/<name>/{count, mean}` of what the episodes' last steps logged (`extra_logs`; families
    with a count: a rank whose episodes logged none has none of the keys, `distributed.reduce_metrics`)."""
    n = max(len(completions), 1)
    out = {
        "rollout/agent/turns_mean": sum(c.turns for c in completions) / n,
        "rollout/agent/done_frac": sum(c.env_reason == DONE for c in completions) / n,
        "rollout/agent/error_frac": sum(c.env_reason.startswith("error") for c in completions) / n,
    }
    logged: dict[str, list[float]] = {}
    for c in completions:
        for name, value in (c.env_logs or {}).items():
            logged.setdefault(name, []).append(value)
    for name, xs in sorted(logged.items()):
        out[f"rollout/agent/log/{name}/count"] = float(len(xs))
        out[f"rollout/agent/log/{name}/mean"] = sum(xs) / len(xs)
    return out


def check_agent(cfg) -> None:
    """ConfigError naming what cannot work with `rollout.agent`."""
    from reasonrl.algorithms import ADVANTAGES
    from reasonrl.config import ConfigError

    a = cfg.rollout.agent
    if a.path is None:
        return
    if not isinstance(a.path, str) or not a.path:
        raise ConfigError(f"rollout.agent.path must be an agent file (agent_func.py), got {a.path!r}")
    if a.workers < 1 or a.timeout_s <= 0:
        raise ConfigError(
            f"rollout.agent.workers must be >= 1 and timeout_s > 0, got {a.workers} and {a.timeout_s}"
        )
    try:
        agent_class(a.path)
    except ValueError as e:
        raise ConfigError(f"rollout.agent.path: {e}") from None
    why = {"rollout.tools.enabled": cfg.rollout.tools.enabled,  # the agent answers the turns itself
           "rollout.interaction.enabled": cfg.rollout.interaction.enabled,
           f"algo.adv_estimator={cfg.algo.adv_estimator} (a greedy baseline rollout)":
               "baseline_rewards" in ADVANTAGES.get(cfg.algo.adv_estimator).needs,
           "algo.guidance.enabled": cfg.algo.guidance.enabled,
           "algo.objective=sft": cfg.algo.objective == "sft"}  # fmt: skip
    for what, refused in why.items():
        if refused:
            raise ConfigError(
                f"rollout.agent with {what}: the agent answers each turn of its episodes itself"
            )


def check_agent_rows(cfg, problems: list, where: str) -> None:
    """InputError when the agent's rewards would count nowhere: no `environment` reward term and no row of
    `problems` routed to the `environment` verifier."""
    from reasonrl.errors import InputError
    from reasonrl.rewards.routing import verifier_name

    if cfg.rollout.agent.path is None or "environment" in dict(cfg.reward.weights or {}):
        return
    if problems and not any(verifier_name(p) == "environment" for p in problems):
        raise InputError(f"rollout.agent: no row of the {where} is scored by the agent's rewards: set "
                         f"reward.verifier: environment (as OpenRLHF, the agent's reward alone) or add "
                         f"reward.weights.environment")  # fmt: skip
