"""The benchmark registry `BENCHMARKS`: name -> where its file is, how its rows become `Problem`s (routed
to the same verifiers as training), and its default sampling and metrics.

Owns: `Benchmark` (one entry), `BENCHMARKS`, `SUITES` (named lists, e.g. `reasoning360`),
`load_benchmark` (find the file under a data directory, read it in the source's own format, convert
rows, with errors naming the benchmark, the file expected, its format and how to get it; or the file
named per benchmark). Public sources' own formats (GSM8K, MATH-500, AIME, AMC, Minerva, OlympiadBench,
MathArena's HMMT / BRUMO / CMIMC, GPQA, MMLU-Pro, LiveCodeBench, IFBench) go through their `data.prepare` converters, so eval and
training prompts match. Reasoning360 / Guru offline-eval parquet files are verl rows already and load as
they are; each Reasoning360 benchmark also reads its public source's own file through its converter.
Does not own: generating or scoring (`eval.runner`), the statistics (`eval.metrics`).

Sampling defaults and where they come from are in each entry's comment. Reasoning360's offline-eval
script (scripts/offline_eval/example_multinode_eval_guru7b.sh): temperature 1.0, top_p 0.7, n 4 for
small sets and 1 for large ones, 28672 response tokens. DeepSeek-R1-style (and lighteval / RLinf)
math and GPQA: temperature 0.6, top_p 0.95, 32768 tokens, AIME n 64 (here 16), MATH-500 n 4, GPQA n 8.
GSM8K: lm-eval's greedy decoding. `reasonrl eval --n / --temperature / --max-new-tokens` override.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reasonrl.errors import InputError
from reasonrl.registry import Registry
from reasonrl.types import Problem


@dataclass(frozen=True)
class Benchmark:
    name: str
    domain: str  # for macro averages: math, code, logic, simulation, table, stem, ood, gym, qa
    files: tuple[str, ...]  # file names (globs) looked for under --data-dir, first match wins
    source: str  # what the file is and how to get it (shown when it is missing)
    convert: Callable[[list[dict], Path], list[Problem]]  # the file's rows -> problems
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 32768
    generate: Callable[[], list[Problem]] | None = None  # generated benchmarks (reasoning-gym): no file
    note: str = ""  # how it is scored where a reader could assume otherwise (under the results table)

    def find(self, data_dir: Path) -> Path | None:
        for pattern in self.files:
            for base in (data_dir, data_dir / "offline_eval"):
                hits = sorted(base.glob(pattern))
                if hits:
                    return hits[0]
        return None


BENCHMARKS: Registry[Benchmark] = Registry("benchmark")
SUITES: dict[str, list[str]] = {}


def _add(b: Benchmark) -> Benchmark:
    BENCHMARKS.register(b.name)(b)
    return b


def converted(name: str, **options: Any) -> Callable[[list[dict], Path], list[Problem]]:
    """The rows of a public source's own file -> problems, through its `data.prepare` converter, so a
    benchmark's prompts are exactly what `reasonrl data prepare` writes for training."""

    def convert(rows: list[dict], path: Path) -> list[Problem]:
        from reasonrl.data.prepare import CONVERTERS, Context, Report, convert_rows, load_all

        load_all()
        conv = CONVERTERS.get(name)
        return convert_rows(
            conv, rows, str(path), Context(conv.resolve_options(options), source=str(path)), Report()
        )

    return convert


def verl_or(name: str, **options: Any) -> Callable[[list[dict], Path], list[Problem]]:
    """verl / Reasoning360 rows as they are, or the public source's own rows through its converter (a
    Reasoning360 benchmark then also reads e.g. google/IFEval's file given with --file)."""
    public = converted(name, **options)

    def convert(rows: list[dict], path: Path) -> list[Problem]:
        if rows and isinstance(rows[0], dict) and "reward_model" in rows[0]:
            return verl_rows(rows, path)
        return public(rows, path)

    return convert


def verl_rows(rows: list[dict], path: Path) -> list[Problem]:
    """Rows already in verl / Reasoning360 shape (prompt, reward_model.ground_truth, data_source)."""
    from reasonrl.data.schema import problems_from_rows

    out = problems_from_rows(rows, path)
    for i, p in enumerate(out):
        p.uid = p.uid or f"{path.stem}/{i}"
    return out


