"""Feedback between attempts (`rollout.interaction`): a wrong answer gets a user turn saying so and another
attempt in the same completion; the feedback's tokens take no loss, the verifiers read the last attempt
only, and each retry discounts the reward, so guessing through the choices does not pay.

A scripted engine stands in for the model: a sample's k-th attempt is fixed text (k = the feedback turns
already in its prompt), so every token of the result can be checked; the verifiers are the real ones."""

from __future__ import annotations

import copy

import pytest
import torch
from test_tool_rollouts import _ALPHABET, LOGP, Scripted
from test_tool_template_turns import CHATML

from reasonrl.config import ConfigError, InteractionConfig, load_config
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rewards.runner import RewardRunner
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.interaction import Interaction, check_interaction, discount, interaction_metrics
from reasonrl.rollout.scored import score_groups
from reasonrl.trainer.batching import build_batch
from reasonrl.types import Completion, Problem, RolloutGroup

MESSAGE = "Wrong, try again."
TURN = "\n{message}\n"


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(
        [_ALPHABET + " Wrong, try again. The answer is (A) (B) (C) (D) <|im_start|> <|im_end|>"], 300
    )


@pytest.fixture(scope="module")
def runner():
    with RewardRunner(workers=1, timeout_s=30) as r:
        yield r


def _interact(tok, runner, script, truth="42", source="math", max_new=300, n=1, engine=None, **cfg):
    cfg = {"enabled": True, "message": MESSAGE, "turn": TURN, **cfg}
    inter = Interaction(InteractionConfig(**cfg), tok)
    engine = engine or Scripted(tok, script, marker="Wrong")
    problem = Problem([{"role": "user", "content": "6*7?"}], truth, source)
    prompt = tok("Q", add_special_tokens=False)["input_ids"]
    params = SamplingParams(n=n, max_new_tokens=max_new, seed=1)
    (first,) = engine.generate([prompt], params)
    groups = [RolloutGroup(problem, prompt, first)]
    inter.run(engine, runner, groups, params, think_from_prompt=False)
    score_groups(groups, tok, runner, think_from_prompt=False)
    discount(groups, inter.cfg.decay)
    return groups[0], engine


def _ids(tok, text, split=False):
    return tok(text, add_special_tokens=False, split_special_tokens=split)["input_ids"]


def test_a_wrong_answer_gets_feedback_and_a_second_attempt_whose_answer_is_scored(tok, runner):
    g, engine = _interact(tok, runner, ["So \\boxed{41}.", "So \\boxed{42}."])
    (c,) = g.completions
    first, feedback, second = (
        _ids(tok, "So \\boxed{41}."),
        _ids(tok, "\nWrong, try again.\n"),
        _ids(tok, "So \\boxed{42}."),
    )
    assert c.token_ids == first + feedback + second
    assert c.tool_mask == [False] * len(first) + [True] * len(feedback) + [False] * len(second)
    assert c.sampler_logprobs == [LOGP] * len(first) + [0.0] * len(feedback) + [LOGP] * len(second)
    assert (
        c.text == "So \\boxed{41}.\nWrong, try again.\nSo \\boxed{42}." and c.model_text == "So \\boxed{42}."
    )
    assert c.turns == 2 and c.finish_reason == "stop"
    assert g.rewards == [0.5] and g.results[0].correctness == 1.0  # right at the 2nd attempt: x decay
    # the second attempt was generated from the prompt, the first attempt and the feedback, with the budget left
    assert [(k, p.n, p.max_new_tokens) for k, p in engine.calls] == [
        (1, 1, 300),
        (1, 1, 300 - len(first + feedback)),
    ]
    m = interaction_metrics([g])
    assert m == {"rollout/interaction/turns_mean": 2.0, "rollout/interaction/first_correct": 0.0,
                 "rollout/interaction/retried_frac": 1.0, "rollout/interaction/recovered_frac": 1.0}  # fmt: skip


def test_a_right_first_answer_is_left_as_it_is(tok, runner):
    g, engine = _interact(tok, runner, ["So \\boxed{42}.", "never"], n=2)
    assert len(engine.calls) == 1 and [c.turns for c in g.completions] == [1, 1]
    assert all(c.tool_mask is None and c.text == "So \\boxed{42}." for c in g.completions)
    assert g.rewards == [1.0, 1.0]
    assert interaction_metrics([g])["rollout/interaction/first_correct"] == 1.0


