"""Evaluation statistics against hand-computed values and brute force: pass@k (n=5, c=2 by hand, all
k-subsets for small n), maj@k with equivalent-but-different answers and ties, standard error and
bootstrap coverage on simulated data, macro averages."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from reasonrl.eval.metrics import (
    answer_key,
    best_at_n,
    bootstrap_ci,
    macro_average,
    maj_at_k,
    mean_at_n,
    pass_at_k,
    standard_error,
    worst_at_n,
)


def test_pass_at_k_by_hand_n5_c2():
    # 1 - C(3, k) / C(5, k): k=1 -> 1 - 3/5, k=2 -> 1 - 3/10, k=3 -> 1 - 1/10, k>=4 -> C(3, k) = 0
    expected = {1: 0.4, 2: 0.7, 3: 0.9, 4: 1.0, 5: 1.0}
    for k, want in expected.items():
        assert pass_at_k(5, 2, k) == pytest.approx(want, abs=1e-12), k


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, 7])
def test_pass_at_k_equals_enumeration_over_all_k_subsets(n):
    for c in range(n + 1):
        correct = [1] * c + [0] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(range(n), k))
            brute = sum(any(correct[i] for i in s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_for_large_n_and_rejects_bad_arguments():
    # C(1000, 500) overflows floats; the product form does not
    assert pass_at_k(1000, 1, 1) == pytest.approx(0.001)
    assert pass_at_k(1000, 10, 500) == pytest.approx(1 - math.comb(990, 500) / math.comb(1000, 500))
    assert pass_at_k(16, 0, 8) == 0.0
    for bad in ((5, 6, 1), (5, 2, 0), (5, 2, 6), (5, -1, 1)):
        with pytest.raises(ValueError, match="pass@k"):
            pass_at_k(*bad)


def test_mean_best_worst():
    s = [1.0, 0.0, 0.5, 0.0]
    assert (mean_at_n(s), best_at_n(s), worst_at_n(s)) == (0.375, 1.0, 0.0)


def test_equivalent_answers_share_a_key_and_different_ones_do_not():
    half = {answer_key(a) for a in ("1/2", "0.5", "\\frac{1}{2}", "$0.50$", "50%", " 0.5 ")}
    assert half == {"num:1/2"}
    assert answer_key("\\text{Paris}") == answer_key("paris") != answer_key("Lyon")
    assert answer_key("x^2 + 1") == answer_key("x^2  +  1")
    assert answer_key(None) is None and answer_key("   ") is None


def test_maj_at_k_votes_with_normalised_answers_and_breaks_ties_by_first_appearance():
    answers = ["0.5", "1/3", "\\frac{1}{2}", None, "1/3", "1/3"]
    keys = [answer_key(a) for a in answers]
    scores = [1.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    # first 3: {1/2: 2 (0.5 and \frac12 vote together), 1/3: 1} -> 1/2, correct
    assert maj_at_k(keys, scores, 3) == 1.0
    # first 4: the sample without an answer does not vote
    assert maj_at_k(keys, scores, 4) == 1.0
    # first 5: 1/2 has 2 votes, 1/3 has 2: a tie goes to the answer seen first (0.5 at index 0)
    assert maj_at_k(keys, scores, 5) == 1.0
    # first 6: 1/3 wins 3 to 2
    assert maj_at_k(keys, scores, 6) == 0.0
    # samples without an answer never vote, however many they are; with no answer at all, 0
    assert maj_at_k([None, None, None, answer_key("7")], [0.0, 0.0, 0.0, 1.0], 4) == 1.0
    assert maj_at_k([None, None], [1.0, 1.0], 2) == 0.0
    # the tie rule, the other way round: the wrong answer appears first
    assert maj_at_k([answer_key(a) for a in ("2", "3", "3.0", "2")], [0.0, 1.0, 1.0, 0.0], 4) == 0.0
    assert maj_at_k([None, None], [0.0, 0.0], 2) == 0.0
    assert maj_at_k(keys, scores, 1) == 1.0 and maj_at_k(keys[1:], scores[1:], 1) == 0.0  # maj@1: the first
    for bad_k, bad_scores in (
        (7, scores),
        (0, scores),
        (2, scores[:-1]),
    ):  # k past n, k of 0, a score missing
        with pytest.raises(ValueError, match="maj@k"):
            maj_at_k(keys, bad_scores, bad_k)


def test_standard_error_by_hand():
    # values 0, 1, 1, 0: mean 0.5, sample variance 1/3, SE = sqrt(1/3 / 4)
    assert standard_error([0.0, 1.0, 1.0, 0.0]) == pytest.approx(math.sqrt(1 / 12))
    assert standard_error([0.7]) == 0.0
    assert standard_error([0.0, 1.0]) == pytest.approx(0.5)  # sqrt(1/2 / 2): two values are enough


def test_intervals_cover_the_true_mean_close_to_nominal():
    # 400 simulated benchmarks of 200 Bernoulli(0.3) problems: the 95% intervals (mean +- 1.96 SE,
    # and the bootstrap) contain 0.3 in about 95% of them
    rng = random.Random(0)
    hits_se = hits_boot = 0
    trials = 400
    for t in range(trials):
        values = [1.0 if rng.random() < 0.3 else 0.0 for _ in range(200)]
        mean, se = sum(values) / len(values), standard_error(values)
        hits_se += mean - 1.96 * se <= 0.3 <= mean + 1.96 * se
        if t < 100:  # the bootstrap is slower: fewer trials
            lo, hi = bootstrap_ci(values, iters=400, seed=t)
            hits_boot += lo <= 0.3 <= hi
    assert 0.91 <= hits_se / trials <= 0.98
    assert 0.85 <= hits_boot / 100 <= 1.0


def test_bootstrap_ends_are_the_percentiles_of_the_resampled_means():
    # for 400 Bernoulli(0.3) problems the 2.5% / 97.5% percentiles of the resampled means are close to
    # mean -+ 1.96 SE (measured within 0.15 SE: the means move in steps of 1/400); a wrong percentile
    # index (the 10% point, the smallest mean) is 0.7 SE or more away
    rng = random.Random(1)
    for _ in range(5):
        values = [1.0 if rng.random() < 0.3 else 0.0 for _ in range(400)]
        mean, se = sum(values) / len(values), standard_error(values)
        lo, hi = bootstrap_ci(values)
        assert abs(lo - (mean - 1.96 * se)) < 0.25 * se and abs(hi - (mean + 1.96 * se)) < 0.25 * se


def test_bootstrap_ends_are_exactly_the_2_5_and_97_5_percent_points_of_the_resampled_means():
    # white-box: the same seeded resampling as bootstrap_ci (problems drawn with replacement, in order),
    # on continuous values so no two means tie: 50 of the 2000 means lie below the low end and 1950 at
    # or below the high end (an index one off, or the 1.7% point, would count otherwise)
    draw = random.Random(5)
    values = [draw.random() for _ in range(30)]
    lo, hi = bootstrap_ci(values, seed=9)
    rng, n = random.Random(9), len(values)
    means = [sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(2000)]
    assert len(set(means)) == 2000
    assert sum(m < lo for m in means) == 50 and sum(m <= hi for m in means) == 1950
    lo, hi = bootstrap_ci(values, level=0.5, iters=100, seed=9)
    rng = random.Random(9)
    means = [sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(100)]
    assert sum(m < lo for m in means) == 25 and sum(m <= hi for m in means) == 75
    with pytest.raises(ValueError, match="bootstrap_ci of no values"):
        bootstrap_ci([])


def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    a, b = bootstrap_ci(values, seed=3), bootstrap_ci(values, seed=3)
    assert a == b and a[0] < 5 / 8 < a[1]


def test_macro_average_means_domains_then_domains():
    values = {"aime": 0.2, "math500": 0.6, "humaneval": 0.5, "gpqa": 0.3}
    domains = {"aime": "math", "math500": "math", "humaneval": "code", "gpqa": "stem"}
    out = macro_average(values, domains)
    assert out == pytest.approx({"code": 0.5, "math": 0.4, "stem": 0.3, "macro": 0.4})
    assert macro_average({}, domains) == {}  # nothing evaluated: no macro either


def test_compare_flags_differences_beyond_the_combined_interval(tmp_path):
    import json

    from reasonrl.eval.compare import compare_results, comparison_markdown, load_results

    a = {"benchmarks": {"aime24": {"mean@n": 0.30, "se": 0.02}, "math500": {"mean@n": 0.60, "se": 0.02},
                        "gsm8k": {"mean@n": 0.8, "se": 0.01}}}  # fmt: skip
    b = {"benchmarks": {"aime24": {"mean@n": 0.33, "se": 0.02}, "math500": {"mean@n": 0.70, "se": 0.02}}}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    c = compare_results(load_results(tmp_path / "a"), load_results(tmp_path / "b.json"))
    half = 1.96 * math.sqrt(0.02**2 + 0.02**2)  # 0.0554
    assert c["rows"]["aime24"]["diff"] == pytest.approx(0.03) and c["rows"]["aime24"][
        "ci95"
    ] == pytest.approx(half)
    assert c["rows"]["aime24"]["significant"] is False  # 0.03 < 0.055
    assert c["rows"]["math500"]["significant"] is True  # 0.10 > 0.055
    assert c["only_in_one"] == ["gsm8k"]
    assert "| math500 | 0.6000 | 0.7000 | +0.1000 | 0.0554 | yes |" in comparison_markdown(c)
    from reasonrl.errors import InputError

    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputError, match="not a reasonrl results.json"):
        load_results(tmp_path / "bad.json")
    with pytest.raises(InputError, match="results file not found"):
        load_results(tmp_path / "missing")
    for row, message in [(5, "not a row of metrics"), ({"mean@n": "0.5"}, "'mean@n' is not a number"),
                         ({"mean@n": 0.5, "se": None}, "'se' is not a number"), ({"n": True}, "'n' is not a number")]:  # fmt: skip
        (tmp_path / "bad.json").write_text(json.dumps({"benchmarks": {"x": row}}))
        with pytest.raises(InputError, match=f"bad.json: benchmark 'x': {message}"):
            load_results(tmp_path / "bad.json")


def test_compare_on_a_metric_without_a_standard_error_gives_no_interval():
    from reasonrl.eval.compare import compare_results, comparison_markdown

    # results.json's se is mean@n's; a pass@4 comparison must not borrow it (0.1 would pass as
    # "beyond" mean@n's 0.0554)
    a = {"benchmarks": {"aime24": {"mean@n": 0.30, "pass@4": 0.50, "se": 0.02}}}
    b = {"benchmarks": {"aime24": {"mean@n": 0.31, "pass@4": 0.60, "se": 0.02}}}
    c = compare_results(a, b, metric="pass@4")
    assert c["rows"]["aime24"]["diff"] == pytest.approx(0.10)
    assert (c["rows"]["aime24"]["ci95"], c["rows"]["aime24"]["significant"]) == (None, None)
    assert "| aime24 | 0.5000 | 0.6000 | +0.1000 | n/a | n/a |" in comparison_markdown(c)
    # a benchmark lacking the metric on one side is left out of the rows
    assert compare_results(a, {"benchmarks": {"aime24": {"mean@n": 0.3}}}, metric="pass@4")["rows"] == {}


def test_compare_names_benchmarks_evaluated_on_other_problems_or_settings(tmp_path, capsys):
    import json

    from reasonrl.cli import main as cli

    sampling = {"n": 4, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": 512}
    res = {"benchmarks": {"aime24": {"mean@n": 0.3, "se": 0.02}, "gsm8k": {"mean@n": 0.5, "se": 0.02},
                          "math500": {"mean@n": 0.4, "se": 0.02}}}  # fmt: skip
    sides = {
        "a": {"aime24": ("f1", sampling), "gsm8k": ("f2", sampling), "math500": ("f3", sampling)},
        "b": {
            "aime24": ("f1", sampling),
            "gsm8k": ("f9", sampling),
            "math500": ("f3", {**sampling, "temperature": 1.0, "n": 8}),
        },  # fmt: skip
    }
    for side, benches in sides.items():
        (tmp_path / side).mkdir()
        (tmp_path / side / "results.json").write_text(json.dumps(res))
        setup = {"model": side, "benchmarks": {k: {"problems": 30, "fingerprint": f, "sampling": s}
                                               for k, (f, s) in benches.items()}}  # fmt: skip
        (tmp_path / side / "samples.setup.json").write_text(json.dumps(setup))
    assert cli.main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b" / "results.json")]) == 0
    out = capsys.readouterr().out
    assert "not like for like: gsm8k (problems); math500 (n 4 vs 8, temperature 0.6 vs 1.0)" in out
    assert "aime24 (" not in out  # the same problems and settings
    # without the setup files (results copied alone) nothing is claimed either way
    (tmp_path / "b" / "samples.setup.json").unlink()
    assert cli.main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "not like for like" not in capsys.readouterr().out
    from reasonrl.eval.compare import setup_differences

    odd = {"benchmarks": {"x": {"fingerprint": "f", "sampling": [4]}}}  # a damaged side: no settings known
    assert setup_differences(odd, {"benchmarks": {"x": {"fingerprint": "f", "sampling": {"n": 4}}}}, "x") == [
        "n None vs 4"
    ]


def test_compare_names_benchmarks_whose_samples_hold_verifier_errors():
    from reasonrl.eval.compare import compare_results, comparison_markdown

    a = {"benchmarks": {"gsm8k": {"mean@n": 0.4, "se": 0.02, "verifier_errors": 0.125},
                        "math500": {"mean@n": 0.5, "se": 0.02, "verifier_errors": 0.0}}}  # fmt: skip
    b = {"benchmarks": {"gsm8k": {"mean@n": 0.5, "se": 0.02, "verifier_errors": 0.0},
                        "math500": {"mean@n": 0.5, "se": 0.02}}}  # fmt: skip
    out = comparison_markdown(compare_results(a, b))
    assert out.splitlines()[-1] == (
        "verifier errors or timeouts (scored 0, not measured; rerun the eval to score errors again): "
        "gsm8k (A 12.5%, B 0.0%)"
    )  # math500 has none on either side (one side's table from before the column: none known)
    clean = {"benchmarks": {k: {**v, "verifier_errors": 0.0} for k, v in a["benchmarks"].items()}}
    assert "verifier errors" not in comparison_markdown(compare_results(clean, b))


def test_result_files_are_found_down_to_the_depth_and_sorted(tmp_path):
    from reasonrl.eval.compare import find_result_files

    made = []
    for d in range(6):
        folder = tmp_path.joinpath(*[f"d{i}" for i in range(d)])
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("results.json", "checkpoints.json", "other.json"):
            (folder / name).write_text("{}")
        made += [folder / "checkpoints.json", folder / "results.json"]
    found = find_result_files(tmp_path)
    assert found == sorted(made[:10])  # depths 0..4, both names, not other.json, not depth 5
    assert find_result_files(tmp_path, depth=0) == sorted(made[:2])


def test_compare_lists_benchmarks_found_on_one_side_only_and_ignores_a_broken_setup(tmp_path):
    from reasonrl.eval.compare import compare_results, comparison_markdown, load_setup

    a = {"benchmarks": {"aime24": {"mean@n": 0.3, "se": 0.0}, "gsm8k": {"mean@n": 0.5, "se": 0.0}}}
    b = {"benchmarks": {"aime24": {"mean@n": 0.3, "se": 0.0}, "math500": {"mean@n": 0.5, "se": 0.0}}}
    c = compare_results(a, b)
    assert c["only_in_one"] == ["gsm8k", "math500"]
    text = comparison_markdown(c)
    assert text.splitlines()[:2] == [
        "| benchmark | A mean@n | B mean@n | B - A | ±ci95 | beyond ci |",
        "|---|---|---|---|---|---|",
    ]
    assert "| aime24 | 0.3000 | 0.3000 | +0.0000 | 0.0000 | no |" in text  # equal is not beyond a zero CI
    assert text.endswith("only in one file: gsm8k, math500\n")
    assert "only in one" not in comparison_markdown(compare_results(a, a))
    for broken in ("not json", '{"benchmarks": []}', "[1]"):
        (tmp_path / "samples.setup.json").write_text(broken)
        assert load_setup(tmp_path / "results.json") is None


def _eval_dir(path, scores: dict[str, list[list[float]]]):
    """An eval's output directory: samples.jsonl (one committed chunk per benchmark; scores[name][i] are
    problem i's sample scores) and the results.json `summarize` makes of them."""
    import json

    from reasonrl.eval.runner import summarize
    from reasonrl.eval.samples import commit_marker

    path.mkdir()
    lines, samples = [], []
    for name, problems in scores.items():
        for i, row in enumerate(problems):
            for j, score in enumerate(row):
                samples.append({"benchmark": name, "problem": i, "uid": f"{name}/{i}", "sample": j,
                                "score": score, "extracted": None, "reason": None, "finish_reason": "stop"})  # fmt: skip
                lines.append(json.dumps(samples[-1]))
        lines.append(json.dumps(commit_marker(name, 0)))
    (path / "samples.jsonl").write_text("\n".join(lines) + "\n")
    (path / "results.json").write_text(json.dumps(summarize(samples, {})))
    return path


