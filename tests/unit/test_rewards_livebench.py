"""The livebench verifier: for each LiveBench task, the reference answer in the task's own answer format
scores 1, a wrong one less, and the answers that try to score without solving (hedging over several
answer spots, listing every candidate, answers left inside the think block) do not."""

from __future__ import annotations

import json

import pytest

from reasonrl.rewards import check_routable, score
from reasonrl.rewards.verifiers.livebench import SHAPES
from reasonrl.types import Problem


def _p(task, gold, prompt="q"):
    return Problem([{"role": "user", "content": prompt}], gold, "ood__livebench", "ood", {"task": task})


GROUPS = "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p"
TABLE_JSON = json.dumps({"0": {"name": "x", "v": 1.5}, "1": {"name": "y", "v": 2}})
REFORMAT = (
    "Please convert the Input Table from HTML format to JSONL format. Please respond only with the table."
)

# task: (gold, prompt, good, bad, hacks)
CASES = {
    "web_of_lies_v2": ("yes, no, yes", "q", "so **yes, no, yes**", "**yes, yes, yes**",
                       ["**yes, no, yes, no, unknown**", "**yes**", "<think>**yes, no, yes**",
                        "**yes, no, yes****no, no, no**", "***yes, no, yes******no, no, no***"]),
    "web_of_lies_v3": ("no, no, unknown", "q", "<solution>no, no, unknown</solution>", "<solution>no, yes, unknown</solution>",
                       ["<solution>no, no, unknown, yes</solution>"]),
    "house_traversal": ("Alice Bob Carol", "q", "The order is **Alice Bob Carol**", "**Bob Alice Carol**",
                        ["**Alice Bob Carol Dave**"]),
    "spatial": ("4", "q", "There are **four** pieces.", "**three**", ["**4** or **5**"]),
    "zebra_puzzle": ("fish", "q", "The answer is ***fish***", "***cat***", ["***fish*** no wait ***cat***"]),
    "connections": (GROUPS, "q", "<solution>e,f,g,h,a,b,c,d,i,j,k,l,m,n,o,p</solution>",
                    "<solution>a,b,c,e,d,f,g,h,i,j,k,l,m,n,o,p</solution>",
                    ["**a,b,c,d**\n**e,f,g,h**\n**i,j,k,l**\n**m,n,o,p**\n**a,e,i,m**\n**b,f,j,n**\n**c,g,k,o**\n**d,h,l,p**",
                     "<solution>a,b,c,d,a,b,c,d,a,b,c,d,a,b,c,d</solution>"]),
    "plot_unscrambling": ("A ship sails. A storm comes. The crew survives.", "q",
                          "<PLOT_SUMMARY>A ship sails. A storm comes. The crew survives.</PLOT_SUMMARY>",
                          "<PLOT_SUMMARY>The crew survives. A storm comes. A ship sails.</PLOT_SUMMARY>", ["<PLOT_SUMMARY></PLOT_SUMMARY>"]),
    "typos": ("The quick brown fox.", "q", "<solution>The quick brown fox.</solution>", "<solution>Teh quick brown fox.</solution>",
              ["<solution></solution>", "<solution>The quick brown fox. Teh quick brown fox.</solution>",
               "Teh quick brown fox.\nThe quick brown fox.", "<solution>The quick brown fox. The quick brown fox.</solution>"]),
    "cta": ("birthDate", "q", "birthDate", "deathDate", ["deathDate birthDate", "\\boxed{notbirthDate}"]),
    "tablejoin": ("{'col_a': 'x1', 'col_b': 'y2'}", "q", "<solution>{'col_a': 'x1', 'col_b': 'y2'}</solution>",
                  "<solution>{'col_a': 'x1', 'col_b': 'y9'}</solution>", ["<solution>{}</solution>"]),
    "tablereformat": ('{"name":"x","v":1.5}\n{"name":"y","v":2}', REFORMAT,
                      '{"name":"x","v":1.5}\n{"name":"y","v":2.0}', '{"name":"x","v":1.5}\n{"name":"y","v":3}',
                      ['{"name":"x","v":1.5}', TABLE_JSON]),
}  # fmt: skip