# ----------------------------------------------------------------------------- registrations

_R1_MATH = dict(temperature=0.6, top_p=0.95, max_new_tokens=32768)  # DeepSeek-R1 / lighteval
_add(Benchmark("gsm8k", "math", ("gsm8k*.parquet", "gsm8k*.jsonl", "gsm8k*.json"),
               "openai/gsm8k (config main, split test): question, answer",
               converted("gsm8k"), n=1, temperature=0.0, max_new_tokens=1024))  # lm-eval: greedy  # fmt: skip
_add(Benchmark("math500", "math", ("math500*.jsonl", "math500*.parquet", "MATH-500*.jsonl", "test.jsonl"),
               "HuggingFaceH4/MATH-500 (split test): problem, answer, unique_id",
               converted("math"), n=4, **_R1_MATH))  # DeepSeek-R1: 4 samples  # fmt: skip
_add(Benchmark("aime24", "math", ("aime24*.parquet", "aime24*.jsonl", "aime_2024*.parquet", "aime_2024*.jsonl"),
               "HuggingFaceH4/aime_2024 (split train): id, problem, answer",
               converted("aime", year=2024), n=16, **_R1_MATH))  # DeepSeek-R1 uses 64  # fmt: skip
_add(Benchmark("aime25", "math", ("aime25*.parquet", "aime25*.jsonl", "aime_2025*.parquet", "aime_2025*.jsonl"),
               "yentinglin/aime_2025 or math-ai/aime25: problem, answer",
               converted("aime", year=2025), n=16, **_R1_MATH))  # fmt: skip
_add(Benchmark("gpqa_diamond", "stem", ("gpqa_diamond*.csv", "gpqa_diamond*.parquet", "gpqa_diamond*.jsonl"),
               "Idavidrein/gpqa config gpqa_diamond (gated): Question, Correct Answer, Incorrect Answer 1-3",
               converted("gpqa"), n=8, **_R1_MATH,
               note="options shuffled per record with a fixed seed (the correct one is not always A)"))  # DeepSeek-R1: 8 samples  # fmt: skip

# the zero-RL papers' math table (DeepScaleR, SimpleRL-Zoo, Dr. GRPO: AIME24, AMC23, MATH-500, Minerva,
# OlympiadBench): DeepScaleR averages 16 samples at temperature 0.6, top_p 0.95 on every set; here 16 on
# the small sets (AMC23's 40, HMMT's 30) and 4 on the larger ones (Minerva's 272, OlympiadBench's 675), as
# DeepSeek-R1 does for MATH-500
_add(Benchmark("amc23", "math", ("amc23*.jsonl", "amc23*.parquet", "amc*.jsonl", "amc*.parquet"),
               "math-ai/amc23 (split test): question, answer (or AI-MO/aimo-validation-amc: problem, answer)",
               converted("amc"), n=16, **_R1_MATH))  # fmt: skip
_add(Benchmark("minerva_math", "math", ("minerva*.jsonl", "minerva*.parquet"),
               "Minerva math (Qwen2.5-Math evaluation/data/minerva_math/test.jsonl: problem, solution; "
               "or math-ai/minervamath: question, answer)", converted("minerva"), n=4, **_R1_MATH))  # fmt: skip
_add(Benchmark("olympiadbench", "math", ("olympiadbench*.jsonl", "olympiadbench*.parquet", "OE_TO_maths_en_COMP*"),
               "Hothan/OlympiadBench (config OE_TO_maths_en_COMP, split train): question, final_answer, unit, error",
               converted("olympiadbench"), n=4, **_R1_MATH))  # fmt: skip
# MathArena's 2025 competitions (30 problems each; final answers, no proofs)
for _name, _set in (("hmmt25", "hmmt_feb_2025"), ("brumo25", "brumo_2025"), ("cmimc25", "cmimc_2025")):
    _add(Benchmark(_name, "math", (f"{_set}*.jsonl", f"{_set}*.parquet", f"{_name}*.jsonl", f"{_name}*.parquet"),
                   f"MathArena/{_set} (split train): problem_idx, problem, answer",
                   converted("matharena", competition=_set), n=16, **_R1_MATH))  # fmt: skip

