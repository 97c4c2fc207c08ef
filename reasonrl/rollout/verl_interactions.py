"""verl's interaction classes, as they are (`rollout.interaction.verl_config`: the file verl's
`multi_turn.interaction_config_path` names, `interaction: [{name, class_name, config}]`). Each class is made
once per worker process, `cls(config={**config, "name": name})`, as verl makes it; a row picks its
interaction by `extra_info.interaction_kwargs.name` (verl's `interaction_kwargs`, handed to every call; a
row without them gets `{"name": the one configured, "ground_truth": its ground truth}`). After each attempt,
`generate_response(instance_id, messages, **interaction_kwargs)` says whether the conversation ends, what
the user answers (a user turn of the chat template, no loss on it, as `rollout.interaction`'s feedback) and
the turn's score; `start_interaction` / `finalize_interaction` bracket each rollout.

What the reward is: as in verl, the routed verifier scores the last attempt (`rollout.interaction`'s reward,
with its `decay`); the turn scores, summed, are the `environment` reward term (`reward.weights: {environment:
w}`; verl hands them to its reward function as `turn_scores`). A class importing `verl.interactions.base`
works without verl installed (a stand-in for `BaseInteraction`); one importing more of verl needs verl.

Where they live: `rollout.interaction.workers` processes (`rollout.instance_pool`), a rollout's calls in its
process (verl keys its state by instance_id, here the rollout's key), each under `rollout.interaction.timeout_s`;
a call that raises, hangs or returns no (bool, text, score, dict) ends that rollout (its turn scores a verifier
error), never the run.

Owns: reading the config file (`interaction_specs`), the stand-in base, what a worker does with a request,
and the rounds of a batch (`run_classes`). Does not own: the feedback turn's tokens and the attempts
(`rollout.interaction`), the processes, scoring.
"""

from __future__ import annotations

import inspect

from reasonrl.rollout.instance_pool import InstancePool, finite_number, maybe_awaited, run_in_loop

DONE, UNFINISHED = "interaction_done", "interaction_unfinished"


class BaseInteraction:  # verl.interactions.base's, for classes written against it
    def __init__(self, config: dict):
        self.config = config
        self.name = config.get("name", "interaction_agent")

    async def start_interaction(self, instance_id=None, **kwargs):
        return instance_id

    async def generate_response(self, instance_id, messages, **kwargs):
        return False, "Your current result seems acceptable.", 0.8, {}

    async def calculate_score(self) -> float:
        return 0.0

    async def finalize_interaction(self) -> None:
        return None


def interaction_specs(path: str) -> dict[str, tuple[str, dict]]:
    """{name: (class_name, config)} of verl's interaction config file, each name as verl derives it (the class
    name without "Interaction", lower case, where none is given); ValueError naming the file and the entry."""
    from reasonrl.user_code import listed_in

    items = listed_in(path, "interaction", "a verl interaction configuration")
    if not isinstance(items, list):
        raise ValueError(f"{path}: no `interaction:` list of {{name, class_name, config}}")
    out: dict[str, tuple[str, dict]] = {}
    for i, item in enumerate(items):
        cls = item.get("class_name") if isinstance(item, dict) else None
        if not isinstance(cls, str) or "." not in cls:
            raise ValueError(f"{path}: interaction {i} has no class_name (module.Class)")
        simple = cls.rsplit(".", 1)[-1]
        name = str(item.get("name") or (simple[:-11] if simple.endswith("Interaction") else simple).lower())
        if name in out:
            raise ValueError(f"{path}: interaction name {name!r} twice")
        out[name] = (cls, dict(item.get("config") or {}))
    return out


def load_classes(path: str) -> dict[str, object]:
    """{name: the interaction made from its class and config}, as verl makes them; ValueError naming it."""
    from reasonrl.user_code import load_callable, stand_in

    stand_in("verl.interactions.base", [BaseInteraction])
    made = {}
    for name, (cls, config) in interaction_specs(path).items():
        try:
            made[name] = load_callable(cls)(config={**config, "name": name})
        except ValueError as e:
            raise ValueError(f"{path}: interaction {name!r}: {e}") from None
        except Exception as e:  # the user's constructor: its own error, named
            raise ValueError(
                f"{path}: interaction {name!r}: making it failed ({type(e).__name__}: {e})"
            ) from None
        if not callable(getattr(made[name], "generate_response", None)):
            raise ValueError(f"{path}: interaction {name!r} ({cls}) has no generate_response")
    return made


def _handle(op: str, key: int, args: list, named: dict, state: dict):
    """A request in a worker process (`rollout.instance_pool`): "start" makes the interactions, once; the
    others run on the process's event loop (`_handle_async`)."""
    if op == "start":
        state["made"] = load_classes(named[""])
        return None
    return run_in_loop(state, _handle_async(op, key, args, named, state))