@pytest.mark.parametrize("task", sorted(CASES))
def test_livebench_task_scores_reference_wrong_and_hacks(task):
    gold, prompt, good, bad, hacks = CASES[task]
    p = _p(task, gold, prompt)
    check_routable([p], task)
    assert score(good, p).score == 1.0, score(good, p).info
    assert score(f"<think>thinking</think>{good}", p).score == 1.0
    assert score(bad, p).score < 1.0
    assert score("", p).score == 0.0
    for h in hacks:
        assert score(h, p).score < 1.0, h


def test_partial_credit_where_livebench_gives_it():
    third = score("<solution>no, no, yes</solution>", _p("web_of_lies_v3", "no, no, unknown"))
    assert third.score == pytest.approx(1 / 3) and third.info["reason"] == "partial"
    lies = _p("web_of_lies_v3", "no, no, unknown")
    assert [score(a, lies).info["reason"] for a in ("**no, no, unknown**", "**yes, yes, yes**")] == [
        "correct", "wrong"]  # fmt: skip
    assert score("", lies).info == {"extracted": None, "reason": "no_answer"}
    long = score("<solution>" + "no, " * 100 + "</solution>", lies).info
    assert long["task"] == "web_of_lies_v3" and len(long["extracted"]) == 200  # the extracted text, cut
    half = "<solution>a,b,c,d,e,f,g,h,i,j,k,m,l,n,o,p</solution>"  # two groups right, two wrong
    assert score(half, _p("connections", GROUPS)).score == 0.5
    assert (
        score("<solution>{'col_a': 'x1'}</solution>", _p("tablejoin", "{'col_a': 'x1', 'col_b': 'y2'}")).score
        == 0.67
    )


TYPO_GOLD = (
    "We study reinforcement learning for language models. Rewards come from programs that check the "
    "final answer, and the policy learns to reason before it answers."
)


def test_typos_hedge_over_corrections_scores_zero_but_framing_does_not():
    p = _p("typos", TYPO_GOLD)
    variant = TYPO_GOLD.replace("programs", "progams").replace("reason", "raeson")
    assert score(f"Here is the corrected text:\n{TYPO_GOLD}", p).score == 1.0
    assert score(f"I fixed 'progams' and 'raeson'.\n<solution>{TYPO_GOLD}</solution>", p).score == 1.0
    assert score(f"<solution>{variant}</solution>", p).score == 0.0
    # the gold among other versions of the text: with or without tags, before or after it
    for hedge in (
        f"{variant}\n{TYPO_GOLD}",
        f"{TYPO_GOLD}\n{variant}",
        f"<solution>{TYPO_GOLD} {variant}</solution>",
    ):
        assert score(hedge, p).score == 0.0, hedge
    assert (
        score(f"<solution>{TYPO_GOLD} {variant}</solution><solution>{TYPO_GOLD}</solution>", p).score == 1.0
    )


def test_answers_in_the_forms_models_write_them_score_as_livebench_scores_them():
    """Formats LiveBench accepts that an earlier reading of "the last bold span" refused."""
    wol = _p("web_of_lies_v2", "yes, no, yes")
    for ok in (
        "1. **Yes** 2. **No** 3. **Yes**",
        "**Answer: yes, no, yes**",
        "<solution>Answer: yes, no, yes</solution>",
        "So the three answers are yes, no, yes.",
        "\\boxed{yes, no, yes}",
    ):
        assert score(ok, wol).score == 1.0, ok
    for bad in ("<solution>yes, no, yes, no</solution>", "**Yes** **No**", "yes, no"):
        assert score(bad, wol).score == 0.0, bad
    house = _p("house_traversal", "Alice Bob Carol")
    assert score("First **Alice**, then **Bob**, and last **Carol**.", house).score == 1.0
    assert score("First **Bob**, then **Alice**, and last **Carol**.", house).score == 0.0
    assert score("<solution>Bob Alice Carol</solution> **Alice** **Bob** **Carol**", house).score == 0.0
    groups = _p("connections", GROUPS)
    assert score("\\boxed{\\text{e,f,g,h,a,b,c,d,i,j,k,l,m,n,o,p}}", groups).score == 1.0
    zebra = _p("zebra_puzzle", "red, 3, fish")
    assert (
        score("Working it out...\nred, position 3, fish", zebra).score == 1.0
    )  # a last line with the commas
    assert score("red, 3, fish\nand that is all", zebra).score == 0.0
    assert score("Working it out...\nAnswer: red, 3, fish", zebra).score == 1.0  # a labelled last line
    # cta: the class where the model marks its answer, or its last line (found comparing with LiveBench's
    # process_results on generated answers; it takes any answer that ends with the class)
    cta = _p("cta", "birthDate")
    for ok in ("So the answer is **birthDate**.", "Step 1\n\n**BIRTHDATE**", "The answer: ***birthDate***",
               "Some work.\nbirthDate", "Work.\nAnswer: birthDate", "<solution> birthDate </solution>"):  # fmt: skip
        assert score(ok, cta).score == 1.0, ok
    for bad in (
        "So the answer is **notbirthDate**.",
        "birthDate\ndeathDate",
        "Answer: deathDate or birthDate",
    ):
        assert score(bad, cta).score == 0.0, bad


