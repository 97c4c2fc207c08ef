"""Feedback between attempts (`rollout.interaction`): a completion whose answer the verifiers find wrong
gets a user turn saying so, and the model tries again in the same completion, up to `max_turns` attempts
(verl's multi-turn interactions, its Gsm8kInteraction; "try again" feedback as in Liu et al. 2025,
arXiv:2507.14295).

Owns: `FEEDBACK` (a real seam: what the user says after an attempt, or that it ends there; the built-in
`verifier` says `message` after a wrong answer; verl's interaction classes take its place with `verl_config`,
`rollout.verl_interactions`), `Interaction` (the feedback turn's tokens, from the model's chat template or a text, and the loop
that scores each attempt, appends the feedback to the wrong ones and generates their next attempts in one
engine call per round), `Attempts` and `next_attempts` (a sample's attempts and what came between them,
the next attempts within each one's budget: also an OpenRLHF agent's turns, `rollout.agents`), `discount` (a completion's reward x decay ** (attempts - 1)), the
`rollout/interaction/*` metrics and `check_interaction` (the recipe's settings). Does not own: the engines,
the verifiers and the runner that scores (`rewards`), or the loss mask built from `Completion.tool_mask`
(`trainer.batching`).

What the trainer gets: one `Completion` per sample whose `token_ids` hold every attempt and the feedback
between them; `tool_mask` marks the feedback's tokens (and any tool output's: no loss, no KL, no entropy on
them; their sampler log-probs are 0); `model_text` is the last attempt's own text, which is what the
verifiers score for the reward, so an earlier wrong answer neither counts nor hides the last one;
`turns` is the number of attempts. The whole completion, feedback included, counts against
`rollout.max_new_tokens` (verl's response length). A completion cut at the token budget gets no feedback;
one whose feedback would not fit ends where it is.

Why the discount: the feedback tells the policy its answer was wrong, so with enough attempts a policy
that cycles through guesses (the four letters of a multiple-choice question) ends on the right one. With
`decay` < 1 an answer right at the first attempt is worth the most (1), and guessing through four letters
is worth (1 + d + d^2 + d^3) / 4 (0.47 at d = 0.5; tested). verl's interaction scores the last answer
undiscounted (decay 1.0).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from reasonrl.data.prompts import prompt_opens_think, scoring_text
from reasonrl.registry import Registry
from reasonrl.rollout.base import SamplingParams, completion_text, within_budget
from reasonrl.rollout.tool_turns import template_turn, turn_tokens
from reasonrl.types import Completion, Problem, RewardResult, RolloutGroup

_MESSAGE = "{message}"
# name -> feedback(problem, attempts, result, cfg) -> the user's message, or None: the interaction ends there.
# `attempts`: the model's own text of each attempt so far (the last one was just scored); `result`: the
# routed verifier's RewardResult of the last; `cfg`: rollout.interaction (its `options` are the recipe's
# settings of the feedback). A plugin (`plugins:`) registers its own: hints, a simulated user, ...
FEEDBACK: Registry = Registry("interaction feedback")


@FEEDBACK.register("verifier")
def verifier_feedback(problem: Problem, attempts: list[str], result: RewardResult, cfg) -> str | None:
    """verl's Gsm8kInteraction: `message` after a wrong answer, nothing after a right one."""
    return None if result.correctness >= 1.0 else cfg.message


@dataclass
class Attempts:
    """One sample's completion so far: its attempts and what came between them (this feedback, or an
    OpenRLHF agent's, `rollout.agents`)."""

    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mask: list[bool] = field(default_factory=list)  # True: not the model's (feedback, tool output)
    texts: list[str] = field(default_factory=list)  # each attempt's own text (what the verifiers read)
    calls: tuple[str, ...] = ()
    finish: str = "stop"
    first: Completion | None = None  # the first attempt as the engine gave it (kept when it is the only one)

    def add(self, c: Completion) -> None:
        self.tokens += c.token_ids
        self.logprobs += c.sampler_logprobs
        self.mask += c.tool_mask or [False] * len(c.token_ids)
        self.texts.append(c.answer_text)
        self.calls += tuple(c.tool_calls)
        self.finish = c.finish_reason

    def between(self, ids: list[int]) -> None:
        """Append tokens that are not the model's (feedback): no loss on them, sampler log-probs 0."""
        self.tokens += ids
        self.logprobs += [0.0] * len(ids)
        self.mask += [True] * len(ids)

    def completion(self, tokenizer) -> Completion:
        """The sample's `Completion`: every attempt and what came between them; the last attempt's text is
        what the verifiers score; the engine's own when there was one attempt."""
        if len(self.texts) == 1:
            return self.first
        return Completion(self.tokens, completion_text(tokenizer, self.tokens), self.logprobs,
                          self.finish, tool_mask=self.mask, model_text=self.texts[-1], tool_calls=self.calls,
                          turns=len(self.texts))  # fmt: skip


