"""The edges of IFBench's constraints (rewards.verifiers.ifbench_text / ifbench_format, and the ones of
Reasoning360's ood__ifbench rows in rewards.verifiers.ifbench): each case sits on
a boundary the constraint's wording sets (exactly the count asked for, exactly the percentage, the
first or last letter of the alphabet, the shortest answer that can follow it, an answer with nothing
to count), so an off-by-one or a dropped guard in a checker changes a verdict here. Found by mutating
the checkers; the plain follow / break cases are in test_ifbench_ood.py."""

from __future__ import annotations

import pytest

from reasonrl.rewards.verifiers.ifeval import CHECKERS


def _mcq(stems: list[int], options: tuple[int, ...] = (5, 5, 5, 5)) -> str:
    """Questions whose stems have the given lengths, each with the given number of options."""
    return "\n".join(f"Question {i}: {'Q' * n}?\n" + "\n".join(f"{c}) opt" for c in "ABCDE"[:k])
                     for i, (n, k) in enumerate(zip(stems, options), 1))  # fmt: skip


def _csv_city(rows: int = 7, header: str = "ID,Country,City,Year,Count", city: str = "Paris") -> str:
    return header + "".join(f"\n{i},F,{city},2020,{i}" for i in range(rows))


def _csv_products(rows: int = 14, header: str = "ProductID,Category,Brand,Price,Stock", short: int = -1,
                  special: int = 3) -> str:  # fmt: skip
    """Products with the brand of row `special` quoted with a special character; row `short` lacks its
    last field."""
    body = [f'{i},Toys,"A&B",9,1' if i == special else f"{i},Toys,Acme,9" + ("" if i == short else ",1")
            for i in range(rows)]  # fmt: skip
    return "\n".join([header, *body])


def _tsv(rows: int = 3, header: str = "StudentID Subject Grade Semester Score", field: str = '"A"') -> str:
    """A tab-separated table, every field quoted; the grade of the last row is `field`."""
    lines = [header.split(), *(["1", "Math", "A", "F", "9"] for _ in range(rows))]
    cells = [[f'"{x}"' for x in line] for line in lines]
    cells[-1][2] = field
    return "\n".join("\t".join(line) for line in cells)


