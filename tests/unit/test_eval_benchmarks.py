"""Every registered benchmark: its loader reads a fixture written in the real source's shape (found
under --data-dir by its standard file name), every row routes to a verifier, a reference-correct
answer scores 1 and a wrong one 0. Plus: GPQA shuffling is seeded and stable, and bad input (unknown
name, missing file, malformed row) is a clear error naming what is wrong. Answers that solve nothing
(empty, constants, every choice, hundreds of numbers, the prompt echoed, do-nothing programs) and
hedges (the right answer beside a wrong one) score 0 on every benchmark."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonrl.errors import InputError
from reasonrl.eval.benchmarks import BENCHMARKS, SUITES, load_benchmark, resolve
from reasonrl.rewards import check_routable, score

pytestmark = pytest.mark.timeout(120)
F = "```"
FUNC = "def f(s):\n    return s[::-1] + '!'"


def _jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _verl(data_source, gt, extra=None, ability="x"):
    return {"prompt": [{"role": "user", "content": "q"}], "data_source": data_source, "ability": ability,
            "reward_model": {"style": "rule", "ground_truth": gt}, "extra_info": {"split": "test", **(extra or {})}}  # fmt: skip


CODE_GT = json.dumps({"functional": "assert f(2) == 4"})
CODE_OK, CODE_BAD = f"{F}python\ndef f(x):\n    return 2 * x\n{F}", f"{F}python\ndef f(x):\n    return x\n{F}"
ZEBRA = {"header": ["Position", "Name"], "rows": [["1", "Ann"], ["2", "Bob"]]}
# Reasoning360 offline files: (file name, verl row, correct response, wrong response)
R360 = {
    "aime": ("math__aime_repeated_8x_240.parquet", _verl("math__aime", "42"), "\\boxed{42}", "\\boxed{41}"),
    "math": ("math__math_500.parquet", _verl("math__math", "\\frac{1}{2}"), "\\boxed{0.5}", "\\boxed{2}"),
    "humaneval": ("codegen__humaneval_164.parquet", _verl("codegen__humaneval", CODE_GT), CODE_OK, CODE_BAD),
    "mbpp": ("codegen__mbpp_500.parquet", _verl("codegen__mbpp", CODE_GT), CODE_OK, CODE_BAD),
    "livecodebench": ("codegen__livecodebench_279.parquet",
                      _verl("codegen__livecodebench", json.dumps({"inputs": ["2\n"], "outputs": ["4\n"]})),
                      f"{F}python\nprint(2 * int(input()))\n{F}", f"{F}python\nprint(5)\n{F}"),
    "arcagi1": ("logic__arcagi1_400.parquet", _verl("logic__arcagi1", json.dumps([[1, 2], [3, 4]])),
                "<answer>[[1, 2], [3, 4]]</answer>", "<answer>[[1, 2], [3, 5]]</answer>"),
    "zebra_puzzle": ("logic__zebra_puzzle_dataset_200.parquet", _verl("logic__zebra_puzzle_dataset", json.dumps(ZEBRA)),
                     "<answer>" + json.dumps(ZEBRA) + "</answer>",
                     "<answer>" + json.dumps({**ZEBRA, "rows": [["3", "Cy"], ["4", "Dan"]]}) + "</answer>"),
    "gpqa_diamond_r360": ("stem__gpqa_diamond_198.parquet", _verl("stem__gpqa_diamond", "C"), "\\boxed{C}", "\\boxed{A}"),
    "supergpqa": ("stem__supergpqa_1k.parquet", _verl("stem__supergpqa", "B"), "\\boxed{B}", "\\boxed{D}"),
    "finqa": ("table__finqa_1.1k.parquet", _verl("table__finqa", "12.5"), "\\boxed{12.5}", "\\boxed{13}"),
    "hitab": ("table__hitab_1k.parquet", _verl("table__hitab", "7"), "\\boxed{7}", "\\boxed{8}"),
    "multihiertt": ("table__multihier_336.parquet", _verl("table__multihier", "3.2"), "\\boxed{3.2}", "\\boxed{2.3}"),
    "codeio": ("simulation__codeio_200.parquet", _verl("simulation__codeio", '{"output": 5}'),
               '{"output": 5}', '{"output": 6}'),
    "cruxeval-i": ("simulation__cruxeval-i_800.parquet",
                   _verl("simulation__cruxeval-i", json.dumps({"functional": FUNC}),
                         {"reference": "'cba!'", "dataset": "cruxeval-i"}),
                   f"{F}python\nassert f('abc') == 'cba!'\n{F}", f"{F}python\nassert f('xyz') == 'cba!'\n{F}"),
    "cruxeval-o": ("simulation__cruxeval-o_800.parquet",
                   _verl("simulation__cruxeval-o", json.dumps({"functional": FUNC}),
                         {"reference": "'cba!'", "dataset": "cruxeval-o"}),
                   f"{F}python\nassert f('abc') == 'cba!'\n{F}", f"{F}python\nassert f('abc') == 'abc!'\n{F}"),
    "ifeval": ("ood__ifeval_541.parquet",
               _verl("ood__ifeval", json.dumps({"instruction_id_list": ["keywords:existence"],
                                                "kwargs": [{"keywords": ["apple"]}]})),
               "I like apple pie.", "I like pears."),
    "livebench_reasoning": ("ood__livebench_reasoning_150.parquet",
                            _verl("ood__livebench", "yes, no, yes", {"task": "web_of_lies_v2", "category": "reasoning"}),
                            "**yes, no, yes**", "**no, no, yes**"),
    "livebench_language": ("ood__livebench_language_140.parquet",
                           _verl("ood__livebench", "The quick brown fox.", {"task": "typos", "category": "language"}),
                           "<solution>The quick brown fox.</solution>", "<solution>Teh quick brown fox.</solution>"),
    "livebench_data_analysis": ("ood__livebench_data_analysis_150.parquet",
                                _verl("ood__livebench", "birthDate", {"task": "cta", "category": "data_analysis"}),
                                "birthDate", "deathDate"),
}  # fmt: skip
R360_SUITE = list(R360)  # the 17-task table; Guru's other math test files follow
R360.update({
    "amc_r360": ("math__amc_repeated_4x_332.parquet", _verl("math__amc_repeated_4x", "27.0"), "\\boxed{27}", "\\boxed{28}"),
    "aime25_r360": ("math__aime2025_repeated_8x_240.parquet", _verl("math__aime2025_repeated_8x", "70"),
                    "\\boxed{70}", "\\boxed{7}"),
    "minerva_r360": ("math__minerva_272.parquet", _verl("math__minerva", "4.5\\times 10^{-3}"),
                     "\\boxed{0.0045}", "\\boxed{4.5}"),
    "olympiad_bench_r360": ("math__olympiad_bench_675.parquet", _verl("math__olympiad_bench", "(1,2)"),
                            "\\boxed{(1, 2)}", "\\boxed{(2, 1)}"),
})  # fmt: skip
# the public sources, in their own columns and file formats
STANDARD = {
    "gsm8k": ("gsm8k_test.jsonl", {"question": "2 + 2?", "answer": "Two and two.\n#### 1,004"},
              "so\n#### 1004", "#### 4"),
    "math500": ("math500.jsonl", {"problem": "Half?", "answer": "\\frac{1}{2}", "unique_id": "test/a/1.json",
                                  "subject": "Algebra", "level": 1}, "\\boxed{\\frac12}", "\\boxed{1}"),
    "aime24": ("aime_2024.jsonl", {"id": 60, "problem": "Find n.", "answer": "204", "url": "u", "year": 2024},
               "\\boxed{204}", "\\boxed{205}"),
    "aime25": ("aime25.jsonl", {"problem": "Find m.", "answer": "70"}, "\\boxed{70}", "\\boxed{7}"),
    "amc23": ("amc23.jsonl", {"id": 3, "question": "How many?", "answer": 27.0, "url": "u"}, "\\boxed{27}",
              "\\boxed{26}"),
    "hmmt25": ("hmmt_feb_2025.jsonl", {"problem_idx": 1, "problem": "Compute r.", "answer": "\\frac{9\\sqrt{23}}{23}"},
               "\\boxed{\\frac{9}{\\sqrt{23}}}", "\\boxed{\\frac{9}{23}}"),
    "brumo25": ("brumo_2025.jsonl", {"problem_idx": 1, "problem": "Compute r.", "answer": "\\frac{9\\sqrt{23}}{23}"},
               "\\boxed{\\frac{9}{\\sqrt{23}}}", "\\boxed{\\frac{9}{23}}"),
    "cmimc25": ("cmimc25.jsonl", {"problem_idx": 1, "problem": "Compute r.", "answer": "\\frac{9\\sqrt{23}}{23}"},
               "\\boxed{\\frac{9}{\\sqrt{23}}}", "\\boxed{\\frac{9}{23}}"),
    "minerva_math": ("minerva_math.jsonl", {"problem": "Find the wavelength.", "type": "Astronomy", "idx": 7,
                                            "solution": "So $\\lambda=\\boxed{2.5e-7}$ m."},
                     "\\boxed{2.5\\times 10^{-7}}", "\\boxed{2.5\\times 10^{-6}}"),
    "olympiadbench": ("olympiadbench.jsonl", {"id": 2231, "question": "Find all pairs.", "is_multiple_answer": True,
                                              "final_answer": ["$(1,2),(2,1)$"], "unit": None, "error": None},
                      "\\boxed{(2,1),(1,2)}", "\\boxed{(1,2),(3,4)}"),
    "ifbench": ("IFBench_test.jsonl", {"key": "3", "prompt": "Count from 10 to 50 but only print multiples of 7.",
                                       "instruction_id_list": ["custom:multiples"], "kwargs": [{"N": None}]},
                "14, 21, 28, 35, 42, 49", "7, 14, 21, 28, 35, 42, 49"),
    "mmlu_pro": ("mmlu_pro_test.jsonl", {"question_id": 1, "question": "Pick.", "options": ["x", "y", "z", "N/A"],
                                         "answer": "C", "answer_index": 2, "category": "math"}, "\\boxed{C}",
                 "\\boxed{A}"),
    "livecodebench_r1": ("code_generation_lite_v5.jsonl", {
        "question_title": "Double", "question_content": "Read n, print 2n.", "platform": "atcoder",
        "question_id": "abc1", "contest_date": "2024-09-01T00:00:00", "starter_code": "", "difficulty": "easy",
        "public_test_cases": json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"}]),
        "private_test_cases": "[]", "metadata": "{}"},
        f"{F}python\nprint(2 * int(input()))\n{F}", f"{F}python\nprint(5)\n{F}"),
}  # fmt: skip
# Search-R1's QA sets as FlashRAG ships them (<set>/<split>.jsonl)
for _set, _split in (("nq", "test"), ("triviaqa", "test"), ("popqa", "test"), ("hotpotqa", "dev"),
                     ("2wikimultihopqa", "dev"), ("musique", "dev"), ("bamboogle", "test")):  # fmt: skip
    STANDARD[_set] = (f"{_set}/{_split}.jsonl", {"id": f"{_split}_0", "question": "who wrote hamlet",
                      "golden_answers": ["William Shakespeare", "Shakespeare"], "metadata": {}},
                      "<think>a play</think><answer> shakespeare </answer>", "<answer>Marlowe</answer>")  # fmt: skip
STANDARD["livecodebench_v6"] = (STANDARD["livecodebench_r1"][0], {**STANDARD["livecodebench_r1"][1], "contest_date": "2025-03-02T00:00:00"},
                                *STANDARD["livecodebench_r1"][2:])  # fmt: skip
GPQA = {"Question": "Which gas?", "Correct Answer": "Argon", "Incorrect Answer 1": "Neon",
        "Incorrect Answer 2": "Xenon", "Incorrect Answer 3": "Radon", "Record ID": "rec1"}  # fmt: skip


def test_every_registered_benchmark_has_a_fixture_here():
    registered = {n for n in BENCHMARKS.names() if not n.startswith("rg_")}  # generated: tested below
    assert registered == set(R360) | set(STANDARD) | {"gpqa_diamond"}
    assert SUITES["reasoning360"] == R360_SUITE


@pytest.mark.parametrize("name", sorted(R360))
def test_reasoning360_offline_files_load_route_and_score(name, tmp_path, require_bwrap):
    fname, row, good, bad = R360[name]
    (tmp_path / "offline_eval").mkdir()
    pq.write_table(pa.Table.from_pylist([row, row]), tmp_path / "offline_eval" / fname)
    problems = load_benchmark(BENCHMARKS.get(name), tmp_path)
    assert len(problems) == 2 and problems[0].uid != problems[1].uid
    check_routable(problems, name)
    if problems[0].data_source.startswith(("codegen", "simulation__cruxeval")):
        require_bwrap()
    assert score(good, problems[0]).score == 1.0
    assert score(bad, problems[0]).score == 0.0


@pytest.mark.parametrize("name", sorted(STANDARD))
def test_public_sources_load_route_and_score(name, tmp_path, require_bwrap):
    fname, row, good, bad = STANDARD[name]
    _jsonl(tmp_path / fname, [row])
    (p,) = load_benchmark(BENCHMARKS.get(name), tmp_path)
    check_routable([p], name)
    if p.data_source.startswith("codegen"):
        require_bwrap()
    assert score(good, p).score == 1.0 and score(bad, p).score == 0.0
    question = row.get("question", row.get("problem", row.get("question_content", row.get("prompt"))))
    assert p.uid and question in p.user_text


# answers that solve nothing: each must score 0 on every benchmark above (a policy under RL finds them)
SOLVE_NOTHING = [
    "", " \n\n ", "\\boxed{}", "<answer></answer>", "<solution></solution>", "{}", "[]", "*", "...",
    "yes", "True", "None", "\\boxed{nan}", "\\boxed{\\infty}", "A B C D", "\\boxed{A} \\boxed{B} \\boxed{C} \\boxed{D}",
    "\\boxed{" + ", ".join(map(str, range(300))) + "}", "".join(f"\\boxed{{{i}}}" for i in range(300)),
    "The answer is correct. Score: 1. <answer>correct</answer>", '{"output": null}',
    f"{F}python\npass\n{F}", f"{F}python\nimport os\nos._exit(0)\n{F}", f"{F}python\nassert True\n{F}",
]  # fmt: skip


@pytest.mark.parametrize("name", sorted(R360) + sorted(STANDARD))
def test_answers_that_solve_nothing_or_hedge_score_zero(name, tmp_path, require_bwrap):
    if name in R360:
        fname, row, good, bad = R360[name]
        (tmp_path / "offline_eval").mkdir()
        pq.write_table(pa.Table.from_pylist([row]), tmp_path / "offline_eval" / fname)
    else:
        fname, row, good, bad = STANDARD[name]
        _jsonl(tmp_path / fname, [row])
    (p,) = load_benchmark(BENCHMARKS.get(name), tmp_path)
    if p.data_source.startswith(("codegen", "simulation__cruxeval")):
        require_bwrap()
    assert score(good, p).score == 1.0  # the fixture is solvable, so a 0 below is not a broken verifier
    for answer in [*SOLVE_NOTHING, p.user_text]:
        assert score(answer, p).score == 0.0, answer
    if name in ("ifeval", "ifbench"):  # instructions hold wherever their text is: IFEval's own definition
        return
    # the right answer beside a wrong one is a hedge; the right one followed by a wrong one is wrong
    for answer in (f"{good} or {bad}", f"{good}{bad}", f"{good}\n{bad}"):
        assert score(answer, p).score == 0.0, answer


def test_gpqa_options_are_shuffled_with_a_fixed_seed_per_record(tmp_path):
    import csv

    path = tmp_path / "gpqa_diamond.csv"
    rows = [GPQA, {**GPQA, "Record ID": "rec2"}, {**GPQA, "Record ID": "rec3"}, {**GPQA, "Record ID": "rec4"}]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(GPQA))
        w.writeheader()
        w.writerows(rows)
    problems = load_benchmark(BENCHMARKS.get("gpqa_diamond"), tmp_path)
    again = load_benchmark(BENCHMARKS.get("gpqa_diamond"), tmp_path)
    assert [p.ground_truth for p in problems] == [p.ground_truth for p in again]  # stable
    assert len({p.ground_truth for p in problems}) > 1  # the gold letter moves between records
    for p in problems:
        line = next(x for x in p.user_text.splitlines() if "Argon" in x)
        assert line.startswith(f"({p.ground_truth})")
        assert score(f"\\boxed{{{p.ground_truth}}}", p).score == 1.0
        wrong = next(c for c in "ABCD" if c != p.ground_truth)
        assert score(f"\\boxed{{{wrong}}}", p).score == 0.0


def test_bad_input_names_what_is_wrong(tmp_path):
    with pytest.raises(
        InputError, match="unknown benchmark 'aime2099'; known: .*aime24.*suites: reasoning360"
    ):
        resolve(["aime2099"])
    assert [b.name for b in resolve(["r1", "aime24"])] == ["aime24", "aime25", "math500", "gpqa_diamond"]
    with pytest.raises(
        InputError, match=r"benchmark math500: no file matching math500\*.jsonl.*HuggingFaceH4/MATH-500"
    ):
        load_benchmark(BENCHMARKS.get("math500"), tmp_path)
    with pytest.raises(InputError) as e:
        load_benchmark(BENCHMARKS.get("math500"), tmp_path)
    assert str(e.value).endswith(
        "into --data-dir, or pass --file math500=PATH (a file, a datasets directory or hf:ORG/NAME)"
    )
    with pytest.raises(InputError) as e:  # a training run's val.data_dir: there is no --file to pass
        load_benchmark(BENCHMARKS.get("math500"), None, dir_key="val.data_dir")
    assert "(no val.data_dir given)" in str(e.value) and str(e.value).endswith("into val.data_dir")
    _jsonl(tmp_path / "gsm8k.jsonl", [{"question": "q", "answer": "4"}])
    with pytest.raises(
        InputError, match=r"gsm8k.jsonl row 0: field 'answer': has no final '#### <number>' line"
    ):
        load_benchmark(BENCHMARKS.get("gsm8k"), tmp_path)
    _jsonl(tmp_path / "aime25.jsonl", [{"problem": "p"}])
    with pytest.raises(InputError, match=r"aime25.jsonl row 0: field 'answer': missing \(or 'Answer'\)"):
        load_benchmark(BENCHMARKS.get("aime25"), tmp_path)
    fname, row, _, _ = STANDARD["livecodebench_r1"]  # a release that ends before R1's window
    _jsonl(tmp_path / fname, [{**row, "contest_date": "2024-05-01T00:00:00"}])
    with pytest.raises(
        InputError, match=r"benchmark livecodebench_r1: .*code_generation_lite_v5.jsonl holds no problems"
    ):
        load_benchmark(BENCHMARKS.get("livecodebench_r1"), tmp_path)


@pytest.mark.parametrize("name", SUITES["reasoning_gym"])
def test_reasoning_gym_benchmarks_are_generated_seeded_and_score_their_reference(name):
    pytest.importorskip("reasoning_gym")
    b = BENCHMARKS.get(name)
    problems = load_benchmark(b, limit=4)
    assert len(problems) == 4 and (b.n, b.temperature, b.top_p) == (3, 0.6, 0.9)
    assert [p.user_text for p in problems] == [p.user_text for p in load_benchmark(b, limit=4)]  # seeded
    check_routable(problems, name)
    for p in problems:
        assert score(f"<answer>{p.ground_truth}</answer>", p).score == 1.0
        assert score("", p).score == 0.0


def test_any_reasoning_gym_dataset_is_a_benchmark_by_name():
    pytest.importorskip("reasoning_gym")
    (b,) = resolve(["rg_n_queens"])
    assert b.domain == "gym" and len(load_benchmark(b, limit=2)) == 2
    with pytest.raises(InputError, match="unknown benchmark 'rg_nope': unknown reasoning-gym dataset 'nope'"):
        resolve(["rg_nope"])


# each Reasoning360 benchmark also reads its public source's own file (given with --file), through
# the converter `reasonrl data prepare` uses, so the problems are exactly the prepared ones
R360_CONVERTER = {"aime": "aime", "math": "math", "humaneval": "humaneval", "mbpp": "mbpp",
                  "livecodebench": "livecodebench", "arcagi1": "arcagi", "zebra_puzzle": "zebralogic",
                  "gpqa_diamond_r360": "gpqa", "supergpqa": "supergpqa", "finqa": "finqa", "hitab": "hitab",
                  "multihiertt": "multihiertt", "codeio": "codeio", "cruxeval-i": ("cruxeval", {"mode": "i"}),
                  "cruxeval-o": ("cruxeval", {"mode": "o"}), "ifeval": "ifeval", "amc_r360": "amc",
                  "aime25_r360": ("aime", {"year": 2025}), "minerva_r360": "minerva", "olympiad_bench_r360": "olympiadbench",
                  **{f"livebench_{c}": ("livebench", {"since": "2024-06-01", "until": "2024-07-31"})
                     for c in ("reasoning", "language", "data_analysis")}}  # fmt: skip


@pytest.mark.parametrize("name", sorted(R360))
def test_reasoning360_benchmarks_also_read_the_public_sources_own_file(name, tmp_path):
    from test_data_prepare import SOURCES, _gpqa_csv, _write

    from reasonrl.data.prepare import convert_files

    conv, options = (
        R360_CONVERTER[name] if isinstance(R360_CONVERTER[name], tuple) else (R360_CONVERTER[name], {})
    )
    fname, rows, *_ = SOURCES[conv]
    src = tmp_path / fname
    _gpqa_csv(src) if rows is None else _write(src, rows)
    got = load_benchmark(BENCHMARKS.get(name), path=src)
    options = (
        {"mode": name[-1]} if conv == "cruxeval" else {"year": 2025} if name == "aime25_r360" else options
    )
    want, _ = convert_files(conv, [str(src)], options)
    assert [p.to_row() for p in got] == [p.to_row() for p in want] and got
    check_routable(got, name)
    # and a verl row still loads as it is (not through the converter)
    fname, row, *_ = R360[name]
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / fname)
    (p,) = load_benchmark(BENCHMARKS.get(name), path=tmp_path / fname)
    assert p.data_source == row["data_source"] and p.prompt == row["prompt"]