# LiveCodeBench from its own release files (`livecodebench/code_generation_lite`, e.g. release_v5 written
# to jsonl), DeepSeek-R1's window: contest dates 2024-08-01 .. 2025-01-31, n 16 (open-r1 / lighteval's
# LCB setting), temperature 0.6, top_p 0.95; MMLU-Pro (greedy in its own eval; R1's sampling here, n 1 on
# its 12k questions)
# and the v6 window Qwen3 / AceReason report (contest dates 2025-02-01 .. 2025-04-30; release_v6 files)
for _name, _since, _until in (("livecodebench_r1", "2024-08-01", "2025-02-01"),
                              ("livecodebench_v6", "2025-02-01", "2025-05-01")):  # fmt: skip
    _add(Benchmark(_name, "code", ("code_generation_lite*.jsonl", "livecodebench*.jsonl", "lcb*.jsonl"),
                   "livecodebench/code_generation_lite (a release with this window, jsonl): question_content, "
                   "starter_code, public_test_cases, private_test_cases, metadata, contest_date",
                   converted("livecodebench", since=_since, until=_until), n=16, **_R1_MATH))  # fmt: skip
_add(Benchmark("mmlu_pro", "stem", ("mmlu_pro*.parquet", "mmlu_pro*.jsonl", "MMLU-Pro*.parquet"),
               "TIGER-Lab/MMLU-Pro (split test): question_id, question, options, answer, answer_index, category",
               converted("mmlu_pro"), n=1, **_R1_MATH))  # fmt: skip

# IFBench (allenai/IFBench, its 58 out-of-distribution constraints, 300 prompts): its README reports
# prompt-level loose accuracy from greedy decoding (temperature 0), more tokens for thinking models
_add(Benchmark("ifbench", "ood", ("IFBench_test*.jsonl", "ifbench_test*.jsonl", "ifbench*.jsonl"),
               "allenai/IFBench data/IFBench_test.jsonl: key, prompt, instruction_id_list, kwargs",
               converted("ifeval", uid="ifbench", loose=True), n=1, temperature=0.0, max_new_tokens=32768,
               note="prompt-level loose accuracy, as IFBench reports it"))  # fmt: skip

