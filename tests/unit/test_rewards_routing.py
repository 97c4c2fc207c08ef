"""Routing by data_source prefix (Reasoning360 / verl names), explicit override, load-time checks."""

from __future__ import annotations

import pytest

from reasonrl.rewards import VERIFIERS, check_routable, score, verifier_name
from reasonrl.rewards.routing import PREFIXES
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(60)


def P(ds, verifier=None, gt="1"):
    return Problem(
        prompt=[{"role": "user", "content": "q"}], ground_truth=gt, data_source=ds, verifier=verifier
    )


@pytest.mark.parametrize(
    "data_source, name",
    [
        ("math__deepscaler_preview", "math"),
        ("math__merged_deduped_dapo_or1_dataset", "math"),
        ("math_dapo", "math"),
        ("lighteval/MATH", "math"),
        ("DigitalLearningGmbH/MATH-lighteval", "math"),
        ("aime2024", "math"),
        ("aime25", "math"),
        ("numina_olympiads", "math"),
        ("deepmath", "math"),
        ("zwhe99/DeepMath-103K", "math"),
        ("textbook_reasoning", "judge"),
        ("openai/gsm8k", "gsm8k"),
        ("codegen__leetcode2k", "code"),
        ("simulation__codeio_fixed_12.1k", "codeio"),
        ("simulation__cruxeval-o", "cruxeval"),
        ("simulation__cruxeval-i", "cruxeval"),
        ("simulation__arcagi1", "arc"),
        ("simulation__barc", "arc"),
        ("logic__arcagi2", "arc"),
        ("logic__zebra_puzzle_dataset", "zebra"),
        ("logic__ordering_puzzle_dataset", "ordering"),
        ("logic__graph_logical_dataset", "graph"),
        ("table__hitab", "table"),
        ("table__multihier", "table"),
        ("stem__gpqa_diamond", "choice"),
        ("stem__gpqa_diamond_no_box", "choice"),
        ("stem__supergpqa", "choice"),
        ("stem_web", "judge"),
        ("reasoning_gym", "reasoning_gym"),
        ("ood__ifeval", "ifeval"),
        ("reasonrl/arithmetic", "arithmetic"),
        ("reasonrl/countdown", "countdown"),
    ],
)
def test_prefix_routing(data_source, name):
    assert verifier_name(P(data_source)) == name


def test_explicit_override_wins():
    assert verifier_name(P("math__x", verifier="table")) == "table"
    assert verifier_name(P("no_such_source", verifier="math")) == "math"


def test_override_read_from_row_extra_info():
    row = P("math__x").to_row()
    row["extra_info"]["verifier"] = "choice"
    assert verifier_name(Problem.from_row(row)) == "choice"


@pytest.mark.parametrize("data_source", ["unknown_source", "", "Math__caps", "mmlu", "gsm8k"])
def test_unknown_data_source_fails_at_load_time(data_source):
    with pytest.raises(ValueError, match="no verifier for data_source"):
        check_routable([P("math__ok"), P(data_source)], where="train.parquet")


def test_check_routable_names_the_row():
    with pytest.raises(ValueError, match=r"train.parquet row 1"):
        check_routable([P("math__ok"), P("nope")], where="train.parquet")


def test_override_to_unregistered_verifier_fails_at_load_time():
    with pytest.raises(ValueError, match="unknown verifier 'magic'"):
        check_routable([P("math__ok", verifier="magic")])


def test_text_prefixes_route_to_registered_verifiers():
    served_elsewhere = {"code"}  # rewards.verifiers.code (sandbox), registered by its own module
    for _, name in PREFIXES:
        if name not in served_elsewhere:
            assert name in VERIFIERS, name


def test_more_specific_prefixes_come_first():
    for i, (a, _) in enumerate(PREFIXES):
        for b, _ in PREFIXES[i + 1 :]:
            assert not b.startswith(a) or b == a, f"{b!r} is shadowed by earlier prefix {a!r}"


def test_score_end_to_end():
    assert score(r"\boxed{7}", P("math__x", gt="7")).score == 1.0
    assert score("Answer: B", P("stem__gpqa", gt="B")).score == 1.0
