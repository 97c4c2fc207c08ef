"""Procedural tasks (arithmetic, countdown) and their verifiers.

Generators: seeded reproducibility, the difficulty knob, the held-out split, and that every stored
solution scores 1.0. Verifiers: table-driven with adversarial rows (code injection, huge powers,
wrong number multisets, think blocks, several answer tags); each row must return fast and never raise.
"""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from reasonrl.data.tasks import TASKS, generate, is_heldout
from reasonrl.data.tasks.arithmetic import solve_steps
from reasonrl.rewards.verifiers.procedural import arithmetic, countdown, parse_expression
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(60)

# ---------------------------------------------------------------- generators


@pytest.mark.parametrize("task", sorted(TASKS))
def test_same_seed_same_problems_other_seed_others(task):
    a = generate(task, 50, seed=3, difficulty=2)
    b = generate(task, 50, seed=3, difficulty=2)
    c = generate(task, 50, seed=4, difficulty=2)
    assert a == b
    assert [p.user_text for p in a] != [p.user_text for p in c]
    assert len({p.uid for p in a}) == 50  # uids are unique within a draw


def _operands(problem: Problem) -> list[int]:
    if problem.data_source == "reasonrl/arithmetic":
        return [int(x) for x in re.findall(r"\d+", problem.extra_info["expression"])]
    return list(problem.ground_truth["numbers"])


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("difficulty", [1, 2, 3, 5])
def test_difficulty_sets_operand_count(task, difficulty):
    for p in generate(task, 30, seed=0, difficulty=difficulty):
        nums = _operands(p)
        assert len(nums) == difficulty + 1, p.user_text
        assert p.extra_info["difficulty"] == difficulty
        assert all(n >= 1 for n in nums)
        if task in ("arithmetic", "addsub"):
            assert max(nums) <= (9 if difficulty <= 2 else 19)
            if task == "addsub":
                assert "*" not in p.user_text
        else:
            assert max(nums) <= difficulty * 5 + 5
            # the prompt lists exactly the numbers of the ground truth
            assert p.user_text == f"Use {' '.join(map(str, nums))} to make {p.ground_truth['target']}"


@pytest.mark.parametrize("task", sorted(TASKS))
def test_bad_difficulty_and_task_rejected(task):
    with pytest.raises(ValueError, match="difficulty must be >= 1"):
        generate(task, 1, seed=0, difficulty=0)
    with pytest.raises(ValueError, match="known: addsub, arithmetic, countdown"):
        generate("sudoku", 1, seed=0)
    with pytest.raises(ValueError, match="split must be"):
        generate(task, 1, seed=0, split="val")


@pytest.mark.parametrize("task,difficulty", [("arithmetic", 1), ("arithmetic", 2), ("countdown", 2)])
def test_heldout_split_is_disjoint(task, difficulty):
    train = generate(task, 300, seed=0, difficulty=difficulty, split="train")
    test = generate(task, 40, seed=1, difficulty=difficulty, split="test")
    assert len(train) == 300 and len(test) == 40
    assert not any(is_heldout(p) for p in train)
    assert all(is_heldout(p) for p in test)
    assert not {p.user_text for p in train} & {p.user_text for p in test}
    # the split is a property of the prompt text, not of the seed or of the draw
    again = generate(task, 300, seed=9, difficulty=difficulty, split="train")
    assert not {p.user_text for p in again} & {p.user_text for p in test}


def test_solve_steps_hand_computed():
    # 7+3*4-5: multiply first, then left to right
    assert solve_steps([7, 3, 4, 5], ["+", "*", "-"]) == (["3*4=12", "7+12=19", "19-5=14"], 14)
    assert solve_steps([2, 3, 4], ["*", "*"]) == (["2*3=6", "6*4=24"], 24)
    assert solve_steps([1, 9], ["-"]) == (["1-9=-8"], -8)


def test_arithmetic_ground_truth_matches_expression():
    for p in generate("arithmetic", 100, seed=5, difficulty=3):
        nums = [int(x) for x in re.findall(r"\d+", p.extra_info["expression"])]
        ops = re.findall(r"[+\-*]", p.extra_info["expression"])
        assert p.user_text == p.extra_info["expression"] + "="
        assert str(solve_steps(nums, ops)[1]) == p.ground_truth


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_every_arithmetic_solution_scores_one(difficulty):
    for p in generate("arithmetic", 200, seed=difficulty, difficulty=difficulty):
        r = arithmetic(p.extra_info["solution"], p)
        assert r.score == 1.0, (p.user_text, p.extra_info["solution"], r.info)


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_every_countdown_solution_scores_one(difficulty):
    for p in generate("countdown", 200, seed=difficulty, difficulty=difficulty):
        assert p.ground_truth["target"] > 0
        r = countdown(p.extra_info["solution"], p)
        assert r.score == 1.0, (p.user_text, p.extra_info["solution"], r.info)