# Reasoning360's offline suite: Guru offline_eval parquet files (verl rows), found as
# <domain>__<name>_*.parquet like its driver script does; temperature 1.0, top_p 0.7, 28672 tokens,
# n from its table (aime's file repeats each problem 8x, so n=4 there is 32 samples per problem)
_R360 = dict(temperature=1.0, top_p=0.7, max_new_tokens=28672)
_LB_WINDOW = {"since": "2024-06-01", "until": "2024-07-31"}  # the release window Reasoning360's files keep
_R360_SUITE = [  # name, domain, file prefix, n, the public source's converter (and its options)
    ("aime", "math", "math__aime_repeated_8x", 4, ("aime", {})),
    ("math", "math", "math__math", 1, ("math", {})),
    ("humaneval", "code", "codegen__humaneval", 4, ("humaneval", {})),
    ("mbpp", "code", "codegen__mbpp", 1, ("mbpp", {})),
    ("livecodebench", "code", "codegen__livecodebench", 4, ("livecodebench", {})),
    ("arcagi1", "logic", "logic__arcagi1", 4, ("arcagi", {})),
    ("zebra_puzzle", "logic", "logic__zebra_puzzle_dataset", 4, ("zebralogic", {})),
    ("gpqa_diamond_r360", "stem", "stem__gpqa_diamond", 4, ("gpqa", {})),
    ("supergpqa", "stem", "stem__supergpqa", 1, ("supergpqa", {})),
    ("finqa", "table", "table__finqa", 1, ("finqa", {})),
    ("hitab", "table", "table__hitab", 1, ("hitab", {})),
    ("multihiertt", "table", "table__multihier", 4, ("multihiertt", {})),
    ("codeio", "simulation", "simulation__codeio", 4, ("codeio", {})),
    ("cruxeval-i", "simulation", "simulation__cruxeval-i", 1, ("cruxeval", {"mode": "i"})),
    ("cruxeval-o", "simulation", "simulation__cruxeval-o", 1, ("cruxeval", {"mode": "o"})),
    ("ifeval", "ood", "ood__ifeval", 1, ("ifeval", {})),
    ("livebench_reasoning", "ood", "ood__livebench_reasoning", 1, ("livebench", _LB_WINDOW)),
    ("livebench_language", "ood", "ood__livebench_language", 1, ("livebench", _LB_WINDOW)),
    ("livebench_data_analysis", "ood", "ood__livebench_data_analysis", 1, ("livebench", _LB_WINDOW)),
]
# Guru's other math test files (`nanoverl/minerva`, `nanoverl/olympiad_bench`, `SDSB/amc_repeated_4x`,
# `nanoverl/aime2025_repeated_8x`: in its offline_eval folder, not in the 17-task table), Reasoning360's
# sampling; the repeated files hold each problem 4x / 8x, like aime's
_R360_MORE = [
    ("amc_r360", "math", "math__amc_repeated_4x", 4, ("amc", {})),
    ("aime25_r360", "math", "math__aime2025_repeated_8x", 4, ("aime", {"year": 2025})),
    ("minerva_r360", "math", "math__minerva", 4, ("minerva", {})),
    ("olympiad_bench_r360", "math", "math__olympiad_bench", 4, ("olympiadbench", {})),
]
for _name, _domain, _prefix, _n, (_conv, _opts) in _R360_SUITE + _R360_MORE:
    _repeats = re.search(r"repeated_(\d+)x", _prefix)
    _note = (f"Reasoning360's file holds each problem {_repeats.group(1)} times: n={_n} is "
             f"{_n * int(_repeats.group(1))} samples per problem" if _repeats else "")  # fmt: skip
    _add(Benchmark(_name, _domain, (f"{_prefix}_[0-9]*.parquet", f"{_prefix}.parquet"),
                   f"Guru offline_eval parquet {_prefix}_*.parquet (LLM360/guru-RL-92k, offline_eval/), "
                   f"or the public source's own file with --file {_name}=PATH (converter {_conv})",
                   verl_or(_conv, **_opts), n=_n, **_R360, note=_note))  # fmt: skip
SUITES["reasoning360"] = [name for name, *_ in _R360_SUITE]

# reasoning-gym task sets, generated (no file): 100 problems per task, seed 42, temperature 0.6, top_p 0.9,
# 2048 tokens, 3 samples (reasoning-gym's training/evaluations/evaluate_model.py eval yaml: size 100,
# seed 42, eval_repeats 3). `rg_<dataset>` names any registered reasoning-gym dataset; the suite
# `reasoning_gym` is a spread over its categories (arithmetic, algorithmic, logic, games, cognition).
_RG = dict(n=3, temperature=0.6, top_p=0.9, max_new_tokens=2048)
RG_SIZE, RG_SEED = 100, 42
RG_SUITE = ["basic_arithmetic", "chain_sum", "leg_counting", "letter_counting", "number_sorting", "spell_backward",
            "word_sorting", "family_relationships", "syllogism", "countdown", "maze", "sudoku"]  # fmt: skip


def gym_benchmark(task: str) -> Benchmark:
    def generate() -> list[Problem]:
        from reasonrl.data.gym import generate as gym_generate

        return gym_generate([(task, 1.0)], RG_SIZE, RG_SEED, raw_seed=True)  # reasoning-gym's own items

    return Benchmark(f"rg_{task}", "gym", (), f"reasoning-gym {task}: generated, {RG_SIZE} problems, seed {RG_SEED}",
                     verl_rows, generate=generate, **_RG)  # fmt: skip


for _task in RG_SUITE:
    _add(gym_benchmark(_task))
SUITES["reasoning_gym"] = [f"rg_{t}" for t in RG_SUITE]
# Search-R1's seven QA sets (FlashRAG_datasets: <set>/<split>.jsonl with id, question, golden_answers), with
# Search-R1's prompt and exact match (qa_em), greedy and one sample as Search-R1 evaluates them; the model
# searches only when the eval runs the tool: --tools search_r1 --search-url URL (docs/rollouts.md, "Search")
_SEARCH_QA = [("nq", "test"), ("triviaqa", "test"), ("popqa", "test"), ("hotpotqa", "dev"),
              ("2wikimultihopqa", "dev"), ("musique", "dev"), ("bamboogle", "test")]  # fmt: skip