def next_attempts(engine, tokenizer, items: list[tuple[list[int], Attempts]], params: SamplingParams) -> None:
    """Each (prompt ids, sample)'s next attempt, within its own budget (`max_new_tokens` less its tokens so
    far): one engine call at the largest budget, each attempt then cut at its own (`rollout.base.within_budget`);
    one call per budget where the engine runs tools (a tool transcript is not cut)."""
    budget = {id(s): params.max_new_tokens - len(s.tokens) for _, s in items}
    groups: dict[int, list] = {}
    for item in items:  # one group at the largest budget, or one per budget
        key = budget[id(item[1])] if getattr(engine, "runs_tools", False) else max(budget.values())
        groups.setdefault(key, []).append(item)
    for most, group in sorted(groups.items()):
        outs = engine.generate([p + s.tokens for p, s in group], replace(params, max_new_tokens=most))
        for (_, s), cs in zip(group, outs):
            s.add(within_budget(cs[0], budget[id(s)], tokenizer))


class Interaction:
    """The feedback turn of `cfg` (`rollout.interaction`) for `tokenizer`: ConfigError, before any work,
    when `turn: chat_template` and the template cannot render a user message after an assistant one."""

    def __init__(self, cfg, tokenizer, template_kwargs: dict | None = None) -> None:
        self.cfg, self.tokenizer = cfg, tokenizer
        self.respond = FEEDBACK.get(cfg.feedback)
        if cfg.turn == "chat_template":
            turn = template_turn(tokenizer, template_kwargs, role="user", instead="a text holding {message}",
                                 where="rollout.interaction.turn=chat_template").replace("{output}", _MESSAGE)  # fmt: skip
        else:
            turn = cfg.turn
        self.before, self.after = turn.split(_MESSAGE)
        if cfg.feedback == "verifier" and not turn_tokens(tokenizer, "", cfg.message, ""):
            from reasonrl.config import ConfigError

            raise ConfigError(f"rollout.interaction.message={cfg.message!r}: the tokenizer writes no token for it "
                              "(characters it does not know are dropped)")  # fmt: skip
        stops = {tokenizer.eos_token_id, *(getattr(tokenizer, "stop_token_ids", None) or ())} - {None}
        self._stops = {t: tokenizer.decode([t], skip_special_tokens=False) for t in stops}
        self.classes = None  # verl's interaction classes answer the attempts (rollout.verl_interactions)
        if cfg.verl_config:
            from reasonrl.rollout.verl_interactions import VerlInteractions

            self.classes = VerlInteractions(cfg.verl_config, cfg.workers, cfg.timeout_s)

    def close(self) -> None:
        if self.classes is not None:
            self.classes.close()

    def feedback(self, last_token: int | None, message: str) -> list[int]:
        """The feedback turn's tokens after an attempt ending with `last_token`: where the attempt's stop
        token (the model's end of turn) is how the template closes the assistant's message, it is not
        written again. The message's own special tokens stay text."""
        before = self.before
        closing = self._stops.get(last_token)
        if closing and before.startswith(closing):
            before = before[len(closing) :]
        return turn_tokens(self.tokenizer, before, message, self.after)

    def answer(self, s: Attempts, message: str, params: SamplingParams) -> bool:
        """Append the feedback turn saying `message` to the sample `s` when it and another token fit in the
        budget; False (nothing appended) when they do not."""
        ids = self.feedback(s.tokens[-1] if s.tokens else None, message)
        if len(s.tokens) + len(ids) >= params.max_new_tokens:  # no room for another attempt
            return False
        s.between(ids)
        return True

    def next_round(self, engine, resumed: list, params: SamplingParams, round_: int) -> None:
        """The next attempts of the (group, opens think, Attempts) `resumed`, round `round_`'s seed."""
        seed = None if params.seed is None else params.seed + 104729 * round_
        next_attempts(engine, self.tokenizer, [(g.prompt_ids, s) for g, _, s in resumed],
                      replace(params, n=1, seed=seed))  # fmt: skip

    def run(self, engine, scorer, groups: list[RolloutGroup], params: SamplingParams,
            think_from_prompt: bool = True) -> None:  # fmt: skip
        """Replace each group's first attempts (unscored) with the completions of the whole interaction:
        every round scores the attempts still going (the routed verifier's correctness), appends the
        feedback to the wrong ones that stopped by themselves and have room, and generates their next
        attempts in one engine call per remaining budget (n=1 each)."""
        states = []
        for g in groups:
            opens = think_from_prompt and prompt_opens_think(self.tokenizer, g.problem)
            for c in g.completions:
                s = Attempts(first=c)
                s.add(c)
                states.append((g, opens, s))
        if self.classes is not None:  # verl's classes answer; their turn scores go with each completion
            from reasonrl.rollout.verl_interactions import run_classes

            ended = run_classes(self, engine, groups, params, states)
            it = iter(states)
            for g in groups:
                g.completions = [replace(s.completion(self.tokenizer), env_reward=ended[id(s)][0],
                                         env_reason=ended[id(s)][1]) for _, _, s in (next(it) for _ in g.completions)]  # fmt: skip
            return
        live = states
        for round_ in range(1, self.cfg.max_turns):
            live = [(g, o, s) for g, o, s in live if s.finish == "stop"]  # a cut attempt has no room left
            if not live:
                break
            texts = [scoring_text(s.texts[-1], o) for _, o, s in live]
            results, _ = scorer.score(texts, [g.problem for g, _, _ in live], all_terms=False)
            resumed = []
            for (g, o, s), res in zip(live, results):
                message = self.respond(g.problem, list(s.texts), res, self.cfg)
                if message is None:
                    continue
                if self.answer(s, message, params):
                    resumed.append((g, o, s))
            if not resumed:
                break
            self.next_round(engine, resumed, params, round_)
            live = resumed
        it = iter(states)
        for g in groups:
            g.completions = [next(it)[2].completion(self.tokenizer) for _ in g.completions]


