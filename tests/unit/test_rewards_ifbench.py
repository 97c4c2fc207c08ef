"""The ifbench verifier (Reasoning360's ood__ifbench rows): each constraint IFEval does not have is
followed by a compliant answer and broken by a non-compliant one, including the answers that satisfy
the reference checkers without doing what the constraint says; a row scores 1 only when every
constraint holds."""

from __future__ import annotations

import pytest

from reasonrl.rewards import check_routable, score
from reasonrl.rewards.verifiers.ifeval import CHECKERS
from reasonrl.types import Problem

P = "Write a short note about rivers."
# id: (kwargs, followed, broken...)
CASES = {
    "copy:copy": ({"prompt_to_repeat": P}, P.upper(), P + " Rivers are long."),
    "copy:copying_simple": ({"prompt_to_repeat": P}, f" {P} ", "Rivers are long."),
    "copy:copying_multiple": ({"prompt_to_repeat": P, "N": 2}, f"{P}\n******\n{P}", f"{P}\n******\n{P}\n******\n{P}"),
    "new:copy_span_idx": ({"prompt_to_repeat": P, "n_start": 0, "n_end": 7}, "Write a", "Write a short"),
    "copy:repeat_phrase": ({"phrase": "the quick brown fox jumps", "small_n": 2},
                           "the slow brown fox jumps and the quick red fox jumps",
                           "the quick brown fox jumps and the quick brown fox jumps",  # unchanged copies
                           "the slow brown fox jumps and the quick brown fox jumps"),  # the reference only checks the last
    "detectable_format:sentence_hyphens": ({}, "Rivers-flow-to-the-sea", "Rivers flow-to the sea", "Rivers"),
    "keywords:no_adjacent_consecutive": ({}, "rivers move quietly", "a big river", ""),
    "detectable_format:square_brackets": ({}, "[rivers] [flow]", "[rivers] flow"),
    "keywords:word_once": ({"keyword": "river"}, "A river flows.", "A river, a river.", "Rivers flow."),
    "keywords:word_count_different_numbers": ({"keyword": "sea", "frequency": 2, "relation": "at least"},
                                              "sea and sea", "sea", "seasea overseas"),
    "keywords:exclude_word_harder": ({"keyword": "water"}, "Rivers flow.", "Rivers carry water."),
    "paragraphs:paragraphs": ({}, "One.\n***\nTwo.", "One.\n***\nTwo.\n***\nThree.", "One.\n***\n\n***\nTwo."),
    "paragraphs:paragraphs2": ({}, "One.\n\nTwo.", "One.\n\nTwo.\n\nThree."),
    "first_word:first_word_sent": ({"first_word": "rivers"}, "Rivers flow. Rivers bend.", "Rivers flow. They bend."),
    "first_word:first_word_answer": ({"first_word": "rivers"}, "Rivers flow. They bend.", "They flow."),
    "last_word:last_word_sent": ({"last_word": "sea"}, "They reach the sea. All go to sea!", "They reach the sea. Then stop."),
    "last_word:last_word_answer": ({"last_word": "sea"}, "Rivers end in the sea.", "The sea ends rivers."),
    "detectable_format:bigram_wrapping": ({}, "<<Rivers flow>> <<to the>> <<sea today>>", "<<Rivers flow>> to the sea"),
    "punctuation:punctuation_dot": ({}, "Rivers flow", "Rivers flow."),
    "punctuation:punctuation_exclamation": ({}, "Rivers flow.", "Rivers flow!"),
    "count:lowercase_counting": ({"N": 1}, "Rivers flow to Sea", "rivers flow rivers"),
    "letters:letter_counting": ({"N": 5, "relation": "less than"}, "abcd", "abcde"),
    "letters:letter_counting2": ({"letter": "r", "let_frequency": 3, "let_relation": "at least"}, "rivers run", "rain"),
    "count:counting_composition": ({"n_sent": 1, "n_words": 2},
                                   "Rivers flow.\n* * *\nSeas rise.\n* * *\nRain falls.",
                                   "Rivers flow.\n* * *\nSeas rise.", "Rivers flow fast.\n* * *\nSeas rise.\n* * *\nRain falls."),
    "count:count_unique": ({}, "Rivers flow to seas.", "Rivers flow, rivers bend.", ""),
    "count:count_increment_word": ({"keyword1": "river", "keyword2": "sea"}, "A river meets the sea, the sea.",
                                   "A river meets the sea."),
    "keywords:palindrome": ({}, "I saw a racecar today.", "I saw a car.", "a I"),  # one-letter words do not count
    "keywords:keyword_specific_position": ({"keyword": "delta", "n": 2, "m": 3},
                                           "Rivers flow. They form delta today.", "Rivers flow. They form the delta.",
                                           "Rivers flow."),
    "keywords:start_end": ({}, "Rivers run to the sea, rivers", "Rivers run to the sea, rivers.", "Rivers"),
}  # fmt: skip


def test_every_ifbench_only_id_is_covered():
    assert set(CASES) <= set(CHECKERS) and len(CASES) == 29


@pytest.mark.parametrize("iid", sorted(CASES))
def test_constraint_followed_and_broken(iid):
    kwargs, good, *bad = CASES[iid]
    assert CHECKERS[iid](good, **kwargs), (iid, good)
    for b in bad:
        assert not CHECKERS[iid](b, **kwargs), (iid, b)


def _row(gt):
    return Problem([{"role": "user", "content": P}], gt, "ood__ifbench", "ood")


def test_rows_route_and_need_every_constraint():
    gt = ("[{'instruction_id': ['punctuation:punctuation_dot', 'keywords:word_once'], "
          "'kwargs': [{'N': None}, {'keyword': 'river'}]}]")  # fmt: skip
    p = _row(gt)
    check_routable([p], "ifbench")
    assert score("A river flows", p).score == 1.0
    assert score("A river flows.", p).score == 0.0  # one of two broken
    assert score("<think>draft.</think>A river flows", p).score == 1.0  # only the answer is checked
    assert score("<think>A river flows", p).score == 0.0
    assert score("", p).score == 0.0
    with pytest.raises(ValueError, match="unsupported instruction id 'nope:x'"):
        score("x", _row([{"instruction_id": ["nope:x"], "kwargs": [{}]}]))
