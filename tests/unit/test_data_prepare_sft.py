"""The `sft` converter: conversations, TRL's prompt-completion rows and flat prompt / response rows become
rows whose response is `extra_info.response` (what algo.objective=sft trains on), the final answer the
ground truth; rows it cannot use are named with the field. GSM8K rows keep verl's worked answer."""

from __future__ import annotations

import pytest
from _prepare import convert_or_error

from reasonrl.trainer.sft import response_of

USER, SYSTEM = {"role": "user", "content": "What is 6*7?"}, {"role": "system", "content": "Be brief."}
ASSISTANT = {"role": "assistant", "content": "6*7=42, so \\boxed{42}."}


@pytest.mark.parametrize(("row", "prompt", "response"), [
    # the last assistant message is the response; the system message and earlier turns stay in the prompt
    ({"messages": [SYSTEM, USER, {"role": "assistant", "content": "first"}, {"role": "user", "content": "again"},
                   ASSISTANT]}, [SYSTEM, USER, {"role": "assistant", "content": "first"},
                                 {"role": "user", "content": "again"}], ASSISTANT["content"]),
    ({"prompt": [USER], "completion": [ASSISTANT]}, [USER], ASSISTANT["content"]),  # TRL conversational
    ({"prompt": "What is 6*7?", "completion": "42"}, [USER], "42"),  # TRL standard
    ({"question": "What is 6*7?", "response": "42"}, [USER], "42"),  # OpenRLHF input / output keys
    ({"problem": "What is 6*7?", "solution": "42"}, [USER], "42"),
    ({"instruction": "Multiply.", "input": "6 and 7", "output": "42"},  # Alpaca: the input after the instruction
     [{"role": "user", "content": "Multiply.\n\n6 and 7"}], "42"),
])  # fmt: skip
def test_each_shape_gives_the_prompt_and_the_response(tmp_path, row, prompt, response):
    (p,) = convert_or_error(tmp_path, "sft", [{**row, "answer": 42}])
    assert p.prompt == prompt and response_of(p, "extra_info.response") == response
    assert p.ground_truth == "42" and p.data_source == "math" and p.uid == "sft/0"


def test_options_name_the_fields_and_the_source(tmp_path):
    rows = [{"q": "What is 6*7?", "a": "6*7=42", "final": "42", "id": "r7"}]
    (p,) = convert_or_error(tmp_path, "sft", rows, {"prompt": "q", "response": "a", "answer": "final",
                                                    "dataset": "mine", "data_source": "openai/gsm8k"})  # fmt: skip
    assert (p.user_text, p.extra_info["response"], p.ground_truth, p.uid) == (
        "What is 6*7?",
        "6*7=42",
        "42",
        "mine/r7",
    )
    assert p.data_source == "openai/gsm8k"


@pytest.mark.parametrize(("row", "error"), [
    ({"messages": [USER]}, "field 'messages': has no assistant message"),
    ({"messages": [USER, ASSISTANT, USER]}, "field 'messages': ends with a 'user' message after the last assistant"),
    ({"messages": [ASSISTANT]}, "field 'messages': has no message before the assistant's"),
    ({"messages": [USER, {"role": "assistant", "content": " "}]}, "the last assistant message is empty"),
    ({"messages": [USER, {"role": "assistant"}]}, "field 'messages': message 1 must be {role, content}"),
    ({"messages": "hi"}, "has no assistant message"),
    ({"question": "What?"}, "field 'response': missing (or 'output', 'solution', 'generation')"),
    ({"response": "42"}, "field 'prompt': "),
    ({"prompt": "x", "response": "y", "answer": None}, "field 'answer': missing"),  # validation could not score it
])  # fmt: skip
def test_rows_it_cannot_use_are_named_with_the_field(tmp_path, row, error):
    out = convert_or_error(tmp_path, "sft", [{"answer": "42", **row}])
    assert isinstance(out, str) and error in out, out


def test_gsm8k_rows_keep_verls_worked_answer(tmp_path):
    answer = "Natalia sold 48/2 = 24 clips in May.\n#### 72"
    (p,) = convert_or_error(tmp_path, "gsm8k", [{"question": "How many clips?", "answer": answer}])
    assert p.ground_truth == "72" and response_of(p, "extra_info.answer") == answer
    assert p.extra_info["question"] == "How many clips?"


def test_turns_all_keeps_every_assistant_turn_after_the_prompt(tmp_path):
    tool = {"role": "tool", "content": "42"}
    call = {"role": "assistant", "content": "<tool_call>6*7</tool_call>"}
    rows = [{"messages": [SYSTEM, USER, call, tool, ASSISTANT], "answer": "42"},
            {"prompt": [USER], "completion": [call, tool, ASSISTANT], "answer": "42"}]  # fmt: skip
    for p in convert_or_error(tmp_path, "sft", rows, {"turns": "all"}):
        assert p.prompt[-1] == USER and response_of(p, "extra_info.response") == [call, tool, ASSISTANT]
    out = convert_or_error(
        tmp_path, "sft", [{"messages": [ASSISTANT, USER, ASSISTANT], "answer": "1"}], {"turns": "all"}
    )
    assert "has no message before the assistant's" in out
    assert "option turns must be last or all" in convert_or_error(tmp_path, "sft", rows, {"turns": "some"})


def test_the_answer_may_come_from_the_response_itself(tmp_path):
    trace = {"role": "assistant", "content": "<think>maybe \\boxed{41}? no</think> So it is \\boxed{42}."}
    rows = [
        {"messages": [USER, trace]},
        {"messages": [USER, {"role": "assistant", "content": "x <answer>7</answer>"}]},
    ]
    a, b = convert_or_error(tmp_path, "sft", rows, {"answer": "from_response"})
    assert (a.ground_truth, b.ground_truth) == ("42", "7")  # after the thinking, as the verifiers read it
    (c,) = convert_or_error(tmp_path, "sft", [{"messages": [USER, {"role": "assistant", "content": "a"}, USER, trace]}],
                            {"answer": "from_response", "turns": "all"})  # fmt: skip
    assert c.ground_truth == "42"  # the last assistant turn's
    out = convert_or_error(tmp_path, "sft", [{"messages": [USER, {"role": "assistant", "content": "no answer"}]}],
                           {"answer": "from_response"})  # fmt: skip
    assert "field 'response': states no final answer" in out
    out = convert_or_error(tmp_path, "sft", [{"messages": [USER, ASSISTANT]}])
    assert (
        "field 'answer': missing (the final answer validation checks" in out and "answer=from_response" in out
    )