# ---------------------------------------------------------------- verifiers

ARITH = Problem(prompt=[{"role": "user", "content": "3*4-5="}], ground_truth="7", data_source="x")
ARITH_NEG = Problem(prompt=[{"role": "user", "content": "3-9="}], ground_truth="-6", data_source="x")

ARITH_ROWS = [
    # (response, problem, score, reason)
    ("3*4=12,12-5=7 <answer>7</answer>", ARITH, 1.0, "correct"),
    ("<answer> 7 </answer>", ARITH, 1.0, "correct"),
    ("<answer>\n7\n</answer>", ARITH, 1.0, "correct"),
    ("<ANSWER>7</ANSWER>", ARITH, 1.0, "correct"),
    ("<answer>+7</answer>", ARITH, 1.0, "correct"),
    ("<answer>007</answer>", ARITH, 1.0, "correct"),
    ("<answer>8</answer>", ARITH, 0.0, "wrong"),
    ("<answer>-7</answer>", ARITH, 0.0, "wrong"),
    ("<answer>-6</answer>", ARITH_NEG, 1.0, "correct"),
    ("<answer>- 6</answer>", ARITH_NEG, 1.0, "correct"),  # spaces are dropped
    ("<answer>6</answer>", ARITH_NEG, 0.0, "wrong"),
    ("7", ARITH, 0.0, "no_answer"),
    ("", ARITH, 0.0, "no_answer"),
    ("<answer>7", ARITH, 0.0, "no_answer"),
    ("<answer>7</answer >", ARITH, 0.0, "no_answer"),
    # several answer tags: the last one wins
    ("<answer>7</answer> no wait <answer>8</answer>", ARITH, 0.0, "wrong"),
    ("<answer>8</answer> no wait <answer>7</answer>", ARITH, 1.0, "correct"),
    # an answer only inside the think block does not count
    ("<think><answer>7</answer></think>", ARITH, 0.0, "no_answer"),
    ("<think><answer>7</answer></think><answer>8</answer>", ARITH, 0.0, "wrong"),
    ("<think><answer>8</answer></think> <answer>7</answer>", ARITH, 1.0, "correct"),
    # non-integers and expressions are not evaluated
    ("<answer>7.0</answer>", ARITH, 0.0, "not_an_integer"),
    ("<answer>7/1</answer>", ARITH, 0.0, "not_an_integer"),
    ("<answer>3*4-5</answer>", ARITH, 0.0, "not_an_integer"),
    ("<answer>7e0</answer>", ARITH, 0.0, "not_an_integer"),
    ("<answer>0x7</answer>", ARITH, 0.0, "not_an_integer"),
    ("<answer>seven</answer>", ARITH, 0.0, "not_an_integer"),
    ("<answer>__import__('os').system('x')</answer>", ARITH, 0.0, "not_an_integer"),
    ("<answer>7\x00</answer>", ARITH, 0.0, "not_an_integer"),
    ("<answer>\ud800</answer>", ARITH, 0.0, "not_an_integer"),
    ("<answer>7 0</answer>", ARITH, 0.0, "wrong"),  # "70"
    ("<answer>" + "9" * 5000 + "</answer>", ARITH, 0.0, "not_an_integer"),  # over int's digit limit
    ("<answer>" + "9" * 4000 + "</answer>", ARITH, 0.0, "wrong"),
    ("x" * 200_000 + "<answer>7</answer>", ARITH, 1.0, "correct"),
]


@pytest.mark.parametrize("response,problem,score,reason", ARITH_ROWS, ids=range(len(ARITH_ROWS)))
def test_arithmetic_verifier(response, problem, score, reason):
    r = arithmetic(response, problem)
    assert (r.score, r.reason) == (score, reason)