def test_bold_spans_that_touch_are_two_answers():
    p = _p("web_of_lies_v2", "yes, no, yes")
    assert score("**no, no, no****yes, no, yes**", p).score == 1.0  # the last one counts
    assert score("***yes, no, yes***", p).score == 1.0  # bold italics are bold
    assert score("**yes, no, yes ***", p).score == 1.0


def test_tablereformat_reads_every_target_format():
    rows = [{"name": "x", "v": "1.5"}, {"name": "y", "v": "2"}]
    forms = {
        "CSV": "name,v\nx,1.5\ny,2", "TSV": "name\tv\nx\t1.5\ny\t2",
        "markdown": "| name | v |\n|---|---|\n| x | 1.5 |\n| y | 2 |",
        "HTML": "<table><tr><th>name</th><th>v</th></tr><tr><td>x</td><td>1.5</td></tr><tr><td>y</td><td>2</td></tr></table>",
        "JSON": json.dumps({str(i): r for i, r in enumerate(rows)}),
    }  # fmt: skip
    for fmt, gold in forms.items():
        p = _p("tablereformat", gold, f"Please convert the Input Table from JSONL format to {fmt} format.")
        assert score(f"```\n{gold}\n```", p).score == 1.0, fmt
        assert score(gold.replace("1.5", "1.6"), p).score == 0.0, fmt


def test_unknown_task_fails_at_load():
    from reasonrl.errors import InputError

    with pytest.raises(InputError, match="livebench row has extra_info.task 'mystery'"):
        check_routable([_p("mystery", "x")], "eval")


# ---------------------------------------------------------------- edges of each reading (mutation-tested)


@pytest.mark.parametrize("plural, singular", sorted(SHAPES.items()))
def test_spatial_shape_names_singular_and_plural_are_equal(plural, singular):
    assert score(f"**{plural}**", _p("spatial", singular)).score == 1.0
    assert score(f"**{singular}**", _p("spatial", plural)).score == 1.0
    assert score(f"**{plural}**", _p("spatial", "cylinder")).score == 0.0


def test_spatial_answer_spot_number_words_and_no_answer():
    four = _p("spatial", "4")
    assert score("There are **Four.**", four).score == 1.0  # case and a closing stop
    assert score("**4**\n<solution> </solution>", four).score == 1.0  # an empty answer spot is no answer
    got = score("There are four pieces.", four)  # no answer spot at all
    assert (got.score, got.reason) == (0.0, "wrong")


def test_web_of_lies_readings():
    wol = _p("web_of_lies_v2", "yes, no, yes")
    assert score("**yes, no, yes**\n<solution></solution>", wol).score == 1.0  # empty solution: bold read
    assert score("First no, no, no. Then yes, no, yes.", wol).score == 1.0  # the last plain run
    assert score("First yes, no, yes. Then no, no, no.", wol).score == 0.0
    plain = _p("web_of_lies", "yes, no, yes")  # the task's unversioned name: all or nothing, like v2
    assert score("<solution>yes, no, yes</solution>", plain).score == 1.0
    assert score("<solution>yes, no, no</solution>", plain).score == 0.0