def test_attempts_stop_at_max_turns_and_only_the_last_answer_counts(tok, runner):
    g, engine = _interact(tok, runner, ["\\boxed{1}", "\\boxed{2}", "\\boxed{3}", "\\boxed{42}"], max_turns=3)
    (c,) = g.completions
    assert c.turns == 3 and len(engine.calls) == 3 and c.model_text == "\\boxed{3}" and g.rewards == [0.0]
    assert c.text.count("Wrong") == 2  # no feedback after the last attempt
    # an earlier right answer followed by a last wrong one does not count ... (it would have ended the
    # interaction; here the verifier is told the truth is 1, so the first attempt is right and stops)
    g1, _ = _interact(tok, runner, ["\\boxed{1}", "\\boxed{2}"], truth="1")
    assert g1.completions[0].turns == 1 and g1.rewards == [1.0]
    # ... and a last attempt with no answer scores 0 though an earlier one had one
    g2, _ = _interact(tok, runner, ["\\boxed{41}", "I give up"])
    assert g2.completions[0].model_text == "I give up" and g2.rewards == [0.0]
    assert g2.results[0].reason == "no_answer"


def test_guessing_through_the_choices_pays_less_than_answering(tok, runner):
    """The adversary: a policy that cycles through A, B, C, D ends on the right letter within four
    attempts. Undiscounted (verl's), that scores 1 on every question; with decay 0.5 it averages
    (1 + 0.5 + 0.25 + 0.125) / 4 over the four possible answers, and answering right at once scores 1."""
    guesses = ["The answer is (A)", "The answer is (B)", "The answer is (C)", "The answer is (D)"]
    for decay, want in ((0.5, 0.46875), (1.0, 1.0)):
        rewards = [_interact(tok, runner, guesses, truth=t, source="stem__gpqa", max_turns=4, decay=decay)[0].rewards[0]
                   for t in "ABCD"]  # fmt: skip
        assert sum(rewards) / 4 == pytest.approx(want)
    assert _interact(tok, runner, ["The answer is (C)"], truth="C", source="stem__gpqa", max_turns=4)[
        0
    ].rewards == [1.0]


def test_no_feedback_after_a_cut_attempt_or_where_it_would_not_fit(tok, runner):
    first = _ids(tok, "So \\boxed{41}.")
    g, engine = _interact(tok, runner, ["So \\boxed{41}.", "x"], max_new=len(first) - 1)  # cut at the budget
    assert (
        g.completions[0].finish_reason == "length" and g.completions[0].turns == 1 and len(engine.calls) == 1
    )
    feedback = _ids(tok, "\nWrong, try again.\n")
    g, engine = _interact(tok, runner, ["So \\boxed{41}.", "x"], max_new=len(first) + len(feedback))
    assert g.completions[0].turns == 1 and g.completions[0].finish_reason == "stop" and len(engine.calls) == 1
    assert g.completions[0].token_ids == first


def test_the_feedback_takes_no_loss(tok, runner):
    g, _ = _interact(tok, runner, ["So \\boxed{41}.", "So \\boxed{42}."])
    g.rewards = [1.0]
    batch = build_batch([g], tok.pad_token_id)
    (c,) = g.completions
    assert batch.mask[0, : len(c.token_ids)].tolist() == [not m for m in c.tool_mask]
    assert batch.sampler_logprobs[0, : len(c.token_ids)][torch.tensor(c.tool_mask)].abs().sum() == 0


class _EndsTurn(Scripted):
    """Each attempt ends with the end-of-turn token, as a chat model's does."""

    def generate(self, prompts, params):
        out = super().generate(prompts, params)
        end = self.tok.convert_tokens_to_ids("<|im_end|>")
        return [[Completion(c.token_ids + [end], c.text, c.sampler_logprobs + [LOGP], c.finish_reason) for c in cs]
                for cs in out]  # fmt: skip


def test_the_chat_template_renders_the_feedback_as_a_user_turn(tok, runner):
    """ChatML: the attempt's own <|im_end|> closes the assistant's message (not written twice), then the
    user's turn with the message and the assistant's turn opening again."""
    chat = copy.deepcopy(tok)
    chat.chat_template = CHATML
    chat.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    chat.eos_token = "<|im_end|>"
    engine = _EndsTurn(chat, ["So \\boxed{41}.", "So \\boxed{42}."], marker="Wrong")
    g, _ = _interact(chat, runner, None, engine=engine, turn="chat_template")
    (c,) = g.completions
    rendered = chat.decode(c.token_ids, skip_special_tokens=False)
    assert rendered == ("So \\boxed{41}.<|im_end|>\n<|im_start|>user\nWrong, try again.<|im_end|>\n"
                        "<|im_start|>assistant\nSo \\boxed{42}.<|im_end|>")  # fmt: skip
    assert rendered.count("<|im_end|>") == 3 and g.rewards == [0.5]
    # the message's own special-token characters stay text
    inter = Interaction(InteractionConfig(enabled=True, message="<|im_end|>"), chat)
    ids = inter.feedback(chat.convert_tokens_to_ids("<|im_end|>"), inter.cfg.message)
    assert ids.count(chat.convert_tokens_to_ids("<|im_end|>")) == 1  # the template's own, after the message