CD = Problem(
    prompt=[{"role": "user", "content": "Use 3 4 5 to make 17"}],
    ground_truth={"target": 17, "numbers": [3, 4, 5]},
    data_source="reasonrl/countdown",
)
CD_DIV = Problem(
    prompt=[{"role": "user", "content": "Use 6 3 5 to make 7"}],
    ground_truth={"target": 7, "numbers": [6, 3, 5]},
    data_source="reasonrl/countdown",
)
CD_DUP = Problem(  # the same number twice, ground truth stored as strings (as after a JSON round trip)
    prompt=[{"role": "user", "content": "Use 2 2 3 to make 12"}],
    ground_truth={"target": "12", "numbers": ["2", "2", "3"]},
    data_source="reasonrl/countdown",
)

CD_ROWS = [
    # (response, problem, score, reason prefix)
    ("<answer>3*4+5</answer>", CD, 1.0, "correct"),
    ("<answer>5+4*3</answer>", CD, 1.0, "correct"),
    ("<answer>(3*4)+5</answer>", CD, 1.0, "correct"),
    ("<answer> 3 * 4 + 5 \n</answer>", CD, 1.0, "correct"),
    ("<answer>3*4*5</answer>", CD, 0.0, "wrong"),
    ("<answer>6/3+5</answer>", CD_DIV, 1.0, "correct"),
    ("<answer>5+6/3</answer>", CD_DIV, 1.0, "correct"),
    ("<answer>(6+3)/5</answer>", CD_DIV, 0.0, "wrong"),  # 9/5 exactly, not rounded
    ("<answer>2*2*3</answer>", CD_DUP, 1.0, "correct"),
    ("<answer>2*6</answer>", CD_DUP, 0.0, "wrong_numbers"),
    ("<answer>4*3</answer>", CD_DUP, 0.0, "wrong_numbers"),
    # wrong multiset of numbers
    ("<answer>17</answer>", CD, 0.0, "wrong_numbers"),
    ("<answer>3*4+5+0</answer>", CD, 0.0, "wrong_numbers"),
    ("<answer>3*4+5*1</answer>", CD, 0.0, "wrong_numbers"),
    ("<answer>3*4+5+5-5</answer>", CD, 0.0, "wrong_numbers"),  # reuse of a number
    ("<answer>4*4+1</answer>", CD, 0.0, "wrong_numbers"),
    ("<answer>12+5</answer>", CD, 0.0, "wrong_numbers"),
    ("<answer>34-17</answer>", CD, 0.0, "wrong_numbers"),  # digits glued together
    ("<answer>3_4+5</answer>", CD, 0.0, "wrong_numbers"),
    # unary minus: allowed, the literal still counts as the given number
    ("<answer>-(-3*4)+5</answer>", CD, 1.0, "correct"),
    ("<answer>--3*4+5</answer>", CD, 1.0, "correct"),
    ("<answer>5-(-3)*4</answer>", CD, 1.0, "correct"),
    ("<answer>-3*4+5</answer>", CD, 0.0, "wrong"),
    ("<answer>-(3*4+5)</answer>", CD, 0.0, "wrong"),
    ("<answer>+3*4+5</answer>", CD, 0.0, "invalid_expression"),  # unary plus not whitelisted
    # several answer tags (last wins), think blocks, missing tags
    ("<answer>3*4*5</answer><answer>3*4+5</answer>", CD, 1.0, "correct"),
    ("<answer>3*4+5</answer><answer>1</answer>", CD, 0.0, "wrong_numbers"),
    ("<think><answer>3*4+5</answer></think>", CD, 0.0, "no_answer"),
    ("<think><answer>3*4+5</answer></think>so <answer>3+4+5</answer>", CD, 0.0, "wrong"),
    ("<think>hmm</think><answer>3*4+5</answer>", CD, 1.0, "correct"),
    ("3*4+5", CD, 0.0, "no_answer"),
    ("<answer></answer>", CD, 0.0, "invalid_expression"),
    # code and other Python that must never be evaluated
    ("<answer>__import__('os').system('x')</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>().__class__</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>().__class__.__bases__[0].__subclasses__()</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>(17).real</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>abs(17)</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>lambda: 17</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>x</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>target</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>[*range(9**9)]</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>'17'</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>f'{17}'</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>True*17</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3.0*4+5</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3*4+5j</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>(3*4+5) if 1 else 0</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3*4+5 and 1</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3*4+(5:=5)</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3*4+5;1</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3*4+5,</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3*4+5=17</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3@4+5</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3*4+5//1</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3*4+5%9</answer>", CD, 0.0, "invalid_expression"),
    # huge powers are rejected without being computed
    ("<answer>2**99999999</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>9**9**9</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3**4+5</answer>", CD, 0.0, "invalid_expression"),
    # huge literals, long and deep strings, bad characters
    ("<answer>" + "1" * 30 + "</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3*4+5+" + "9" * 13 + "</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>" + "1+" * 5000 + "1</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>" + "(" * 5000 + "</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>" + "(" * 99 + "3*4+5" + ")" * 99 + "</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>" + "-" * 190 + "3*4+5</answer>", CD, 1.0, "correct"),  # 190 negations: even
    ("<answer>3*4+5\x00</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>3*4\ud800+5</answer>", CD, 0.0, "invalid_expression"),  # lone surrogate
    ("<answer>3 *\n4 + 5</answer>", CD, 0.0, "invalid_expression"),
    ("<answer>" + "-" * 192 + "3 * 4 +5</answer>", CD, 1.0, "correct"),  # 200 characters: the longest
    (
        "<answer>" + "-" * 192 + "3 * 4 + 5</answer>",
        CD,
        0.0,
        "invalid_expression: expression longer than 200",
    ),
    ("<answer>3*4+5+" + "9" * 13 + "</answer>", CD, 0.0, "invalid_expression: integer literal too large"),
    ("<answer>3/(4-4)+5</answer>", CD, 0.0, "division_by_zero"),
    ("<answer>(3-3)/(4-4)*5</answer>", CD, 0.0, "division_by_zero"),
    ("x" * 200_000 + "<answer>3*4+5</answer>", CD, 1.0, "correct"),
]