for _set, _split in _SEARCH_QA:
    _add(Benchmark(_set, "qa", (f"{_set}/{_split}.jsonl", f"{_set}_{_split}*.jsonl", f"{_set}_{_split}*.parquet"),
                   f"RUC-NLPIR/FlashRAG_datasets {_set}/{_split}.jsonl: id, question, golden_answers",
                   converted("search_r1", dataset=_set, split=_split), n=1, temperature=0.0, max_new_tokens=2048,
                   note="searches only with the search tool (--tools search_r1 --search-url URL); else from memory"))  # fmt: skip
SUITES["search_qa"] = [name for name, _ in _SEARCH_QA]
SUITES["r1"] = ["aime24", "aime25", "math500", "gpqa_diamond"]
SUITES["zero_rl_math"] = ["aime24", "amc23", "math500", "minerva_math", "olympiadbench"]


def benchmark_table() -> str:
    """`reasonrl eval --list-benchmarks`: every registered benchmark with its domain, default sampling
    and the file it reads, then the suites (any reasoning-gym dataset is also `rg_<name>`)."""
    head = ["benchmark", "domain", "n", "temperature", "top_p", "max_new_tokens", "file (under --data-dir)"]
    rows = [
        [b.name, b.domain, b.n, b.temperature, b.top_p, b.max_new_tokens, " or ".join(b.files) or "generated"]
        for b in (BENCHMARKS.get(n) for n in BENCHMARKS.names())
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    lines += ["", "suites:"] + [f"  {name}: {', '.join(members)}" for name, members in SUITES.items()]
    lines.append("any reasoning-gym dataset: rg_<name> (`reasonrl data list` names them)")
    return "\n".join(lines)


def resolve(names: list[str]) -> list[Benchmark]:
    """Benchmarks by name or suite name, in order, without repeats; unknown names list the known."""
    out: list[str] = []
    for n in names:
        for m in SUITES.get(n, [n]):
            if m.startswith("rg_") and m not in BENCHMARKS:  # any reasoning-gym dataset, generated
                from reasonrl.data.gym import parse_mix

                try:
                    parse_mix(m[3:], where="")
                except InputError as e:
                    raise InputError(f"unknown benchmark {m!r}: {str(e).lstrip(': ')}") from None
                _add(gym_benchmark(m[3:]))
            if m not in BENCHMARKS:
                raise InputError(
                    f"unknown benchmark {m!r}; known: {', '.join(BENCHMARKS.names())}; suites: {', '.join(SUITES)}"
                )
            if m not in out:
                out.append(m)
    return [BENCHMARKS.get(m) for m in out]


def load_benchmark(b: Benchmark, data_dir: str | Path | None = None, path: str | Path | None = None,
                   limit: int | None = None, dir_key: str = "--data-dir") -> list[Problem]:  # fmt: skip
    """The benchmark's problems from `path`, or its standard file under `data_dir` (generated
    benchmarks: generated, seeded). `dir_key`: how the caller sets `data_dir`, for the errors (a
    training run's val.data_dir; `reasonrl eval`'s --data-dir, beside which --file names a path)."""
    from reasonrl.data.files import read_rows

    if b.generate is not None:
        problems = b.generate()
        return problems[:limit] if limit else problems
    if path is None:
        found = b.find(Path(data_dir)) if data_dir is not None else None
        if found is None:
            raise InputError(
                f"benchmark {b.name}: no file matching {' or '.join(b.files)} in "
                f"{data_dir if data_dir is not None else f'(no {dir_key} given)'}; expected {b.source}. "
                f"Download it (e.g. datasets.load_dataset(...).to_json / to_parquet) into {dir_key}"
                + (f", or pass --file {b.name}=PATH (a file, a datasets directory or hf:ORG/NAME)"
                   if dir_key == "--data-dir" else "")
            )  # fmt: skip
        path = found
    path = Path(path)
    problems = b.convert(read_rows(path), path)
    if not problems:
        raise InputError(f"benchmark {b.name}: {path} holds no problems for it (expected {b.source})")
    return problems[:limit] if limit else problems