def test_a_template_with_no_user_turn_after_an_assistant_one_is_refused(tok):
    strict = copy.deepcopy(tok)
    strict.chat_template = "{{ raise_exception('no') }}"
    with pytest.raises(
        ConfigError, match=r"rollout.interaction.turn=chat_template: .*cannot render a user message"
    ):
        Interaction(InteractionConfig(enabled=True), strict)


@pytest.mark.parametrize(("override", "match"), [
    ("rollout.interaction.max_turns=1", "max_turns must be >= 2"),
    ("rollout.interaction.decay=0", r"decay must be in \(0, 1\]"),
    ("rollout.interaction.message=' '", "message must be the feedback's text"),
    ("rollout.interaction.turn=no_placeholder", "chat_template or a text holding {message} once"),
    ("algo.adv_estimator=remax", "greedy baseline is one attempt"),
    ("algo.guidance.enabled=true", "a demonstration has no attempts"),
])  # fmt: skip
def test_settings_that_cannot_work_are_refused(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config("demo", ["rollout.interaction.enabled=true", override])
    check_interaction(load_config("demo", ["rollout.interaction.enabled=true"]))  # the defaults are fine


def test_a_plugins_feedback_answers_the_attempts(tok, runner):
    """A registered feedback (a plugin's) gets the problem, the attempts so far and the last one's verifier
    result, and says what the user says, or None to end; its options come from the recipe."""
    from reasonrl.rollout.interaction import FEEDBACK

    seen = []

    @FEEDBACK.register("test_hint")
    def hint(problem, attempts, result, cfg):
        seen.append((list(attempts), result.extracted))
        if result.correctness >= 1.0:
            return None
        return (
            cfg.options["up"] if float(result.extracted) < float(problem.ground_truth) else "Wrong: go lower."
        )

    try:
        g, _ = _interact(tok, runner, ["\\boxed{41}", "\\boxed{43}", "\\boxed{42}"], max_turns=3,
                         feedback="test_hint", options={"up": "Wrong: go higher."})  # fmt: skip
        assert (
            g.completions[0].text
            == "\\boxed{41}\nWrong: go higher.\n\\boxed{43}\nWrong: go lower.\n\\boxed{42}"
        )
        assert seen == [(["\\boxed{41}"], "41"), (["\\boxed{41}", "\\boxed{43}"], "43")]
        assert g.rewards == [0.25]
        with pytest.raises(ConfigError, match="feedback='nobody' is not one of .*test_hint.*verifier"):
            load_config("demo", ["rollout.interaction.enabled=true", "rollout.interaction.feedback=nobody"])
    finally:
        FEEDBACK._entries.pop("test_hint", None)


def test_a_message_the_tokenizer_writes_nothing_for_is_refused():
    small = build_tokenizer(["1+1=2"], 40)  # knows digits and a few signs: every letter would be dropped
    with pytest.raises(ConfigError, match="message='Wrong': the tokenizer writes no token for it"):
        Interaction(InteractionConfig(enabled=True, message="Wrong", turn="{message}"), small)


def test_next_attempts_come_from_one_engine_call_each_cut_at_its_own_budget(tok, runner):
    """Two samples whose first attempts differ in length have different budgets left: one call at the
    larger, the other's attempt cut at its own (ending "length"), its log-probs cut alike."""
    short, long_ = "\\boxed{1}", "\\boxed{1} and so on and on"

    class Two(Scripted):
        def generate(self, prompts, params):
            if len(self.calls) == 0:  # the first attempts: one short, one long
                self.calls.append((len(prompts), params))
                return [
                    [
                        Completion(_ids(self.tok, t), t, [LOGP] * len(_ids(self.tok, t)))
                        for t in (short, long_)
                    ]
                ]
            return super().generate(prompts, params)

    retry = "\\boxed{2} " * 30  # longer than either budget left
    max_new = len(_ids(tok, long_)) + len(_ids(tok, "\nWrong, try again.\n")) + 5
    g, engine = _interact(tok, runner, None, max_new=max_new, engine=Two(tok, ["-", retry], marker="Wrong"))
    assert len(engine.calls) == 2 and engine.calls[1][0] == 2  # both next attempts in one call
    a, b = g.completions
    assert len(a.token_ids) == len(b.token_ids) == max_new and a.finish_reason == b.finish_reason == "length"
    assert len(a.sampler_logprobs) == len(b.sampler_logprobs) == max_new and a.turns == b.turns == 2
