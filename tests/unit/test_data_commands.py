"""`reasonrl data` commands on fixtures: reasoning-gym generation (seeded, weighted, per-task settings,
rows that score their own reference) and its conformance sweep; dedup (planted exact and near
duplicates caught, distinct rows kept, a report of why); decontamination (planted overlaps with an
eval set removed, shared instructions never count); stats; filter; the think-aware chat template."""

from __future__ import annotations

import json

import pytest

from reasonrl.cli.main import main
from reasonrl.data.files import read_rows
from reasonrl.data.schema import read_problems, write_problems
from reasonrl.errors import InputError
from reasonrl.rewards import score
from reasonrl.types import Problem

LONG = ("Let x and y be positive integers such that x plus y equals twenty and x times y equals ninety six. "
        "Find the value of x squared plus y squared and explain each step of the computation carefully.")  # fmt: skip


def _cli(capsys, *argv) -> dict:
    assert main(["data", *argv]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_reasoning_gym_generation_is_seeded_weighted_and_scores_its_reference(tmp_path, capsys):
    pytest.importorskip("reasoning_gym")
    out = tmp_path / "gym.parquet"
    args = ["generate", "reasoning_gym", "--tasks", "basic_arithmetic:3,leg_counting:1", "--size", "40",
            "--seed", "5", "--config", "basic_arithmetic.min_terms=4", "--config", "basic_arithmetic.max_terms=4",
            "--out", str(out)]  # fmt: skip
    assert _cli(capsys, *args)["rows"] == 40
    problems = read_problems(out)
    tasks = [p.extra_info["task"] for p in problems]
    assert 20 <= tasks.count("basic_arithmetic") < 40 and tasks.count("leg_counting") >= 3
    for p in problems:
        entry = json.loads(p.extra_info["entry"])
        assert p.data_source == "reasoning_gym" and p.ground_truth == str(entry["answer"])
        assert score(f"<answer>{p.ground_truth}</answer>", p).score == 1.0
        assert score("<answer>-99999</answer>", p).score < 1.0
        if p.extra_info["task"] == "basic_arithmetic":
            assert entry["metadata"]["num_terms"] == 4  # the per-task setting reached the generator
    again = tmp_path / "again.parquet"
    _cli(capsys, *args[:-1], str(again))
    assert [p.to_row() for p in read_problems(again)] == [p.to_row() for p in problems]
    other = tmp_path / "other.parquet"
    _cli(capsys, *[a if a != "5" else "6" for a in args[:-1]], str(other))
    assert [p.ground_truth for p in read_problems(other)] != [p.ground_truth for p in problems]
    with pytest.raises(InputError, match="unknown reasoning-gym dataset 'nope'"):
        from reasonrl.data.gym import parse_mix

        parse_mix("basic_arithmetic:1,nope:2")
    for weight in ("0", "-1", "nan", "inf"):  # reasoning-gym's draw cannot weigh NaN or an infinity
        with pytest.raises(
            InputError, match=rf"^--tasks 'leg_counting:{weight}': weight must be a finite number > 0$"
        ):
            parse_mix(f"basic_arithmetic:1,leg_counting:{weight}")
    assert main(["data", "generate", "reasoning_gym", "--tasks", "leg_counting:1", "--config", "leg_counting.bogus=1",
                 "--out", str(tmp_path / "x.parquet")]) == 2  # fmt: skip
    assert "--config for leg_counting" in capsys.readouterr().err and not (tmp_path / "x.parquet").exists()


def test_reasoning_gym_conformance_sweep():
    pytest.importorskip("reasoning_gym")
    from reasoning_gym.factory import DATASETS

    from reasonrl.data.gym import NO_REFERENCE, NOT_SWEPT, sweep

    failures = sweep(rows=3, seed=1)
    assert set(failures) == set(NO_REFERENCE), failures  # every other dataset's reference scores 1
    assert len(DATASETS) - len(NOT_SWEPT) - len(failures) >= 95


def test_game_of_life_halting_cannot_be_gamed():
    pytest.importorskip("reasoning_gym")
    from reasonrl.data.gym import entry_problem

    entry = {
        "question": "Does it halt?",
        "answer": "False",
        "metadata": {"source_dataset": "game_of_life_halting"},
    }
    p = entry_problem("game_of_life_halting", entry, "g0")
    assert score("<answer>False</answer>", p).score == 1.0
    for hack in ("<answer>anything at all</answer>", "<answer>True</answer>", "<answer>1</answer>"):
        assert score(hack, p).score == 0.0, hack


def _math(text, i):
    return Problem([{"role": "user", "content": f"{text}\n\nPlease reason step by step, and put your final answer "
                                                "within \\boxed{}."}], str(i), "math__x", "math", {"index": i}, uid=f"m{i}")  # fmt: skip


def test_dedup_catches_planted_exact_and_near_duplicates(tmp_path, capsys):
    a = [
        _math(LONG, 0),
        _math("What is the area of a circle of radius three?", 1),
        _math("Compute 17 times 23.", 2),
    ]
    b = [_math("  what is the AREA of a circle of radius three ? ", 3),  # exact after normalisation
         _math(LONG.replace("carefully", "clearly"), 4),  # one word changed: near duplicate
         _math("How many primes are less than fifty?", 5)]  # fmt: skip
    write_problems(tmp_path / "a.parquet", a)
    write_problems(tmp_path / "b.jsonl", b)
    out = tmp_path / "d.parquet"
    got = _cli(capsys, "dedup", str(tmp_path / "a.parquet"), str(tmp_path / "b.jsonl"), "--out", str(out))
    assert (got["rows_in"], got["rows_out"], got["exact"], got["near"]) == (6, 4, 1, 1)
    assert [p.uid for p in read_problems(out)] == ["m0", "m1", "m2", "m5"]  # first occurrences win
    report = read_rows(got["report"])
    assert [(r["reason"], r["row"].endswith("b.jsonl row 0"), "a.parquet row 1" in r["detail"]) for r in report][0] == \
        ("exact", True, True)  # fmt: skip
    assert report[1]["reason"] == "near" and "a.parquet row 0" in report[1]["detail"]
    assert main(["data", "dedup", str(out), "--out", str(out)]) == 2  # never over its input
    assert "output is also an input" in capsys.readouterr().err


def test_dedup_compares_templated_rows_by_what_differs(tmp_path, capsys):
    """Rows of one generated task share a long template and differ in a few words: they are not near
    duplicates for it, while a planted one-word edit of a (long) problem still is."""
    import random

    rng = random.Random(0)
    words = "apple river stone cloud maple tiger piano lemon ocean violet copper meadow falcon harbor".split()
    template = (
        " ".join(f"rule{k} says sort the words by their ASCII codes" for k in range(8)) + ". The words: "
    )
    rows = [_math(template + ", ".join(rng.sample(words, 4)), i) for i in range(40)]
    rows += [_math(template + LONG, 40), _math(template + LONG.replace("carefully", "clearly"), 41)]
    write_problems(tmp_path / "t.parquet", rows)
    got = _cli(capsys, "dedup", str(tmp_path / "t.parquet"), "--out", str(tmp_path / "d.parquet"))
    assert (got["exact"], got["near"]) == (0, 1)
    (removed,) = read_rows(got["report"])
    assert removed["row"].endswith("t.parquet row 41") and "t.parquet row 40" in removed["detail"]
    # without the template rule, the shared instructions make most of the distinct problems "near"
    got = _cli(capsys, "dedup", str(tmp_path / "t.parquet"), "--out", str(tmp_path / "e.parquet"),
               "--template-share", "1")  # fmt: skip
    assert got["near"] > 20


def test_a_template_is_what_a_group_repeats_in_at_least_three_rows_and_its_share():
    from reasonrl.data.dedup import TEMPLATE_MIN_ROWS, frequent

    assert TEMPLATE_MIN_ROWS == 3
    sets = [{"t", "x"}, {"t", "x"}, {"t"}, {"u"}]  # "t" in 3 rows of the group, "x" in 2
    assert frequent(sets, ["g"] * 4, share=0.05) == {"t"}  # the floor is 3 rows (0.05 x 4 is less)
    assert frequent(sets, ["g"] * 4, share=0.75) == {"t"}  # exactly the share (3 of 4) counts
    assert frequent(sets, ["g"] * 4, share=0.8) == set()
    assert frequent(sets, ["g", "g", "h", "h"], share=0.05) == set()  # counted within each group
    assert frequent(sets, ["g"] * 4, share=1.0) == set()


def test_an_ngram_counts_only_with_more_than_half_its_words_outside_the_template():
    from reasonrl.data.dedup import content_ngrams, ngrams

    text = "alpha beta gamma delta eps zeta eta theta"  # the template covers its first four words
    template = ngrams("alpha beta gamma delta", 4)
    kept = content_ngrams(text, 4, template)
    # "gamma delta eps zeta" has 2 of 4 words outside: not more than half; "delta eps zeta eta" has 3
    assert kept == ngrams("delta eps zeta eta theta", 4) | ngrams(text, 99)  # plus the whole text's hash
    assert content_ngrams(text, 4, frozenset()) == ngrams(text, 4) | ngrams(text, 99)  # no template


def test_decontamination_removes_planted_overlaps_only(tmp_path, capsys):
    from reasonrl.data.prepare import convert_files

    evals = [{"problem": LONG, "answer": "208", "unique_id": "e0"},
             {"problem": "Find the remainder when 2 to the power 100 is divided by 7.", "answer": "2", "unique_id": "e1"}]  # fmt: skip
    (tmp_path / "math500.jsonl").write_text("".join(json.dumps(r) + "\n" for r in evals))
    train = [_math("Solve: " + LONG[:160], 0),  # shares 8-grams with e0
             _math("A short unrelated question about apples.", 1),
             _math("Find the remainder when 2 to the power 100 is divided by 7. Then add one.", 2),
             _math("Find the remainder when 3 to the power 50 is divided by 11.", 3)]  # fmt: skip
    write_problems(tmp_path / "t.parquet", train)
    out = tmp_path / "clean.parquet"
    got = _cli(capsys, "decontaminate", str(tmp_path / "t.parquet"), "--against", str(tmp_path / "math500.jsonl"),
               "--out", str(out))  # fmt: skip
    assert (got["contaminated"], got["rows_out"]) == (2, 2)
    assert [p.uid for p in read_problems(out)] == ["m1", "m3"]
    # the eval set converted by our own converter carries the same instruction as every training row:
    # the instruction never makes a match
    conv, _ = convert_files("math", [str(tmp_path / "math500.jsonl")])
    write_problems(tmp_path / "eval_rows.parquet", conv)
    got = _cli(capsys, "decontaminate", str(tmp_path / "t.parquet"), "--against", str(tmp_path / "eval_rows.parquet"),
               "--out", str(tmp_path / "c2.parquet"))  # fmt: skip
    assert got["contaminated"] == 2
    # the same, naming the benchmark: the eval registry finds math500.jsonl under --data-dir
    got = _cli(capsys, "decontaminate", str(tmp_path / "t.parquet"), "--benchmarks", "math500", "--data-dir",
               str(tmp_path), "--out", str(tmp_path / "c3.parquet"))  # fmt: skip
    assert (got["contaminated"], got["eval_rows"]) == (2, 2)
    assert [p.uid for p in read_problems(tmp_path / "c3.parquet")] == ["m1", "m3"]
    assert "benchmark math500 problem 0" in read_rows(got["report"])[0]["detail"]
    assert main(["data", "decontaminate", str(tmp_path / "t.parquet"), "--benchmarks", "aime24", "--out",
                 str(tmp_path / "c4.parquet")]) == 2  # fmt: skip
    assert "benchmark aime24: no file matching" in capsys.readouterr().err
    assert not (tmp_path / "c4.parquet").exists()


def test_generated_training_data_never_holds_the_reasoning_gym_benchmarks(tmp_path, capsys):
    """reasoning-gym builds item i from seed + i: raw seed 0 with 150 items holds items 42..141, which are
    the rg_* benchmark (seed 42). Decontamination finds exactly those (the task's template shared by
    every problem never matches), and `data generate` hashes its seed, so its rows hold none."""
    pytest.importorskip("reasoning_gym")
    from reasonrl.data.gym import generate
    from reasonrl.eval.benchmarks import RG_SEED

    raw = str(tmp_path / "raw.parquet")
    write_problems(raw, generate([("word_sorting", 1.0)], 150, 0, raw_seed=True))
    got = _cli(
        capsys, "decontaminate", raw, "--benchmarks", "rg_word_sorting", "--out", str(tmp_path / "c.parquet")
    )
    assert (got["contaminated"], got["rows_out"]) == (100, 50) and got["template_ngrams_ignored"] > 0
    assert [int(r["row"].split()[-1]) for r in read_rows(got["report"])] == list(
        range(RG_SEED, RG_SEED + 100)
    )
    for seed in (0, RG_SEED):
        ours = str(tmp_path / f"g{seed}.parquet")
        assert main(["data", "generate", "reasoning_gym", "--tasks", "word_sorting:1", "--size", "150",
                     "--seed", str(seed), "--out", ours]) == 0  # fmt: skip
        capsys.readouterr()
        got = _cli(
            capsys, "decontaminate", ours, "--benchmarks", "rg_word_sorting", "--out", ours + ".parquet"
        )
        assert got["contaminated"] == 0, seed


def test_training_warns_when_its_data_holds_a_val_benchmark(tiny_model_and_tokenizer):
    """`reasonrl train` with val.benchmarks: training prompts that are benchmark problems are named
    in a warning before training (template-aware, as `data decontaminate`); clean data gives none."""
    pytest.importorskip("reasoning_gym")
    from reasonrl.config import load_config
    from reasonrl.data.dedup import benchmark_overlap
    from reasonrl.data.gym import generate
    from reasonrl.eval.benchmarks import RG_SEED
    from reasonrl.trainer.setup import load_val_benchmarks

    _, tok = tiny_model_and_tokenizer
    leaked = generate(
        [("word_sorting", 1.0)], 60, RG_SEED + 90, raw_seed=True
    )  # items 90..99 of the benchmark
    clean = generate([("word_sorting", 1.0)], 60, 0)
    cfg = load_config(None, ["val.benchmarks=[rg_word_sorting]", "data.max_prompt_tokens=4096"])
    logs: list[str] = []
    (loaded,) = load_val_benchmarks(cfg, tok, logs.append, train=clean + leaked)
    assert loaded[0].name == "rg_word_sorting" and len(loaded[1]) == 100
    (line,) = [x for x in logs if x.startswith("warning")]
    assert line.startswith(
        "warning: 10 training prompts overlap val benchmark rg_word_sorting (e.g. train row 60: "
    )
    assert "rg_word_sorting problem 90 " in line and "data decontaminate --benchmarks rg_word_sorting" in line
    assert benchmark_overlap(clean, [("rg_word_sorting", loaded[1])]) == {}
    logs.clear()
    load_val_benchmarks(cfg, tok, logs.append, train=clean)
    assert not [x for x in logs if x.startswith("warning")]


def test_pass_rate_histogram_counts_every_row_once():
    from reasonrl.data.stats import pass_rate_histogram

    values = [0.0, 1e-9, 0.2, 0.3999, 0.4, 0.6, 0.8, 0.9999, 1.0, None, float("nan"), 1.5, -0.1, "abc", "0.5"]
    hist = pass_rate_histogram([{"m_pass_rate": v} for v in values], "m_pass_rate")
    assert hist == {"impossible (0)": 1, "very hard (0, 0.2)": 1, "hard [0.2, 0.4)": 2, "medium [0.4, 0.6)": 2,
                    "easy [0.6, 0.8)": 1, "very easy [0.8, 1)": 2, "perfect (1)": 1, "missing": 1,
                    "not a rate in [0, 1]": 4}  # fmt: skip
    assert sum(hist.values()) == len(values)
    assert "not a rate in [0, 1]" not in pass_rate_histogram([{"m_pass_rate": 0.5}], "m_pass_rate")


def test_stats_and_filter(tmp_path, capsys):
    rows = [{**_math(f"q{i}", i).to_row(), "m_pass_rate": r} for i, r in enumerate([0.0, 0.25, 1.0, 0.5])]
    from reasonrl.data.files import write_rows

    write_rows(tmp_path / "pr.parquet", rows)
    assert main(["data", "stats", str(tmp_path / "pr.parquet"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["rows"] == 4 and s["data_source"] == {"math__x": 4} and s["routes"] == {"math__x": "math"}
    hist = s["pass_rate"]["m_pass_rate"]
    assert (
        hist["impossible (0)"],
        hist["hard [0.2, 0.4)"],
        hist["medium [0.4, 0.6)"],
        hist["perfect (1)"],
    ) == (1, 1, 1, 1)
    got = _cli(capsys, "filter", str(tmp_path / "pr.parquet"), "--range", "m_pass_rate=0.1:0.9", "--out",
               str(tmp_path / "f.parquet"))  # fmt: skip
    assert got["rows_out"] == 2 and [r["m_pass_rate"] for r in read_rows(tmp_path / "f.parquet")] == [
        0.25,
        0.5,
    ]
    assert main(["data", "filter", str(tmp_path / "pr.parquet"), "--range", "other_pass_rate=0:1", "--out",
                 str(tmp_path / "g.parquet")]) == 2  # fmt: skip
    assert (
        "pr.parquet: no column 'other_pass_rate'; pass-rate columns: m_pass_rate" in capsys.readouterr().err
    )
    assert not (tmp_path / "g.parquet").exists()
    write_rows(
        tmp_path / "holes.parquet", [{**rows[0], "m_pass_rate": 0.5}, {**rows[1], "m_pass_rate": None}]
    )
    assert main(["data", "filter", str(tmp_path / "holes.parquet"), "--range", "m_pass_rate=0:1", "--out",
                 str(tmp_path / "g.parquet")]) == 2  # fmt: skip
    assert "row 1: column 'm_pass_rate' has no pass rate in [0, 1] (got None)" in capsys.readouterr().err


QWEN = (
    "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
LLAMA = ("{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
         "'<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %}"
         "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}")  # fmt: skip


@pytest.mark.parametrize("template, eos", [(QWEN, "<|im_end|>"), (LLAMA, "<|eot_id|>")])
def test_think_chat_template(tmp_path, capsys, template, eos):
    from transformers import AutoTokenizer

    from reasonrl.data.prompts import prompt_opens_think
    from reasonrl.models.tiny import build_tokenizer

    tok = build_tokenizer(["hello world think answer"], vocab_size=120)
    tok.chat_template = template
    src = tmp_path / "model"
    tok.save_pretrained(src)
    before = sorted(p.read_bytes() for p in src.iterdir())
    got = _cli(capsys, "chat-template", str(src), str(tmp_path / "think"))
    assert (
        got["eos_token"] == eos and sorted(p.read_bytes() for p in src.iterdir()) == before
    )  # input untouched
    new = AutoTokenizer.from_pretrained(tmp_path / "think")
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>secret plan</think>done"},
            {"role": "user", "content": "again"}]  # fmt: skip
    text = new.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert text.endswith(
        "assistant" + ("\n" if eos == "<|im_end|>" else "<|end_header_id|>\n\n") + "<think>\n"
    )
    assert "secret plan" not in text and "done" in text  # reasoning stripped from the history
    assert prompt_opens_think(new, Problem([{"role": "user", "content": "q"}], "1", "math__x"))
    _cli(capsys, "chat-template", str(src), str(tmp_path / "keep"), "--keep-history-reasoning")
    kept = AutoTokenizer.from_pretrained(tmp_path / "keep").apply_chat_template(msgs, add_generation_prompt=True,
                                                                                tokenize=False)  # fmt: skip
    assert "secret plan" in kept
    assert main(["data", "chat-template", str(tmp_path / "think"), str(tmp_path / "again")]) == 2
    assert "already opens <think>" in capsys.readouterr().err


def test_length_filter_counts_tokens_after_the_chat_template(tmp_path, capsys):
    from reasonrl.data.prompts import encode_prompt
    from reasonrl.models.tiny import build_tokenizer

    tok = build_tokenizer(["what is one plus one and two plus two"], vocab_size=120)
    tok.save_pretrained(tmp_path / "tok")
    problems = [
        _math("one plus one", 0),
        _math("what is one plus one and two plus two " * 8, 1),
        _math("two", 2),
    ]
    write_problems(tmp_path / "p.parquet", problems)
    lengths = [len(encode_prompt(tok, p)) for p in problems]
    limit = max(lengths[0], lengths[2])
    assert lengths[1] > limit
    got = _cli(capsys, "filter", str(tmp_path / "p.parquet"), "--max-prompt-tokens", str(limit), "--tokenizer",
               str(tmp_path / "tok"), "--out", str(tmp_path / "short.parquet"))  # fmt: skip
    assert (got["too_long"], got["rows_out"]) == (1, 2)
    assert [p.uid for p in read_problems(tmp_path / "short.parquet")] == ["m0", "m2"]
    assert main(["data", "filter", str(tmp_path / "p.parquet"), "--max-prompt-tokens", "5", "--out",
                 str(tmp_path / "x.parquet")]) == 2  # fmt: skip
    assert "--max-prompt-tokens needs --tokenizer" in capsys.readouterr().err