EDGES = [
    # counts and ratios
    ("count:word_count_range", {"min_words": 3, "max_words": 4}, "one two three four", True),  # the maximum
    ("ratio:stop_words", {"percentage": 50}, "the cat", True),  # exactly 50% stop words
    ("ratio:stop_words", {"percentage": 50}, "", False),  # no words: no ratio
    ("ratio:overlap", {"reference_text": "abcdef", "percentage": 50}, "abcx", True),  # abc of abc, bcx
    ("ratio:overlap", {"reference_text": "xyzdef", "percentage": 100}, "def", True),  # the reference's last
    ("ratio:overlap", {"reference_text": "abcdef", "percentage": 98}, "abcd", True),  # 100% is within 2 of 98
    ("ratio:overlap", {"reference_text": "abcdef", "percentage": 97}, "abcd", False),
    ("ratio:overlap", {"reference_text": "abcdef", "percentage": 0}, "ab", False),  # no trigram at all
    ("count:punctuation", {}, "Wait‽ Yes. No, maybe! Why? Now; go: ok", True),  # the interrobang itself
    ("count:punctuation", {}, "Wait!? Yes. No, maybe! Why? Now; go: ok", True),  # written !?
    ("count:punctuation", {}, "A?! B?! c. d, e; f:", True),  # one ?! is the interrobang, the other ? and !
    ("count:punctuation", {}, "?!.,!?;:", True),  # every mark and nothing else
    ("count:words_japanese", {"N": 2}, "I 猫", True),  # exactly N words
    ("count:words_japanese", {"N": 2}, "a b c 犬", False),  # the 2nd word is not Japanese (the 4th is)
    ("count:words_japanese", {"N": 2}, "I 12,", True),  # a number is not a word to translate
    ("count:words_japanese", {"N": 2}, "I ...", True),  # nor is bare punctuation
    ("count:words_japanese", {"N": 1}, "猫 X", False),
    ("count:pronouns", {"N": 3}, "She told him that", True),  # exactly N
    ("count:pronouns", {"N": 3}, "she/her/hers", True),  # a pronoun set counts each
    # words
    ("words:alphabet", {}, "Apples bite", True),  # two words, from the first letter
    ("words:alphabet", {}, "Zebras always", True),  # z wraps round to a
    ("words:alphabet", {}, "é h", False),  # a first word off the alphabet never starts the loop
    ("words:vowel", {}, "I tie a cat", True),  # exactly three vowels (i, e, a)
    ("words:vowel", {}, "I tie a tax", True),  # x is not a vowel
    ("words:consonants", {}, "", False),
    ("words:start_verb", {}, "", False),
    ("words:start_verb", {}, "Run, fast.", True),
    ("words:start_verb", {}, "Run 5 miles.", True),  # the first word is the verb, whatever follows
    ("words:odd_even_syllables", {}, "banana cat", False),  # 3 and 1 syllables: both odd
    ("words:odd_even_syllables", {}, "cat apple", True),  # two words alternate
    ("words:last_first", {}, 'Tea. "?"', False),  # a sentence with no word to chain to
    ("words:last_first", {}, '"?" Tea.', False),
    (
        "words:paragraph_last_first",
        {},
        "Time waits for time.\n...\nLove is love.",
        True,
    ),  # a line of no words
    ("words:paragraph_last_first", {}, "love love", True),  # two words suffice
    ("words:paragraph_last_first", {}, "", False),
    ("words:no_consecutive", {}, "Big apples.", True),  # two words suffice
    (
        "words:keywords_specific_position",
        {"keyword": "blue", "n": 2, "m": 3},
        "Hi there. The sky blue.",
        True,
    ),
    ("words:keywords_specific_position", {"keyword": "blue", "n": 2, "m": 3}, "Hi there. Blue sky.", False),
    ("words:words_position", {"keyword": "vibrant"}, "A vibrant day", True),  # the 2nd is the 2nd-last
    ("words:words_position", {"keyword": "vibrant"}, "A day vibrant ok", False),  # only 2nd-last
    # sentences
    ("sentence:alliteration_increment", {}, "I ran. Big bad dogs.", True),  # two sentences suffice
    # a run of k words that share a first letter counts k: a run of 3, then two runs of 2 (3 < 4) ...
    ("sentence:alliteration_increment", {}, "Silly snakes slither. Big bad cats cry.", True),
    # ... and a run of 4 is not fewer than two runs of 2
    ("sentence:alliteration_increment", {}, "Big bad bold brave. Silly snakes, tiny toads.", False),
    # a run at a sentence's start counts its first word too: 2 words, then 2 words again (not more)
    ("sentence:alliteration_increment", {}, "Big bad wolf. The big bad wolf.", False),
    ("ratio:sentence_words", {}, "Cats nap. Dogs run. Cats fly.", False),  # the first and the last share
    ("ratio:sentence_words", {}, "Cats nap. Dogs run. Owls run.", False),  # the second and the last share
    # layout
    ("format:parentheses", {}, "{a {b {c {d {e}}}}}", True),  # braces alone, five deep
    ("format:quotes", {}, '"X \'b "c" b\' a"', True),  # a letter between the marks is text
    ("format:options", {"options": "yes, no, maybe"}, "maybe", True),  # options split at commas
    ("format:options", {"options": "A, B, C"}, "B", True),  # letter options, exactly as written
    ("format:line_indent", {}, "Xa\n b", True),  # only spaces indent
    ("format:line_indent", {}, "a\n b", True),  # two lines suffice
    ("format:quote_unquote", {}, "\u201cCarpe diem\u201d means seize the day.", True),  # curly quotes
    ("format:quote_unquote", {}, "\u201c\u201d means nothing.", False),  # an empty quote
    ("format:quote_unquote", {}, 'I said "Carpe diem".', False),  # the quote, then only a period
    ("format:list", {"sep": "!?!?"}, "intro !?!? one", False),  # the text before the first is no item
    ("format:title_case", {}, "A Cat", True),  # a one-letter word, capitalised
    ("format:title_case", {}, "a Cat", False),
    ("format:title_case", {}, "The iPhone Case", True),  # a mixed-case name keeps its case
    ("format:title_case", {}, "The dNA Test", False),
    ("format:no_whitespace", {}, "", False),
    # the fixed tasks
    ("custom:mcq_count_length", {}, _mcq([3, 4, 5, 6]), True),
    ("custom:mcq_count_length", {}, _mcq([3, 4, 5]), False),  # three questions
    ("custom:mcq_count_length", {}, _mcq([3, 4, 5, 6], (5, 4, 5, 5)), False),  # four options to one
    ("custom:mcq_count_length", {}, _mcq([3, 4, 5, 5]), False),  # the last no longer than the third
    ("custom:character_reverse", {}, "a bird", False),
    ("custom:sentence_alphabet", {}, " ".join(f"{chr(65 + i)}x." for i in range(25)), False),  # 25 letters
    ("custom:csv_city", {}, _csv_city(), True),
    ("custom:csv_city", {}, _csv_city(city='"Washington, D.C."'), True),  # a quoted comma is in the field
    ("custom:csv_city", {}, _csv_city(rows=6), False),
    ("custom:csv_city", {}, _csv_city(city='"Paris, FR"'), True),  # CSV quoting: one field with a comma in it
    ("custom:csv_city", {}, _csv_city(header='"ID","Country","City","Year","Count"'), True),  # quoted names
    ("custom:csv_city", {}, _csv_city(header="ID,Country,Town,Year,Count"), False),
    ("custom:csv_special_character", {}, _csv_products(), True),
    ("custom:csv_special_character", {}, _csv_products(header="ProductID,Category,Brand,Cost,Stock"), False),
    ("custom:csv_special_character", {}, _csv_products(rows=13), False),
    ("custom:csv_special_character", {}, _csv_products(short=5), False),
    ("custom:csv_special_character", {}, _csv_products(special=0), True),  # in the first row
    ("custom:csv_quotes", {}, _tsv(), True),
    ("custom:csv_quotes", {}, _tsv(field='""'), True),  # an empty field, quoted
    ("custom:csv_quotes", {}, _tsv(field='"'), False),  # one quote mark is no quoted field
    ("custom:csv_quotes", {}, _tsv(field='A"'), False),
    ("custom:csv_quotes", {}, _tsv(rows=2), False),
    ("custom:csv_quotes", {}, _tsv(header="StudentID Subject Mark Semester Score"), False),
    # dates in Napoleon's lifetime (years 1769-1821), each month's last day
    ("custom:date_format_list", {}, "1769-01-01, 1821-12-31, 1800-01-31, 1800-02-29, 1800-03-31", True),
    ("custom:date_format_list", {}, "1800-04-30, 1800-06-30, 1800-09-30, 1800-11-30, 1800-12-31", True),
    *(
        ("custom:date_format_list", {}, d, False)
        for d in (
            "1768-12-31",
            "1822-01-01",
            "1800-02-30",
            "1800-06-31",
            "1800-09-31",
            "1800-11-31",
            "1800-13-01",
            "1800-01-00",
            *(f"1800-{m:02d}-32" for m in (1, 3, 5, 7, 8, 10, 12)),  # no month has 32 days
        )
    ),
    ("custom:date_format_list", {}, "12 May 1800", False),
    # copying
    ("repeat:repeat_change", {"prompt_to_repeat": "Write"}, "Compose", True),  # a one-word prompt
    ("repeat:repeat_change", {"prompt_to_repeat": "Write a poem"}, "", False),
    ("repeat:repeat_change", {"prompt_to_repeat": ""}, "Compose", False),
    (
        "repeat:repeat_change",
        {"prompt_to_repeat": "Write a poem about cats"},
        "Compose the poem about cats",
        False,
    ),
    ("repeat:repeat_span", {"prompt_to_repeat": "Hello brave world", "n_start": 6, "n_end": 9}, "brav", True),
    ("repeat:repeat_span", {"prompt_to_repeat": "Hello brave world", "n_start": 5, "n_end": 5}, "", False),
    # Reasoning360's ood__ifbench constraints (rewards.verifiers.ifbench)
    (
        "copy:repeat_phrase",
        {"phrase": "fox", "small_n": 1},
        "the slow fox",
        False,
    ),  # one word: nothing to change
    (
        "copy:repeat_phrase",
        {"phrase": "the quick fox", "small_n": 2},
        "the slow fox",
        False,
    ),  # once, not twice
    (
        "copy:repeat_phrase",
        {"phrase": "the quick fox", "small_n": 1},
        "the quick brown fox",
        False,
    ),  # a word added
    ("detectable_format:sentence_hyphens", {}, "Rivers-flow", True),  # two words suffice
    ("detectable_format:sentence_hyphens", {}, "Rivers--flow", False),  # an empty part
    ("detectable_format:sentence_hyphens", {}, "Rivers-\tflow", False),  # a blank inside a part
    ("detectable_format:square_brackets", {}, "[rivers] [flow", False),
    ("detectable_format:square_brackets", {}, "rivers] [flow]", False),
    ("detectable_format:square_brackets", {}, "", False),
    (
        "keywords:word_count_different_numbers",
        {"keyword": "sea", "frequency": 2},
        "sea and sea",
        True,
    ),  # at least
    ("paragraphs:paragraphs2", {}, "One.\n\n\n\nTwo.", False),  # an empty paragraph between
    ("paragraphs:paragraphs", {}, "***\nOne.\n***\nTwo.", True),  # a divider before the first: no paragraph
    ("paragraphs:paragraphs", {}, "One.\n***\nTwo.\n***", True),  # nor after the last
    (
        "first_word:first_word_answer",
        {"first_word": "rivers"},
        "Rivers, they flow.",
        True,
    ),  # punctuation is no part
    (
        "first_word:first_word_answer",
        {"first_word": ["rivers", "seas"]},
        "Rivers flow.",
        True,
    ),  # a list: its first
    ("first_word:first_word_answer", {"first_word": ("rivers",)}, "Rivers flow.", True),  # a tuple too
    ("first_word:first_word_answer", {"first_word": []}, "Rivers flow.", False),
    ("last_word:last_word_sent", {"last_word": "sea"}, "", False),
    ("detectable_format:bigram_wrapping", {}, "<<Rivers flow>>", True),  # one bigram suffices
    (
        "detectable_format:bigram_wrapping",
        {},
        "<<Rivers flow>> sea",
        True,
    ),  # a last odd word (as the reference)
    ("detectable_format:bigram_wrapping", {}, "<<Rivers flow <<to sea>>", False),
    (
        "detectable_format:bigram_wrapping",
        {},
        "<<Rivers>>",
        False,
    ),  # one word has no bigram (the reference passes it)
    ("detectable_format:bigram_wrapping", {}, "Rivers flow>> <<to sea>>", False),
    ("letters:letter_counting", {"N": 3}, "abc", True),  # at least, by default
    ("count:counting_composition", {"n_sent": 1, "n_words": 2}, "A b.\n* * *\n\n* * *\nC d.", False),
    ("count:counting_composition", {"n_sent": 1, "n_words": 2}, "A b.\n* * *\nC d.", False),  # two parts
    (
        "count:counting_composition",
        {"n_sent": 1, "n_words": 2},
        "Rivers flow. Seas rise.\n* * *\nRain falls.\n* * *\nSun shines.",
        False,
    ),  # two sentences in one
    (
        "count:count_increment_word",
        {"keyword1": "river", "keyword2": "sea"},
        "sea and sea",
        False,
    ),  # no river
    ("keywords:palindrome", {}, "my dad", True),  # three letters suffice
    (
        "keywords:keyword_specific_position",
        {"keyword": "delta", "n": 2, "m": 3},
        "Rivers flow. They form delta.",
        True,
    ),
    (
        "keywords:keyword_specific_position",
        {"keyword": "delta", "n": 2, "m": 3},
        "Rivers flow. They form.",
        False,
    ),
    (
        "keywords:keyword_specific_position",
        {"keyword": "delta", "n": 2, "m": 1},
        "Delta flows.",
        False,
    ),  # one sentence
    ("keywords:start_end", {}, "Rivers rivers", True),  # two words suffice
    ("keywords:start_end", {}, "Rivers run to seas", False),
    ("keywords:start_end", {}, "! rivers !", False),  # the same mark at both ends is no word
    # every sentence ends with an emoji
    ("format:emoji", {}, "", False),  # no sentences
    ("format:emoji", {}, "Hi \U0001f642. !!", False),  # a sentence of punctuation alone
    ("format:emoji", {}, "I love it \u2764\ufe0f. Me too \u2764\ufe0f.", True),  # emoji + variation selector
    ("format:emoji", {}, "I am happy. \U0001f642 You are too \U0001f642", True),  # split before the emoji
    ("format:emoji", {}, "I am happy. You are too \U0001f642", False),
    ("format:emoji", {}, "I am happy \U0001f642. You are too", False),  # the last one has none
    # the seven coordinating conjunctions, each distinct one counted once
    ("count:conjunctions", {"small_n": 7}, "and but for nor or so yet", True),
    ("count:conjunctions", {"small_n": 7}, "and but for nor or so so", False),
    ("count:conjunctions", {"small_n": 1}, "Yet.", True),
    ("count:conjunctions", {"small_n": 1}, "yesterday android", False),  # whole words only
]


@pytest.mark.parametrize("iid, kwargs, text, verdict", EDGES, ids=[f"{e[0]}:{e[2]!r}" for e in EDGES])
def test_edge(iid, kwargs, text, verdict):
    assert CHECKERS[iid](text, **kwargs) is verdict