def test_house_traversal_readings():
    two = _p("house_traversal", "Alice Bob")
    assert score("First **Alice**, then **Bob**.", two).score == 1.0  # one bold name per span, two names
    assert score("First **Bob**, then **Alice**.", two).score == 0.0
    got = score("The order is Alice Bob Carol.", _p("house_traversal", "Alice Bob Carol"))  # no answer spot
    assert (got.score, got.reason) == (0.0, "wrong")


def test_zebra_puzzle_readings():
    fish = _p("zebra_puzzle", "fish")  # the old form: one word
    assert score("***fish*** is my answer", fish).score == 1.0  # bold italics before the last word
    assert score("So it must be the fish", fish).score == 1.0  # else the last word
    assert score("***cat*** no, wait: ***fish***", fish).score == 1.0  # the last bold word
    assert score("The fish, surely not; cat", fish).score == 0.0
    assert score("***comedy***", _p("zebra_puzzle", "comedy movies")).score == 1.0  # the genre's full name
    new = _p("zebra_puzzle", "red, 3, fish")  # the new form: a comma list
    assert score("**red, position-3, fish**", new).score == 1.0  # "position-3" is position 3
    assert score("**red, 3**", new).score == 0.0  # too few items for the gold
    assert score("**red, 3, fish, cat**", new).score == 0.0
    assert score("**red, 4, fish**", new).score == pytest.approx((0 + 2 / 3) / 2)


def test_connections_readings():
    groups = _p("connections", GROUPS)
    upper = "<solution>E, F, G, H, A, B, C, D, I, J, K, L, M, N, O, P</solution>"
    assert score(upper, groups).score == 1.0  # case and spaces around the words
    wrong_box = "\\boxed{a,b,c,e,d,f,g,h,i,j,k,l,m,n,o,p}"
    assert score(f"<solution>{GROUPS}</solution> {wrong_box}", groups).score == 1.0  # a solution beats a box
    assert score(wrong_box, groups).score == 0.5
    lines = "<solution>e,f,g,h,\na,b,c,d,\ni,j,k,l,\nm,n,o,p</solution>"  # a group per line
    assert score(lines, groups).score == 1.0
    assert score("\\boxed{e,\\ f,\\ g,\\ h,\\ a,b,c,d,i,j,k,l,m,n,o,p}", groups).score == 1.0  # LaTeX spaces
    old_form = "**a,b,c,d**\n**e,f,g,h**\n**i,j,k,l**\n**m,n,o,p**"  # a bold group of four per line
    assert score(old_form, groups).score == 1.0
    assert score("**a,b,c**\n" + old_form, groups).score == 1.0  # a bold run of three is not a group
    assert score("<solution>a,b,c,d</solution>", groups).score == 0.0  # one group of four: not 1/4
    # a first try in bold, then the final four groups: the last four count, not every bold group
    assert score("**a,b,c,e**\n**d,f,g,h**\nSo:\n" + old_form, groups).score == 1.0
    assert score(old_form + "\nOr rather:\n**a,b,c,e**\n**d,f,g,h**", groups).score == 0.5


PLOT = "A ship sails. A storm comes. The crew survives."


def test_plot_unscrambling_order_distance_and_summary_tag():
    from reasonrl.rewards.verifiers.livebench import _edit_distance

    assert [_edit_distance([0, 1, 2], b) for b in ([0, 1, 2], [1, 0, 2], [2, 1, 0], [0, 2], [])] == [
        0,
        2,
        2,
        1,
        3,
    ]
    assert _edit_distance([], [1, 2]) == 2 and _edit_distance([0, 1, 2, 3], [0, 1, 3]) == 1
    p = _p("plot_unscrambling", PLOT)
    swapped = "<PLOT_SUMMARY>A storm comes. A ship sails. The crew survives.</PLOT_SUMMARY>"
    assert score(swapped, p).score == pytest.approx(1 - 2 / 3)  # two sentences out of place in three
    framed = f"The crew survives. A storm comes. <PLOT_SUMMARY>{PLOT}</PLOT_SUMMARY> The crew survives."
    assert score(framed, p).score == 1.0  # only the summary is read
    assert score(f"<PLOT_SUMMARY>{PLOT}", p).score == 1.0  # an unclosed summary runs to the end
    # sentences are matched to the gold's by closeness, as LiveBench does, not only when copied exactly
    reworded = "<PLOT_SUMMARY>A ship sets sail. A storm comes. The whole crew survives.</PLOT_SUMMARY>"
    assert score(reworded, p).score == 1.0