async def _handle_async(op: str, key: int, args: list, named: dict, state: dict):  # noqa: ARG001 - the pool's
    """One request: one object per interaction, its rollouts by instance_id (the rollout's key); the pool runs
    different rollouts' requests side by side."""
    live = state.setdefault("live", {})
    if op == "reset":
        name, kwargs = args
        live[key] = (state["made"][name], kwargs)
        await maybe_awaited(live[key][0].start_interaction(str(key), **kwargs))
        return None
    made, kwargs = live[key]
    if op == "step":
        got = await maybe_awaited(made.generate_response(str(key), args[0], **kwargs))
        if not isinstance(got, (tuple, list)) or len(got) != 4 or not isinstance(got[1], str):
            raise ValueError(f"generate_response returned {got!r}, not (should_terminate, text, score, dict)")
        score = None if got[2] is None else finite_number(got[2], "generate_response returned the turn score")
        return {"done": bool(got[0]), "feedback": got[1], "score": score}
    if op == "end":
        del live[key]
        finish = getattr(made, "finalize_interaction", None)
        if callable(finish):  # verl's base takes no instance id; its Gsm8kInteraction takes one
            takes_id = any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
                           for p in inspect.signature(finish).parameters.values())  # fmt: skip
            await maybe_awaited(finish(str(key)) if takes_id else finish())
        return None
    raise ValueError(f"unknown request {op!r}")


class VerlInteractions(InstancePool):
    """The interactions of verl's config file `path` in `workers` processes; ValueError when they do not load."""

    def __init__(self, path: str, workers: int = 2, timeout_s: float = 30.0) -> None:
        self.names = list(interaction_specs(path))
        load_classes(path)  # here first: an error names the file before any process starts
        super().__init__(
            {"": path}, _handle, _handle_async, workers, timeout_s, "rollout.interaction.verl_config"
        )


def interaction_kwargs(problem, names: list[str]) -> tuple[str, dict]:
    """(the interaction a row picks, the kwargs every call gets): its `extra_info.interaction_kwargs` (verl's),
    or {"name": the one configured, "ground_truth": its ground truth}; ValueError naming the row otherwise."""
    kwargs = problem.extra_info.get("interaction_kwargs")
    kwargs = dict(kwargs) if isinstance(kwargs, dict) else {"ground_truth": problem.ground_truth}
    name = kwargs.get("name") or (names[0] if len(names) == 1 else None)
    if name not in names:
        raise ValueError(f"row {problem.uid!r}: its interaction_kwargs name {name!r} is not one of "
                         f"rollout.interaction.verl_config's ({', '.join(names)})")  # fmt: skip
    return str(name), {**kwargs, "name": name}


def run_classes(inter, engine, groups, params, states) -> dict[int, tuple[float | None, str]]:
    """The rounds of verl's interactions over `states` ((group, opens think, Attempts) of every sample, their
    first attempts in), as verl's loop runs them: an attempt that stopped by itself, with attempts left, is
    answered by its rollout's interaction; one it does not end gets its text as a user turn and another
    attempt, while the budget lasts. Returns {id(Attempts): (its turn scores summed, or None after an error;
    how it ended)}."""
    pool = inter.classes
    picked = [interaction_kwargs(g.problem, pool.names) for g, _, _ in states]
    keys = pool.new_keys(len(states))
    ended = {
        id(s): [0.0, UNFINISHED, k, []] for (_, _, s), k in zip(states, keys)
    }  # score, reason, key, said
    try:
        started = pool.ask([("reset", k, *kw) for k, kw in zip(keys, picked)])
        for (_, _, s), (status, value) in zip(states, started):
            if status != "ok":
                ended[id(s)][1] = f"error: start_interaction: {value}"
        live = [(g, o, s) for g, o, s in states if not ended[id(s)][1].startswith("error")]
        for round_ in range(1, inter.cfg.max_turns):
            live = [(g, o, s) for g, o, s in live if s.finish == "stop"]  # a cut attempt ends it (verl's)
            if not live:
                break
            messages = [list(g.problem.prompt) + _turns(s.texts, ended[id(s)][3]) for g, _, s in live]
            replies = pool.ask([("step", ended[id(s)][2], m) for (_, _, s), m in zip(live, messages)])
            resumed = []
            for (g, o, s), (status, value) in zip(live, replies):
                mine = ended[id(s)]
                if status != "ok":
                    mine[1] = f"error: generate_response: {value}"
                    continue
                mine[0] += value["score"] or 0.0
                if value["done"]:
                    mine[1] = DONE
                    continue
                if inter.answer(s, value["feedback"], params):  # (its user turn, where it and a token fit)
                    mine[3].append(value["feedback"])
                    resumed.append((g, o, s))
            if not resumed:
                break
            inter.next_round(engine, resumed, params, round_)
            live = resumed
    finally:
        pool.end(keys)
    return {i: (None if why.startswith("error") else score, why) for i, (score, why, _, _) in ended.items()}


def _turns(attempts: list[str], said: list[str]) -> list[dict]:
    """The conversation after the prompt, as verl's messages: each attempt, then what the user said to it."""
    out = []
    for i, text in enumerate(attempts):
        out.append({"role": "assistant", "content": text})
        if i < len(said):
            out.append({"role": "user", "content": said[i]})
    return out