def make_interaction(cfg, tokenizer) -> Interaction | None:
    """The run's `rollout.interaction` for `tokenizer` (with the prompts' chat-template arguments), or None."""
    if not cfg.rollout.interaction.enabled:
        return None
    return Interaction(cfg.rollout.interaction, tokenizer, dict(cfg.data.chat_template_kwargs))


def discount(groups: list[RolloutGroup], decay: float) -> None:
    """Each scored completion's reward x decay ** (its attempts - 1), in place."""
    for g in groups:
        g.rewards = [r * decay ** (c.turns - 1) for r, c in zip(g.rewards, g.completions)]


def interaction_metrics(groups: list[RolloutGroup]) -> dict[str, float]:
    """`rollout/interaction/*` of scored groups: attempts per completion, the share right at the first
    attempt (a retried completion's first was wrong), given feedback, and of those, right at the end."""
    pairs = [(c, r.correctness >= 1.0) for g in groups for c, r in zip(g.completions, g.results)]
    retried = [ok for c, ok in pairs if c.turns > 1]
    n = max(len(pairs), 1)
    return {
        "rollout/interaction/turns_mean": sum(c.turns for c, _ in pairs) / n,
        "rollout/interaction/first_correct": sum(ok for c, ok in pairs if c.turns == 1) / n,
        "rollout/interaction/retried_frac": len(retried) / n,
        "rollout/interaction/recovered_frac": sum(retried) / max(len(retried), 1),
    }


def check_interaction(cfg) -> None:
    """ConfigError naming the first `rollout.interaction` setting that cannot work."""
    from reasonrl.config import ConfigError

    i = cfg.rollout.interaction
    if not i.enabled:
        return
    if i.max_turns < 2:
        raise ConfigError(f"rollout.interaction.max_turns must be >= 2 (a first attempt and one after feedback), "
                          f"got {i.max_turns}")  # fmt: skip
    if not 0 < i.decay <= 1:
        raise ConfigError(f"rollout.interaction.decay must be in (0, 1], got {i.decay}")
    if i.feedback not in FEEDBACK.names():
        raise ConfigError(f"rollout.interaction.feedback={i.feedback!r} is not one of {', '.join(FEEDBACK.names())} "
                          "(a plugin registers its own in reasonrl.rollout.interaction.FEEDBACK)")  # fmt: skip
    if i.feedback == "verifier" and (not isinstance(i.message, str) or not i.message.strip()):
        raise ConfigError("rollout.interaction.message must be the feedback's text, got an empty one")
    if i.turn != "chat_template" and (not isinstance(i.turn, str) or i.turn.count(_MESSAGE) != 1):
        raise ConfigError(f"rollout.interaction.turn must be chat_template or a text holding {_MESSAGE} once, "
                          f"got {i.turn!r}")  # fmt: skip
    if cfg.algo.objective == "sft":
        raise ConfigError(
            "rollout.interaction.enabled with algo.objective=sft: SFT samples nothing to give feedback on"
        )
    if i.verl_config is not None:  # verl's classes: they import and construct, or the run stops here
        from reasonrl.rollout.verl_interactions import load_classes

        if i.workers < 1 or i.timeout_s <= 0:
            raise ConfigError(f"rollout.interaction.workers must be >= 1 and timeout_s > 0, got {i.workers} and "
                              f"{i.timeout_s}")  # fmt: skip
        try:
            load_classes(str(i.verl_config))
        except ValueError as e:
            raise ConfigError(f"rollout.interaction.verl_config: {e}") from None
    if cfg.algo.guidance.enabled:
        raise ConfigError("rollout.interaction.enabled with algo.guidance: a demonstration has no attempts to give "
                          "feedback on")  # fmt: skip
    from reasonrl.algorithms.advantages import ADVANTAGES

    if "baseline_rewards" in ADVANTAGES.get(cfg.algo.adv_estimator).needs:
        raise ConfigError(f"rollout.interaction.enabled with algo.adv_estimator={cfg.algo.adv_estimator}: its greedy "
                          "baseline is one attempt, the samples several")  # fmt: skip
    if cfg.rollout.max_new_tokens < 3:
        raise ConfigError(
            "rollout.interaction needs rollout.max_new_tokens >= 3 (an attempt, the feedback, another)"
        )