def test_compare_of_two_evals_on_the_same_problems_gives_the_paired_interval(tmp_path, capsys):

    from reasonrl.cli import main as cli
    from reasonrl.eval.compare import compare_results, load_problem_scores, load_results

    # B solves every problem A solves (0-49) and 10 more: +0.10 on 100 problems. As independent
    # samples: 1.96 * sqrt(se_A^2 + se_B^2) = 0.1379, not beyond; paired, the differences are 1 on 10
    # problems and 0 on 90: sd sqrt(9/99), half-width 1.96 * sqrt(9/99/100) = 0.0591, beyond
    a = _eval_dir(tmp_path / "a", {"gsm8k": [[1.0 if i < 50 else 0.0] for i in range(100)]})
    b = _eval_dir(tmp_path / "b", {"gsm8k": [[1.0 if i < 60 else 0.0] for i in range(100)]})
    assert cli.main(["eval", "compare", str(a), str(b / "results.json")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        "| benchmark | A mean@n | B mean@n | B - A | ±ci95 | beyond ci | ±paired ci95 | beyond paired ci |"
    )
    assert "| gsm8k | 0.5000 | 0.6000 | +0.1000 | 0.1379 | no | 0.0591 | yes |" in out
    row = compare_results(
        load_results(a), load_results(b), scores=(load_problem_scores(a), load_problem_scores(b))
    )
    assert row["rows"]["gsm8k"]["paired_ci95"] == pytest.approx(1.96 * math.sqrt(9 / 99 / 100))
    # n samples per problem: a problem's score is the mean of its first n (as the table counts them)
    c = _eval_dir(tmp_path / "c", {"x": [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]})
    assert load_problem_scores(c) == {"x": {"0:x/0": 0.5, "1:x/1": 1.0, "2:x/2": 0.0}}


def test_no_paired_interval_without_the_same_problems_or_with_samples_of_another_table(tmp_path, capsys):
    import json

    from reasonrl.cli import main as cli

    a = _eval_dir(tmp_path / "a", {"gsm8k": [[float(i % 2)] for i in range(20)], "aime24": [[1.0], [0.0]]})
    b = _eval_dir(
        tmp_path / "b", {"gsm8k": [[float(i % 3 == 0)] for i in range(19)], "aime24": [[1.0], [1.0]]}
    )
    before = (b / "samples.jsonl").read_bytes() + b'{"benchmark": "gsm8k", "probl'  # a torn tail
    (b / "samples.jsonl").write_bytes(before)
    assert cli.main(["eval", "compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert (b / "samples.jsonl").read_bytes() == before  # compare reads; it mends nothing
    assert "| gsm8k | 0.5000 | 0.3684 | -0.1316 | " in out and "| gsm8k |" in out
    gsm8k = next(line for line in out.splitlines() if line.startswith("| gsm8k |"))
    assert gsm8k.endswith("| n/a | n/a |")  # 19 problems against 20: not paired
    assert next(line for line in out.splitlines() if line.startswith("| aime24 |")).endswith(
        f"| {1.96 * math.sqrt(0.5 / 2):.4f} | no |"  # differences 0 and 1: sd sqrt(1/2)
    )
    # samples that do not reproduce the table's mean@n (another eval's) give no paired interval
    results = json.loads((b / "results.json").read_text())
    for other in (0.75, 0.999):  # however close: the samples are another table's
        results["benchmarks"]["aime24"]["mean@n"] = other
        (b / "results.json").write_text(json.dumps(results))
        assert cli.main(["eval", "compare", str(a), str(b)]) == 0
        assert "paired" not in capsys.readouterr().out  # no row has one: the columns are left out


def test_the_paired_interval_covers_the_true_difference_close_to_nominal():
    # 400 simulated comparisons of two models on 200 problems drawn from one population: problem i's
    # difficulty p ~ U(0, 1) is A's chance to solve it, B's is min(1, p + 0.05), so B is better by
    # 0.05 - 0.05^2 / 2 = 0.04875 over the population. The paired interval covers that in about 95% of
    # the comparisons (measured: 0.950); the combined one, which ignores that both see the same
    # problems (their scores correlate by 1/3 here), in more (0.985), about a fifth wider (1.23x)
    from reasonrl.eval.compare import paired_interval

    rng, true_diff, trials = random.Random(2), 0.05 - 0.05**2 / 2, 400
    hits_paired = hits_combined = 0
    ratio = []
    for _ in range(trials):
        p = [rng.random() for _ in range(200)]
        a = {str(i): float(rng.random() < q) for i, q in enumerate(p)}
        b = {str(i): float(rng.random() < min(1.0, q + 0.05)) for i, q in enumerate(p)}
        mean_a, mean_b = sum(a.values()) / 200, sum(b.values()) / 200
        paired = paired_interval(a, b, mean_a, mean_b)
        combined = 1.96 * math.sqrt(
            standard_error(list(a.values())) ** 2 + standard_error(list(b.values())) ** 2
        )
        hits_paired += abs(mean_b - mean_a - true_diff) <= paired
        hits_combined += abs(mean_b - mean_a - true_diff) <= combined
        ratio.append(combined / paired)
    assert 0.92 <= hits_paired / trials <= 0.98
    assert hits_combined / trials >= 0.975
    assert sum(ratio) / trials > 1.15
