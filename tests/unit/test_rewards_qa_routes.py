"""verl's remaining default routes: Search-R1 exact match (with the answers that try to score without
answering), code-contest and geometry names, and Reasoning360's reward_metric switch on math rows."""

from __future__ import annotations

import pytest

from reasonrl.errors import InputError
from reasonrl.rewards import check_routable, score
from reasonrl.rewards.routing import verifier_name
from reasonrl.types import Problem


def _p(data_source, gt="1", **extra):
    return Problem([{"role": "user", "content": "q"}], gt, data_source, extra_info=extra)


def test_search_r1_exact_match_and_its_hacks():
    p = _p("searchR1_nq", {"target": ["Beijing", "Peking"]})
    assert verifier_name(p) == "qa_em"
    assert score("<answer> The Beijing. </answer>", p).score == 1.0  # articles, case, punctuation
    assert score("<answer>Peking</answer>", p).score == 1.0
    assert score("<think>x</think><answer>peking</answer>", p).score == 1.0
    for hack in ("<answer>Beijing, Peking, Paris, London</answer>",  # every candidate in one tag
                 "Beijing", "<answer></answer>", "<answer>the</answer>",  # no tag; empty; only an article
                 "<think><answer>Beijing</answer>", "<answer>Beijing</answer><answer>Paris</answer>"):  # fmt: skip
        assert score(hack, p).score == 0.0, hack
    assert score("<answer>Peking</answer>", _p("searchR1_hotpotqa", '{"target": ["Peking"]}')).score == 1.0


def test_search_r1_gold_forms_and_bad_golds():
    from reasonrl.rewards.verifiers.qa import gold_aliases

    assert score("<answer>new  York, city!</answer>", _p("searchR1_nq", ["New York City"])).score == 1.0
    assert score("<answer>new york</answer>", _p("searchR1_nq", ["New York City"])).score == 0.0
    assert gold_aliases({"answers": ["a", 2]}) == ["a", "2"] and gold_aliases({"answer": "b"}) == ["b"]
    assert (
        gold_aliases(7) == ["7"]
        and gold_aliases("Paris") == ["Paris"]
        and gold_aliases('["x", "y"]') == ["x", "y"]
    )
    assert score("<answer>Paris</answer>", _p("searchR1_nq", "Paris")).score == 1.0
    assert score("<answer>P</answer>", _p("searchR1_nq", "Paris")).score == 0.0  # not a letter of the gold
    assert (
        score("<answer>an</answer>", _p("searchR1_nq", ["The", "Paris"])).score == 0.0
    )  # an alias of nothing
    for bad in (
        [],
        {"target": []},
        {"question": "q"},
        None,
        True,
        ["the", "!"],
        ["Paris", None],
        {"target": [["Paris"]]},
    ):
        with pytest.raises(ValueError, match=r"^qa_em: ground truth .* has no gold answer"):
            gold_aliases(bad)


@pytest.mark.parametrize(
    "data_source, name",
    [("codecontests", "code"), ("apps", "code"), ("codeforces", "code"), ("taco", "code"),
     ("hiyouga/geometry3k", "math"), ("HuggingFaceH4/MATH-500", "math"), ("searchR1_musique", "qa_em")],
)  # fmt: skip
def test_verl_default_names_route(data_source, name):
    assert verifier_name(_p(data_source)) == name


def test_reward_metric_selects_the_math_variant():
    assert verifier_name(_p("math__x", reward_metric="prime_math")) == "math"
    assert verifier_name(_p("math__x", reward_metric="default")) == "math"
    assert verifier_name(_p("math__x", reward_metric="math_llm_judge")) == "judge"
    assert verifier_name(_p("math__x", reward_metric="math_dapo")) == "math"
    assert verifier_name(_p("math__x", reward_metric=None)) == "math"
    with pytest.raises(
        InputError, match=r"row 0: extra_info.reward_metric 'mystery' is not known .*known: default"
    ):
        check_routable([_p("math__x", reward_metric="mystery")], "train")
