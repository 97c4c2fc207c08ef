"""Edges of the "ifeval" checkers and of the sentence and word counting they share (each test closes
a gap a mutant of `rewards/verifiers/ifeval.py` showed)."""

from __future__ import annotations

import pytest

from reasonrl.rewards.verifiers import ifeval
from reasonrl.rewards.verifiers.ifeval import CHECKERS, sentences, word_tokens


@pytest.mark.parametrize(
    "relation, expected",  # a keyword found 3 times against frequency 2, 3 and 4
    [("less than", [False, False, True]), ("at least", [True, True, False]), ("at_least", [True, True, False]),
     (None, [True, True, False]), ("at most", [False, True, True]), (" At_Most ", [False, True, True]),
     ("exactly", [False, True, False]), ("equal to", [False, True, False])],
)  # fmt: skip
def test_relations(relation, expected):
    freq = CHECKERS["keywords:frequency"]
    assert [freq("cat cat Cat", "cat", n, relation) for n in (2, "3", 4.0)] == expected


def test_relation_defaults_and_unknown_relations():
    assert CHECKERS["keywords:frequency"] is ifeval.keyword_frequency  # the decorator keeps the function
    assert ifeval.keyword_frequency("cat cat", "cat", 2) and not ifeval.keyword_frequency("cat", "cat", 2)
    assert ifeval.letter_frequency("aab", "A", 2) and not ifeval.letter_frequency("ab", "a", 2)
    assert ifeval.number_words("one two", 2) and not ifeval.number_words("one", 2)
    assert ifeval.number_sentences("One. Two.", 2) and not ifeval.number_sentences("One.", 2)
    assert ifeval.capital_word_frequency("AB CD ef", 2) and not ifeval.capital_word_frequency("AB cd", 2)
    with pytest.raises(ValueError, match="unknown relation 'around'"):
        ifeval.keyword_frequency("cat", "cat", 1, "around")


@pytest.mark.parametrize(
    "text, expected",
    [("Item 1. one more thing.", ["Item 1. one more thing."]),  # a number before a lowercase word
     ("It is 1. One more.", ["It is 1.", "One more."]), ("It is big. one more.", ["It is big.", "one more."]),
     ("Wait... what now?", ["Wait... what now?"]), ("Wait... What now?", ["Wait...", "What now?"]),
     ("Really?! no way.", ["Really?!", "no way."]), ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
     ("See Dr. Who. I. M. Pei came.", ["See Dr. Who.", "I. M. Pei came."]), ("A line\nno stop", ["A line\nno stop"]),
     ("  One.   Two!  ", ["One.", "Two!"]), (". Then.", [". Then."]),
     ("He met (Dr. Who. Then left.", ["He met (Dr. Who.", "Then left."])],
)  # fmt: skip
def test_sentences_split_where_punkt_splits(text, expected):
    assert sentences(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [("DON'T stop", ["DO", "N'T", "stop"]), ("n't", ["n't"]), ("(Hello), world!", ["Hello", "world"]),
     ("Xerox X-ray", ["Xerox", "X-ray"]), ("a--b", ["a", "b"]), ("a , b", ["a", "b"]), ("U.S.A.", ["U.S.A"]),
     ('say "WHO" [x] {y} <z>', ["say", "WHO", "x", "y", "z"])],
)  # fmt: skip
def test_word_tokens(text, expected):
    assert word_tokens(text) == expected


def test_nth_paragraph_bounds_and_a_paragraph_without_words():
    nth = CHECKERS["length_constraints:nth_paragraph_first_word"]
    two = "Hello there.\n\nWorld here."
    assert nth(two, 2, 2, "world") and nth(two, 2, 1, " Hello ")
    assert not nth(two, 2, 0, "world") and not nth(two, 2, 3, "world") and not nth(two, 3, 2, "world")
    assert not nth("!!!\n\nHello", 2, 1, "hello")  # no word to start it


def test_postscript_markers():
    ps = CHECKERS["detectable_content:postscript"]
    assert ps("Hi\nP.S. bye") and not ps("Hi\nbye")  # the default marker
    assert (
        ps("Hi\nP. P. S. later", "P. P. S")
        and ps("Hi\np.p.s later", "P.P.S")
        and not ps("Hi\nP.S. x", "P.P.S")
    )
    assert ps("Hi\np.s. x", "P. S.") and ps("Hi\nps x", "ps")
    assert ps("Hi\nNote: x", "Note:") and not ps("Hi\nNote x", "Note:")