def test_typos_gold_and_answer_forms():
    from reasonrl.rewards.verifiers.livebench import near_copy

    eight = "a b c d e f g h"  # 4-word shingles: 5; at least half (3) shared is another version
    assert near_copy("a b c d e f", eight) and not near_copy("a b c d e", eight)
    four = "a b c d"  # 2-word shingles for 4 words: 3; two shared is another version
    assert near_copy("a b c y", four) and not near_copy("a b y c", four)
    assert near_copy("z a", "a") and not near_copy("anything", "")  # an empty gold has no versions
    fox = "The quick brown fox."
    assert score("<solution>The quick\nbrown fox.</solution>", _p("typos", fox)).score == 1.0  # lines joined
    assert score(f"<solution>{fox}</solution>", _p("typos", fox + "\n")).score == 1.0  # the gold stripped
    assert score("<solution>anything</solution>", _p("typos", "  ")).score == 0.0  # an empty gold: no answer
    assert score("!!", _p("cta", "??")).score == 0.0  # a class of no word characters matches nothing


def test_tablejoin_answer_forms():
    join = _p("tablejoin", "{'col_a': 'x1', 'col_b': 'y2'}")
    right = "{'col_a': 'x1', 'col_b': 'y2'}"
    assert score(f"\n {right}\n", join).score == 1.0  # a bare literal with padding
    assert score("<solution>{'col_a': 'x1', 'col_b': 'y2', 'col_c': null}</solution>", join).score == 1.0
    assert score(f"Here:\n```python\n{right}\n```\nDone.", join).score == 1.0  # a fenced block
    two = f"First:\n```\n{{'col_a': 'x9'}}\n```\nFixed:\n```json\n{right}\n```"
    assert score(two, join).score == 1.0  # the last fenced block counts
    assert score(f"```\n{right}\n```\nno wait\n```\n{{'col_a': 'x9'}}\n```", join).score == 0.0
    boxed = "\\boxed{\\{\\text{col_a}: \\text{x1}, \\text{col_b}: \\text{'y2'}\\}}"  # LaTeX text cells
    assert score(boxed, join).score == 1.0
    assert score("```\n{'col_a': 'x9'}\n```\n" + boxed, join).score == 1.0  # a box over a fenced block
    assert score("no idea", join).score == 0.0
    for gold in ("[1, 2]", "{}", "not a literal"):
        with pytest.raises(ValueError, match="not a mapping"):
            score(right, _p("tablejoin", gold))


def test_html_rows():
    from reasonrl.rewards.verifiers.livebench import MAX_COLSPAN, html_rows

    table = "<table><tr><th>a</th><th colspan='2'>b</th></tr><tr><td> x\n y </td><td>1</td><td>2</td></tr></table>"
    assert html_rows(table) == [["a", "b", "b"], ["x y", "1", "2"]]  # spans repeated, spaces collapsed
    assert html_rows("<td>a</td><td>b</td>") == [["a", "b"]]  # cells without a row
    assert html_rows("<tr>junk<td>a</td> tail </td><td>b</td></tr><tr></tr>") == [
        ["a", "b"]
    ]  # text outside cells
    assert html_rows("<tr><td colspan='0'>a</td><td colspan='x'>b</td><td colspan=' 2 '>c</td></tr>") == [
        ["a", "b", "c", "c"]
    ]
    huge = html_rows("<tr><td colspan='1000000000'>a</td></tr>")  # a policy's answer: bounded, not 1e9 cells
    assert len(huge[0]) == MAX_COLSPAN