@pytest.mark.parametrize("response,problem,score,reason", CD_ROWS, ids=range(len(CD_ROWS)))
def test_countdown_verifier(response, problem, score, reason):
    r = countdown(response, problem)
    assert r.score == score, r.info
    assert r.reason.split(":")[0] == reason.split(":")[0] and r.reason.startswith(reason), r.info


def test_countdown_reports_extracted_expression():
    r = countdown("<answer> 3*4+5 </answer>", CD)
    assert r.extracted == "3*4+5"
    assert countdown("no tags", CD).extracted is None


PARSE_ROWS = [
    ("3*4+5", 17, [3, 4, 5]),
    ("(6+3)/5", Fraction(9, 5), [6, 3, 5]),
    ("1/3*3", 1, [1, 3, 3]),  # exact fractions, no float rounding
    ("10-2-3", 5, [10, 2, 3]),  # left associative
    ("2*(3-7)", -8, [2, 3, 7]),
    ("-(-4)", 4, [4]),
    ("999999999999", 999999999999, [999999999999]),  # 12 digits: the largest literal
]


@pytest.mark.parametrize("expr,value,used", PARSE_ROWS)
def test_parse_expression_exact(expr, value, used):
    got, nums = parse_expression(expr)
    assert isinstance(got, Fraction)
    assert got == value
    assert nums == used


def test_addsub_uses_only_plus_and_minus_and_its_own_uids():
    probs = generate("addsub", 200, seed=0, difficulty=2)
    ops = {c for p in probs for c in p.extra_info["expression"] if not c.isdigit()}
    assert ops == {"+", "-"}
    assert all(p.uid.startswith("arith[+-]-2-") for p in probs)
    assert probs[0].data_source == "reasonrl/arithmetic"  # same verifier as arithmetic
    with pytest.raises(ValueError, match="operators must be"):
        from reasonrl.data.tasks.arithmetic import generate as arith

        arith(1, seed=0, operators="/")


@pytest.mark.parametrize(
    "response,score,reason",
    [
        ("<answer>7</answer>", 1.0, "correct"),
        ("<answer>7</answer>\n  ", 1.0, "correct"),  # trailing whitespace is fine
        ("<answer>7</answer>7</answer></answer>", 0.0, "text_after_answer"),  # drift after answering
        ("<answer>7</answer> or maybe <answer>8", 0.0, "text_after_answer"),
        ("<answer>8</answer><answer>7</answer>", 1.0, "correct"),  # the final block is the answer
        ("<answer>7</answer>junk", 0.0, "text_after_answer"),
    ],
)
def test_answer_block_must_end_the_response(response, score, reason):
    from reasonrl.rewards import score as route_score

    arith = generate("arithmetic", 1, seed=0, difficulty=1)[0]
    arith.ground_truth = "7"
    res = route_score(response, arith)
    assert (res.score, res.reason) == (score, reason)
    cd = Problem([{"role": "user", "content": "x"}], {"target": 7, "numbers": [3, 4]}, "reasonrl/countdown")
    res = route_score(response.replace(">7<", ">3+4<").replace(">8<", ">3*4<"), cd)
    assert (res.score, res.reason) == (score, reason)
