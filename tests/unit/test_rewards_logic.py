"""Logic / structured verifiers: zebra grids, ordering lists, graph answers, ARC grids, code I/O."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(60)


def score(name, response, gt, **opts):
    p = Problem(prompt=[{"role": "user", "content": "q"}], ground_truth=gt, data_source="logic")
    return VERIFIERS.get(name)(response, p, **opts)


ZEBRA = {"header": ["Position", "Name", "Pet"], "rows": [["1", "Ann", "cat"], ["2", "Bob", "dog"]]}


def _zebra_answer(rows):
    return "<answer>" + json.dumps({"header": ZEBRA["header"], "rows": rows}) + "</answer>"


@pytest.mark.parametrize(
    "response, score_, all_correct",
    [
        (_zebra_answer([["1", "Ann", "cat"], ["2", "Bob", "dog"]]), 1.0, True),
        (_zebra_answer([["1", "ann", "Cat"], ["2", " Bob ", "dog"]]), 1.0, True),  # case / spaces
        (_zebra_answer([["1", "Ann", "dog"], ["2", "Bob", "cat"]]), 4 / 6, False),
        (_zebra_answer([["1", "Ann", "cat"]]), 3 / 6, False),  # missing row
        (_zebra_answer([["1", ["Ann", "Bob"], "cat"], ["2", "Bob", "dog"]]), 5 / 6, False),  # hedged cell
        (
            "<answer>{'header': ['Position'], 'rows': [['1', 'Ann', 'cat'], ['2', 'Bob', 'dog']]}</answer>",
            1.0,
            True,
        ),
        ("<answer>not json</answer>", 0.0, False),
        ("<answer>[1, 2]</answer>", 0.0, False),
        ("<think>" + _zebra_answer(ZEBRA["rows"]) + "</think>", 0.0, False),  # answer in think only
        ("", 0.0, False),
        ("<answer>" + "[" * 5000 + "]" * 5000 + "</answer>", 0.0, False),  # deep nesting
    ],
)
def test_zebra(response, score_, all_correct):
    got = score("zebra", response, ZEBRA)
    assert got.score == pytest.approx(score_, abs=1e-12)
    assert got.info.get("all_correct", False) is all_correct


def test_zebra_ground_truth_forms_and_strict_option():
    as_numpy = {"header": np.array(ZEBRA["header"]), "rows": np.array(ZEBRA["rows"])}
    right = _zebra_answer(ZEBRA["rows"])
    half = _zebra_answer([["1", "Ann", "dog"], ["2", "Bob", "cat"]])
    assert score("zebra", right, as_numpy).score == 1.0
    assert score("zebra", right, json.dumps(ZEBRA)).score == 1.0
    assert score("zebra", half, ZEBRA, partial=False).score == 0.0


@pytest.mark.parametrize(
    "response, expected",
    [
        ('<answer>["owl", "robin", "crow"]</answer>', 1.0),
        ("<answer>['Owl', 'Robin', 'Crow']</answer>", 1.0),
        ("<answer>[owl, robin, crow]</answer>", 1.0),
        ('<answer>["robin", "owl", "crow"]</answer>', 0.0),
        ('<answer>["owl", "robin"]</answer>', 0.0),
        ('<answer>["owl", "robin", "crow", "crow"]</answer>', 0.0),
        ("<answer>owl robin crow</answer>", 0.0),
        ("<answer>__import__('os').system('echo hi')</answer>", 0.0),  # never evaluated
    ],
)
def test_ordering(response, expected):
    assert score("ordering", response, np.array(["owl", "robin", "crow"])).score == expected


@pytest.mark.parametrize(
    "response, gt, expected",
    [
        ("<answer>fdebme</answer>", "fdebme", 1.0),
        ("<answer> FDEBME </answer>", "fdebme", 1.0),
        ("<answer>fdebm</answer>", "fdebme", 0.0),
        ("<answer>12</answer>", 12, 1.0),
        ("<answer>12.0</answer>", "12", 1.0),
        (
            "<answer></answer>",
            "fdebme",
            0.0,
        ),  # an empty gold fails routing (test_rewards_malformed_ground_truth)
        ("fdebme", "fdebme", 0.0),  # no tags
    ],
)
def test_graph(response, gt, expected):
    assert score("graph", response, gt).score == expected


GRID = [[1, 2], [3, 4]]


@pytest.mark.parametrize(
    "response, expected",
    [
        ("<answer>[[1, 2], [3, 4]]</answer>", 1.0),
        ("<answer>The grid is\n[[1, 2],\n [3, 4]]</answer>", 1.0),
        ("<answer>[[1, 2], [3, 5]]</answer>", 0.0),
        ("<answer>[[1, 2]]</answer>", 0.0),
        ("<answer>[[1, 2, 0], [3, 4, 0]]</answer>", 0.0),
        ("<answer>[[1.5, 2], [3, 4]]</answer>", 0.0),
        ("<answer>[[true, 2], [3, 4]]</answer>", 0.0),
        ("<answer>[[1, 2], [3, 4]] or [[0, 0], [0, 0]]</answer>", 0.0),
        ("[[1, 2], [3, 4]]", 0.0),
    ],
)
def test_arc(response, expected):
    assert score("arc", response, GRID).score == expected
    assert score("arc", response, np.array(GRID)).score == expected


@pytest.mark.parametrize(
    "response, gt, expected",
    [
        ('```json\n{"output": {"result": 42}}\n```', '"output": {"result": 42}', 1.0),
        ('{"output": 5}', '{"output": 5}', 1.0),
        ('I think {"output": [1, 2]} is right', '{"output": [1, 2]}', 1.0),
        ('```json\n{"answer": true}\n```', '"output": {"answer": "true"}', 1.0),
        ('{"input": {"n": 3}}', '"input": {"n": 4}', 0.0),
        ('{"output": "[1, 2]"}', '{"output": [1, 2]}', 1.0),
        ("no json", '{"output": 1}', 0.0),
        ('{"output": null}', '{"output": null}', 1.0),
    ],
)
def test_codeio(response, gt, expected):
    assert score("codeio", response, gt).score == expected


def test_codeio_refuses_cruxeval_rows_needing_execution():
    got = score("codeio", "```python\nassert f(1) == 2\n```", json.dumps({"functional": "def f(x): ..."}))
    assert got.score == 0.0 and "execution" in got.reason


# ---------------------------------------------------------------- expert-verdict classes (issue 7, section 5)


@pytest.mark.parametrize(
    "rows, header, expected",
    [
        ([["2", "Bob", "dog"], ["1", "Ann", "cat"]], None, 1.0),  # rows in another order: matched by key
        ([["1", "cat", "Ann"], ["2", "dog", "Bob"]], ["Position", "Pet", "Name"], 1.0),  # columns by header
        ([["1", "Ann", "cat"], ["2", "Bob", "dog"], ["3", "Cid", "fish"]], None, 6 / 9),  # invented row
        ([["1", "Ann", "cat"], ["2", "Bob", "dog"], ["2", "Bob", "dog"]], None, 6 / 9),  # duplicated key
        ([["1", "Ann", "cat"], ["1", "Bob", "dog"]], None, 3 / 9),  # two rows claim house 1
        # rows that are not rows come first: each counts as an extra row, and the rows after still count
        ([[], "x", ["1", "Ann", "cat"], ["2", "Bob", "dog"]], None, 6 / 12),
    ],
)
def test_zebra_rows_by_key_columns_by_header_extra_rows_penalised(rows, header, expected):
    answer = {"header": header or ZEBRA["header"], "rows": rows}
    res = score("zebra", "<answer>" + json.dumps(answer) + "</answer>", ZEBRA)
    assert res.score == pytest.approx(expected)
    assert res.info["all_correct"] == (expected == 1.0)


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("<answer>['owl', 'robin', 'crow']</answer>", 1.0),
        ("<answer>owl, robin, crow</answer>", 1.0),  # a bare comma list
        ("<answer>1. owl\n2. robin\n3. crow</answer>", 1.0),  # a numbered list
        ("<answer>- **owl**\n- robin\n- crow</answer>", 1.0),  # bullets with emphasis
        ("<answer>[owl, robin, crow] or [robin, owl, crow]</answer>", 0.0),  # two orderings
        ("<answer>[['owl', 'robin', 'crow'], ['robin', 'owl', 'crow']]</answer>", 0.0),
        ("<answer>owl, robin, crow or robin, owl, crow</answer>", 0.0),
        ("<answer>robin, owl, crow</answer>", 0.0),
    ],
)
def test_ordering_reads_one_ordering_only(answer, expected):
    assert score("ordering", answer, ["owl", "robin", "crow"]).score == expected


@pytest.mark.parametrize("answer, expected", [("<answer>**3**</answer>", 1.0), ("<answer>_3_</answer>", 1.0),
                                              ("<answer>**4**</answer>", 0.0)])  # fmt: skip
def test_graph_answer_with_markdown_emphasis(answer, expected):
    assert score("graph", answer, "3").score == expected


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("<answer>\n1 2 3\n4 5 6\n</answer>", 1.0),  # space-separated rows
        ("<answer>1 2 3\n4 5 6</answer>", 1.0),
        ("<answer>1 2 3\n4 5 7</answer>", 0.0),
        ("<answer>1 2 3\n4 5</answer>", 0.0),  # ragged
    ],
)
def test_arc_grid_as_space_separated_rows(answer, expected):
    assert score("arc", answer, [[1, 2, 3], [4, 5, 6]]).score == expected


@pytest.mark.parametrize(
    "response, expected",
    [
        ('The output is \\boxed{{"output": 3}}', 1.0),
        ('\\boxed{{"output": 4}}', 0.0),
        (
            '\\boxed{{"output": 4}} and {"output": 3}',
            0.0,
        ),  # a boxed answer is the answer; loose JSON after it is not
    ],
)
def test_codeio_answer_in_a_box(response, expected):
    assert score("codeio", response, json.dumps({"output": 3})).score == expected


# ---------------------------------------------------------------- edges each verifier must hold (mutation-tested)


def test_parse_structured_bounds_and_padding():
    from reasonrl.rewards.verifiers.logic import MAX_PARSE_CHARS, parse_structured

    assert parse_structured("  ['a', 'b']\n") == ["a", "b"]  # a Python literal with padding
    at_bound = '"' + "a" * (MAX_PARSE_CHARS - 2) + '"'
    assert parse_structured(at_bound + "  ") == "a" * (MAX_PARSE_CHARS - 2)  # counted once stripped
    with pytest.raises(ValueError, match="too long"):
        parse_structured('"' + "a" * (MAX_PARSE_CHARS - 1) + '"')  # one past the bound: refused unparsed
    with pytest.raises(ValueError, match="too long"):
        parse_structured("'" + "a" * MAX_PARSE_CHARS + "'")  # a Python literal too


def _zebra(answer):
    return score("zebra", "<answer>" + json.dumps(answer) + "</answer>", ZEBRA)


@pytest.mark.parametrize(
    "answer, score_, reason, cells, extra",
    [
        ({"header": ZEBRA["header"], "rows": ZEBRA["rows"]}, 1.0, "correct", 6, 0),
        ({"header": ZEBRA["header"], "rows": [["1", "Ann", "dog"], ["2", "Bob", "cat"]]}, 4 / 6, "partial", 4, 0),
        ({"header": ZEBRA["header"], "rows": [["3", "Cid", "fish"]]}, 0.0, "wrong", 0, 1),
        ({"header": ZEBRA["header"], "rows": "1 Ann cat"}, 0.0, "not_a_grid", None, None),
        ([["1", "Ann", "cat"]], 0.0, "not_a_grid", None, None),
        # malformed rows are extra rows of wrong cells, not a crash
        ({"header": ZEBRA["header"], "rows": [*ZEBRA["rows"], "junk"]}, 6 / 9, "partial", 6, 1),
        ({"header": ZEBRA["header"], "rows": [*ZEBRA["rows"], []]}, 6 / 9, "partial", 6, 1),
        ({"header": ZEBRA["header"], "rows": [*ZEBRA["rows"], 7]}, 6 / 9, "partial", 6, 1),
        # the key column placed by the header
        ({"header": ["Name", "Position", "Pet"], "rows": [["Ann", "1", "cat"], ["Bob", "2", "dog"]]}, 1.0, "correct", 6, 0),
        # a header without the key column: rows keyed by their first cell, that column unscored
        ({"header": ["House", "Name", "Pet"], "rows": ZEBRA["rows"]}, 4 / 6, "partial", 4, 0),
        # rows too short to hold the key column: keyed by their first cell (not a gold key)
        ({"header": ["Name", "Pet", "Position"], "rows": [["Ann", "cat"], ["Bob", "dog"]]}, 0.0, "wrong", 0, 2),
        # a header that is not a list is ignored: columns by position
        ({"header": "Pos", "rows": ZEBRA["rows"]}, 1.0, "correct", 6, 0),
    ],
)  # fmt: skip
def test_zebra_reasons_cells_and_malformed_answers(answer, score_, reason, cells, extra):
    got = _zebra(answer)
    assert got.score == pytest.approx(score_) and got.reason == reason
    assert got.info.get("cells") == cells and got.info.get("extra_rows") == extra
    assert got.info["extracted"] == json.dumps(answer)
    assert got.info.get("all_correct", False) is (reason == "correct")


@pytest.mark.parametrize(
    "gold",
    [
        {"header": [], "rows": [["1"]]},  # no columns
        {"header": "a", "rows": [["1"]]},  # header not a list
        {"header": ["a"], "rows": "1"},  # rows not a list
        {"header": ["a"], "rows": ["1"]},  # a row not a list
        {"header": ["a", "b"], "rows": [["1"]]},  # a row shorter than the header
        {"header": ["a"], "rows": [["1", "2"]]},  # or longer
        {"header": ["a"], "rows": [["1"], ["2", "3"]]},  # one bad row among good ones
        {"header": ["a"], "rows": [[None]]},  # a cell that is no name
        {"header": ["a"], "rows": [[["1"]]]},
        {"header": ["a"], "rows": [[" "]]},  # a blank cell
        {"header": [" "], "rows": [["1"]]},  # a blank column name
        {"rows": [["1"]]},
        [["1"]],
    ],
)
def test_zebra_gold_must_be_a_grid_of_names(gold):
    """A malformed gold fails at load time (the verifier's ground-truth check), not as a 0 per sample."""
    from reasonrl.errors import InputError
    from reasonrl.rewards import check_routable

    p = Problem(
        prompt=[{"role": "user", "content": "q"}], ground_truth=gold, data_source="x", verifier="zebra"
    )
    with pytest.raises(InputError, match=r"^train data row 0: zebra: ground truth is not \{'header'"):
        check_routable([p], "train data")


def test_zebra_empty_gold_grid_is_a_bad_row_not_a_solvable_one():
    p = Problem(
        prompt=[{"role": "user", "content": "q"}], ground_truth={"header": ["a"], "rows": []}, data_source="x"
    )
    with pytest.raises(ValueError, match=r"^zebra: ground truth is not \{'header'"):
        VERIFIERS.get("zebra")('<answer>{"rows": []}</answer>', p)  # never scored 1 for an empty answer
    one = Problem(
        prompt=[{"role": "user", "content": "q"}],
        ground_truth={"header": ["a"], "rows": [["1"]]},
        data_source="x",
    )
    got = VERIFIERS.get("zebra")('<answer>{"rows": [["1"]]}</answer>', one)  # a one-cell grid can be solved
    assert (got.score, got.reason, got.info["all_correct"]) == (1.0, "correct", True)


@pytest.mark.parametrize(
    "response, expected, reason",
    [
        ("<answer>owl robin crow</answer>", 0.0, "not_a_list"),  # no separator: no list
        ("<answer>owl, robin, crow or robin, owl, crow</answer>", 0.0, "not_a_list"),
        ("<answer>owl, robin, crow\nrobin, owl, crow</answer>", 0.0, "not_a_list"),  # one per line: two
        (
            "<answer>[owl, robin, crow]\n1. robin\n2. owl\n3. crow</answer>",
            0.0,
            "not_a_list",
        ),  # list and numbers
        ("<answer>42</answer>", 0.0, "not_a_list"),
        ("<answer>[]</answer>", 0.0, "not_a_list"),
        ("<answer>robin, owl, crow</answer>", 0.0, "wrong"),
        ("no tags", 0.0, "no_answer"),
        ("<answer>owl, robin, crow.</answer>", 1.0, "correct"),
        ("<answer>- owl, robin, crow</answer>", 1.0, "correct"),  # one bulleted / numbered line
        ("<answer>1. owl, robin, crow</answer>", 1.0, "correct"),
        ("<answer>- owl, robin, crow\n- robin, owl, crow</answer>", 0.0, "wrong"),  # two lines: items
    ],
)
def test_ordering_reasons(response, expected, reason):
    got = score("ordering", response, ["owl", "robin", "crow"])
    assert (got.score, got.reason) == (expected, reason)


def test_ordering_two_item_lists_and_gold_must_be_a_list():
    assert score("ordering", "<answer>1. owl\n2. robin</answer>", ["owl", "robin"]).score == 1.0
    with pytest.raises(ValueError, match="must be a list, got str"):
        score("ordering", "<answer>[owl, robin]</answer>", "owl then robin")


@pytest.mark.parametrize(
    "answer, expected, reason",
    [
        ("[[1.0, 2.0], [3.0, 4.0]]", 1.0, "correct"),  # integral floats are colours
        ('[["1", "2"], ["3", "4"]]', 1.0, "correct"),  # so are digit strings
        ('[["1_0", "2"], ["3", "4"]]', 0.0, "not_a_grid"),  # int() would read "1_0" as 10
        ('[["red", 2], [3, 4]]', 0.0, "not_a_grid"),
        ("[[null, 2], [3, 4]]", 0.0, "not_a_grid"),
        ("5", 0.0, "not_a_grid"),
        ("[]", 0.0, "not_a_grid"),
        ("[1, 2]", 0.0, "not_a_grid"),  # rows must be lists
        ("The grid is [[1, 2], [3, 4]].", 1.0, "correct"),  # the literal ends at its last "]]"
        ("]] then [[1, 2], [3, 4]", 0.0, "not_a_grid"),
    ],
)
def test_arc_colours_and_shapes(answer, expected, reason):
    got = score("arc", f"<answer>{answer}</answer>", GRID)
    assert (got.score, got.reason) == (expected, reason)
    if answer == '[["1_0", "2"], ["3", "4"]]':
        assert score("arc", f"<answer>{answer}</answer>", [[10, 2], [3, 4]]).score == 0.0


def test_arc_gold_must_be_a_grid():
    with pytest.raises(ValueError, match="not a grid"):
        score("arc", "<answer>[[1]]</answer>", [1, 2])


@pytest.mark.parametrize(
    "response, gt, expected",
    [
        ('```json\n{"output": 1}\n```\nnot {"output": 2}', '{"output": 1}', 1.0),  # the block, not later JSON
        ('so } here {"output": 3}', '{"output": 3}', 1.0),  # a stray closing brace before the object
        ('{"output": 3}.', '{"output": 3}', 1.0),  # the object ends at its brace
        ("no json here", '{"output": null}', 0.0),  # no answer never equals a null output
        ("{not json}", '{"output": null}', 0.0),
        ('{"output": 3, "note": "x"}', '{"output": 3}', 0.0),  # only a lone key is unwrapped
        ('{"input": {"n": 3}}', '"input": {"n": 3}', 1.0),
        ('["output"]', '["output"]', 1.0),  # a list holding the word is not a wrapper
        ('{"output": "42"}', '{"output": 42}', 0.0),  # a string is not the number
        ('{"output": "True"}', '{"output": true}', 1.0),  # "true" / "false" strings are booleans
    ],
)
def test_codeio_extraction_and_normalisation_edges(response, gt, expected):
    assert score("codeio", response, gt).score == expected


@pytest.mark.parametrize(
    "response, gt, expected",
    [
        ('{"input": {"n": 3}}', '{"n": 3}', 1.0),  # the answer's lone wrapper is unwrapped too
        ('{"output": "{\\"a\\": 1}"}', '{"output": {"a": 1}}', 1.0),  # a JSON-encoded object
        ('{"output": "false"}', '{"output": false}', 1.0),
        ("[1, 2]", "[1, 3]", 0.0),  # lists compared item by item
        ('"hello"', "hello", 1.0),  # a gold that is no JSON is the output as written
        ("```\n[9]\n```\nthen\n```\n[1]\n```", "[1]", 1.0),  # the last block counts
    ],
)
def test_codeio_wrappers_normalisation_and_answer_spots(response, gt, expected):
    assert score("codeio", response, gt).score == expected


def test_codeio_array_gold_length_bound_and_extracted():
    from reasonrl.rewards.verifiers.logic import MAX_PARSE_CHARS

    assert score("codeio", "[1, 2]", np.array([1, 2])).score == 1.0  # a parquet row's array
    text = '{"output": "' + "a" * (MAX_PARSE_CHARS - 14) + '"}'
    assert (
        len(text) == MAX_PARSE_CHARS and score("codeio", text, "x").reason == "wrong"
    )  # parsed at the bound
    over = score("codeio", text + " ", "x")
    assert (over.score, over.reason) == (0.0, "wrong")  # trailing space stripped: still at the bound
    over = score("codeio", '{"output": "' + "a" * (MAX_PARSE_CHARS - 13) + '"}', "x")
    assert (over.score, over.reason) == (0.0, "answer_too_long")
    assert len(score("codeio", text, "x").info["extracted"]) == 200


def _load_error(verifier, gold) -> str:
    """The load-time error (`check_routable`) of one row routed to `verifier` with this ground truth."""
    from reasonrl.errors import InputError
    from reasonrl.rewards import check_routable

    p = Problem(
        prompt=[{"role": "user", "content": "q"}], ground_truth=gold, data_source="x", verifier=verifier
    )
    with pytest.raises(InputError) as e:
        check_routable([p], "data")
    return str(e.value)


@pytest.mark.parametrize(
    "answer",
    [
        "[Ann, 'Bob', \"Cy\"]",  # a bracket list without quotes, quotes dropped
        "1. **Ann**\n2. _Bob_\n3. Cy",  # numbered, markdown emphasis dropped
        "'Ann', \"Bob\", *Cy*.",  # one comma line: quotes, emphasis and the final period dropped
    ],
)
def test_ordering_reads_every_list_form(answer):
    got = score("ordering", f"<answer>{answer}</answer>", ["Ann", "Bob", "Cy"])
    assert (got.score, got.reason) == (1.0, "correct")


def test_ordering_a_list_holding_a_list_is_no_ordering_and_the_gold_must_be_names():
    got = score("ordering", '<answer>["Ann", ["Bob", "Cy"]]</answer>', ["Ann", "Bob", "Cy"])
    assert (got.score, got.reason) == (0.0, "not_a_list")
    for gold in ([], ["a", None], ["a", " "], ["a", ["b"]]):
        assert _load_error("ordering", gold).startswith(
            f"data row 0: ordering: ground truth {gold!r} is not a list"
        )


def test_graph_answers_lose_their_quotes_emphasis_and_period():
    assert score("graph", "<answer>`Yes`.</answer>", "yes").score == 1.0
    assert score("graph", "<answer>**5**</answer>", 5).score == 1.0
    assert score("graph", "<answer>'No'</answer>", "yes").score == 0.0


def test_arc_grid_found_in_text_and_the_gold_must_be_a_grid():
    assert score("arc", "<answer>[[1, 2], [3, 4]] is the grid</answer>", [[1, 2], [3, 4]]).score == 1.0
    assert score("arc", "<answer>1 2\n3 4</answer>", [[1, 2], [3, 4]]).score == 1.0
    for gold in ([[1], 2], [], [[1, "x"]], "[[1]] and more"):
        assert (
            _load_error("arc", gold)
            == "data row 0: arc: ground truth is not a grid (list of lists of integers)"
        )


def test_codeio_refuses_a_functional_cruxeval_gold_it_cannot_run():
    gold = {"functional": "def f(x):\n    return x", "input": "3", "output": "3"}
    got = score("codeio", '<answer>{"output": 3}</answer>', gold)
    assert (got.score, got.reason) == (
        0.0,
        "error: CRUXEval needs code execution (use the 'cruxeval' verifier)",
    )
    assert _load_error("codeio", gold) == (
        "data row 0: codeio: a CRUXEval (functional) ground truth needs code execution: route it to 'cruxeval'"
    )
    assert score("codeio", '<answer>{"output": 3}</answer>', {"output": 3}).score == 1.0
    from reasonrl.rewards import check_routable

    check_routable([Problem(prompt=[{"role": "user", "content": "q"}], ground_truth=g, data_source="x",
                            verifier="codeio") for g in ({"output": 3}, {"x": 1, "y": [2]}, "[1, 2]")], "data")  # fmt: skip