def test_tablereformat_json_orientations():
    rows = [{"name": "x", "v": 1.5}, {"name": "y", "v": 2}]
    p = _p(
        "tablereformat", json.dumps(rows), "Please convert the Input Table from CSV format to JSON format."
    )
    split = {"columns": ["name", "v"], "index": [0, 1], "data": [["x", 1.5], ["y", 2]]}
    table = {"schema": {"fields": []}, "data": [{"index": 0, **rows[0]}, {"index": 1, **rows[1]}]}
    index = {"0": rows[0], "1": rows[1]}
    for form in (rows, split, table, index):
        assert score(json.dumps(form), p).score == 1.0, form
    assert score(json.dumps({**split, "data": [["x", 1.5], ["y", 3]]}), p).score == 0.0
    assert score(json.dumps(rows[:1]), p).score == 0.0  # a row missing


def test_table_records_and_cells():
    from reasonrl.rewards.verifiers.livebench import _records, _same_cell

    one = [{"a": "1", "b": "2"}]
    assert (
        _records("Here:\n| a | b |\n|---|:-:|\n| 1 | 2 |", "markdown") == one
    )  # lines without "|" are not rows
    assert _records("a\tb\n1\t2", "tsv") == one and _records("a,b\n1,2", "csv") == one
    assert _records("a\tb\n1\t2", "csv") == [{"a\tb": "1\t2"}]
    assert _records("a,b\n\n1,2\n,\n", "csv") == one  # blank rows dropped
    assert _records("index,a,\n0,1,x", "csv") == [{"a": "1"}]  # pandas' index column and unnamed ones
    assert _records("a,b", "csv") == [] and _records(" \n", "csv") is None
    assert [_same_cell(a, b) for a, b in [("1.0", "1"), ("1", "1.0000001"), ("1", "1.00001"), ("nan", "NaN"),
                                          ("nan", "1"), ("1", "nan"), ("x", "x "), ("x", "y")]] == [
        True, True, False, True, False, False, True, False]  # fmt: skip


def test_tablereformat_target_format_from_the_row():
    rows = "a,b\n1,2"
    p = Problem([{"role": "user", "content": "q"}], "a\tb\n1\t2", "ood__livebench", "ood",
                {"task": "tablereformat", "prompt": "Please convert the Input Table from CSV format to TSV format."})  # fmt: skip
    assert score("a\tb\n1\t2", p).score == 1.0 and score(rows, p).score == 0.0
    labelled = _p("tablereformat", "a\tb\n1\t2", "Input Table: ...\nTarget Format: TSV")  # the other wording
    assert score("a\tb\n1\t2", labelled).score == 1.0
    with pytest.raises(ValueError, match="names no target format"):
        score(rows, _p("tablereformat", rows, "Convert this table."))


def test_tablereformat_last_fence_entities_alias_and_unreadable_tables():
    p = _p(
        "tableformat", "a,b\nR&D,2", "Please convert the Input Table from TSV format to CSV format."
    )  # the alias
    assert (
        score("a,b\nR&amp;D,2", p).score == 1.0
    )  # an HTML entity of the source table, as LiveBench reads it
    fenced = ["```csv\na,b\nR&D,3\n```", "```csv\na,b\nR&D,2\n```"]
    assert score("\n".join(fenced), p).score == 1.0 and score("\n".join(fenced[::-1]), p).score == 0.0
    to_json = _p(
        "tablereformat", '[{"a": 1}]', "Please convert the Input Table from CSV format to JSON format."
    )
    assert score("[{'a': 1", to_json).score == 0.0  # no table in the answer
    for not_records in ("[[1, 2], [3, 4]]", '[{"a": 1}, [1]]', '{"a": [1]}'):  # JSON, but no table of records
        assert score(not_records, to_json).score == 0.0, not_records
    with pytest.raises(ValueError, match="the ground truth is not a json table"):
        score(
            '[{"a": 1}]',
            _p("tablereformat", "[{'a'", "Please convert the Input Table from CSV format to JSON format."),
        )
    with pytest.raises(ValueError, match="livebench row has extra_info.task 'mystery'"):
        score("x", _p("mystery", "x"))
