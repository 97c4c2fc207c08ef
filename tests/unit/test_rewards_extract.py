"""Answer extraction: boxed with brace matching, tags, ####, "Answer:", last number, think handling."""

from __future__ import annotations

import pytest

from reasonrl.rewards.extract import (
    DEFAULT_MODES,
    answer_colon,
    answer_region,
    answer_tag,
    boxed_all,
    extract,
    final_answer_tag,
    gsm8k_answer,
    last_boxed,
    last_number,
)

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"so \boxed{42}.", ["42"]),
        (r"\boxed{\frac{1}{2}}", [r"\frac{1}{2}"]),
        (r"\boxed{\{1, 2\}} and \fbox{3}", [r"\{1, 2\}", "3"]),
        (r"\boxed{a^{2}+\sqrt{b_{1}}}", [r"a^{2}+\sqrt{b_{1}}"]),
        (r"\boxed 7 then \boxed{8}", ["7", "8"]),
        (r"\boxed 123456789 then \boxed{8}", ["123456789", "8"]),  # a token longer than the command
        (r"the answer is \boxed", []),  # adversarial: the command at the very end
        (r"\boxed{1} \boxed{2} \boxed{3}", ["1", "2", "3"]),
        (r"\boxed{1}\boxed{2}", ["1", "2"]),  # adjacent boxes: a hedge must see both
        (r"\boxed{unclosed", []),  # adversarial: unbalanced brace
        (r"\boxed{1} \boxed{2", ["1"]),
        (r"\boxed{}", [""]),
        ("no box here", []),
        (r"\boxedx{5}", []),  # not the \boxed command followed by a group
        (r"\boxed{a \} b} \boxed{\{1, 2\}}", [r"a \} b", r"\{1, 2\}"]),  # escaped braces are not the group's
    ],
)
def test_boxed_all(text, expected):
    assert boxed_all(text) == expected


def test_final_answer_tag_is_the_last_pair_and_what_follows_it():
    assert final_answer_tag("<answer>1</answer> x <answer> 2 </answer>\n tail") == ("2", "\n tail")
    assert final_answer_tag("<answer>1") == (None, "")


def test_last_boxed_is_last():
    assert last_boxed(r"\boxed{1} text \boxed{2}") == "2"
    assert last_boxed("none") is None


@pytest.mark.parametrize(
    "text, region",
    [
        ("<think>a</think>b", "b"),
        ("a</think>b", "b"),  # template pre-filled <think>
        ("<think>a</think>b<think>c</think>d", "d"),
        ("<think>only reasoning, never closed", ""),  # adversarial: answer in think only
        ("plain", "plain"),
        ("</think>42", "42"),  # the template opened the block and the model closed it at once
    ],
)
def test_answer_region(text, region):
    assert answer_region(text) == region


def test_every_verifier_shares_one_think_policy():
    # code, procedural tasks and math all ignore reasoning and score nothing in an unclosed block
    from reasonrl.rewards import score
    from reasonrl.types import Problem

    code = Problem([{"role": "user", "content": "f"}], {"functional": "assert f(2) == 4"}, "codegen", "code")
    good = "```python\ndef f(x):\n    return 2 * x\n```"
    assert score("<think>plan</think>" + good, code).score == 1.0
    assert score("<think>plan " + good, code).score == 0.0  # the code sits in an unclosed think block
    arith = Problem([{"role": "user", "content": "1+2"}], "3", "reasonrl/arithmetic", "math")
    assert score("<think>1+2</think><answer>3</answer>", arith).score == 1.0
    assert score("<think>1+2 <answer>3</answer>", arith).score == 0.0
    math = Problem([{"role": "user", "content": "1+2"}], "3", "math", "math")
    assert score("<think>1+2</think>\\boxed{3}", math).score == 1.0
    assert score("<think>1+2 = \\boxed{3}", math).score == 0.0


@pytest.mark.parametrize(
    "fn, text, expected",
    [
        (answer_tag, "<answer> 5 </answer>", "5"),
        (answer_tag, "<answer>1</answer><ANSWER>2</ANSWER>", "2"),
        (answer_tag, "<answer>1", None),
        (gsm8k_answer, "work\n#### 72", "72"),
        (gsm8k_answer, "#### 1\n#### 2,000", "2,000"),
        (gsm8k_answer, "####", None),
        (gsm8k_answer, "####\nwork\n#### 5", "5"),  # an empty first marker does not hide the last
        (gsm8k_answer, "#### 5\nwait\n####", None),  # the last marker is empty: no answer
        (answer_colon, "Answer: 12.", "12"),
        (answer_colon, "Final Answer: The final answer is 3. I hope", "The final answer is 3. I hope"),
        (answer_colon, "so the answer is 9", "9"),
        (answer_colon, "the answer:", None),
        (answer_colon, "Answer: 1\nno, wait.\nAnswer: 2", "2"),  # the last one counts
        (answer_colon, "Answer:\nwork\nAnswer: **5**.", "5"),
        (answer_colon, "Answer: 5\nAnswer:", None),
        (last_number, "1, 2, then 3,000.5 ok", "3000.5"),
        (last_number, "none", None),
        (last_number, "-.5", "-.5"),
    ],
)
def test_single_extractors(fn, text, expected):
    assert fn(text) == expected


@pytest.mark.parametrize(
    "text, modes, answer, mode",
    [
        (r"<answer>3</answer> \boxed{4}", DEFAULT_MODES, "4", "boxed"),
        (r"<answer>3</answer> \boxed{4}", ("answer_tag", "boxed"), "3", "answer_tag"),
        ("#### 5\nAnswer: 6", ("gsm8k", "answer_colon"), "5", "gsm8k"),
        ("x = 5 then 7", DEFAULT_MODES, "7", "last_number"),
        (r"<think>\boxed{1}</think> The answer is 2", DEFAULT_MODES, "2", "answer_colon"),
    ],
)
def test_extract_modes(text, modes, answer, mode):
    got = extract(text, modes)
    assert (got.answer, got.mode) == (answer, mode)


def test_extract_ignores_think_block_answers():
    assert extract(r"<think>\boxed{1}</think>") is None
    assert extract(r"<think>\boxed{1}") is None
    got = extract(r"<think>\boxed{1}", think=False)
    assert got is not None and got.answer == "1"


def test_extract_rejects_unknown_mode():
    with pytest.raises(ValueError, match="unknown extraction mode"):
        extract("x", ("boxed", "magic"))


def test_extract_huge_input_is_linear():
    text = "{" * 200_000 + r"\boxed{" + "}" * 10
    assert boxed_all(text) == [""]
    assert last_number("9 " * 100_000) == "9"
