"""The wording of every prompt reasonrl writes: instructions appended to problems by the converters
(`data.prepare`) and the benchmark loaders (`eval.benchmarks`), so training and evaluation prompts
match. Where a text follows a published convention, the comment says whose.

Owns: the instruction strings and the small builders that put a problem and its instruction
together (`user`, `code_fence`). Does not own: chat templates (`data.prompts`, `data.chat_template`).
"""

from __future__ import annotations

# DeepSeek-R1 / lighteval / open-r1 math convention (MATH-500, AIME, DeepScaleR, ORZ, MATH)
MATH = "Please reason step by step, and put your final answer within \\boxed{}."
# verl's GSM8K preprocessing (answers after "####", as the dataset's own rationales end)
GSM8K = 'Let\'s think step by step and output the final answer after "####".'
# multiple choice: the boxed letter (Reasoning360's gpqa_diamond / supergpqa wording)
CHOICE = (
    "Please reason step by step, and put your final answer option within \\boxed{}. Only put the letter "
    "in the box, e.g. \\boxed{A}. There is only one correct answer."
)
# tables / finance (Reasoning360 table preprocessing, as released after postprocess)
TABLE_PREAMBLE = (
    "You are given one or more tables. Use the information in the table to answer the following question."
)
TABLE = (
    "Please output the final answer in \\boxed{}. If there are multiple answers, include them in a single "
    "box, separated by |."
)
FINQA = "Please output the final numeric answer within \\boxed{}."
# code (Reasoning360 codegen preprocessing wording)
HUMANEVAL = (
    "Write a complete, self-contained Python solution to the following problem. Your solution must include "
    "all necessary imports and the full function definition including the signature exactly as specified. "
    "Do not modify the function signature or docstring."
)
MBPP = (
    "Your solution should be a complete, self-contained function in a markdown code block. Make sure your "
    "solution passes the following test cases:"
)
MBPP_AFTER = "Please do not include the test cases in your solution."
CODE_TASK = "Solve the programming task below in a Python markdown code block."
CODE_STDIO = (
    "Read the inputs from stdin, solve the problem and write the answer to stdout (do not directly test on "
    "the sample inputs)."
)
CODE_STARTER = "Use the following starter code and complete the function:"
# LiveCodeBench's own wording
LCB_SYSTEM = (
    "You are an expert Python programmer. You will be given a question (problem specification) and will "
    "generate a correct Python program that matches the specification and passes all tests."
)
LCB_STARTER = (
    "You will use the following starter code to write the solution to the problem and enclose your code "
    "within delimiters."
)
LCB_STDIO = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on "
    "the sample inputs). Enclose your code within delimiters as follows. Ensure that when the python "
    "program runs, it reads the inputs, runs the algorithm and writes output to STDOUT."
)
# logic (Reasoning360 logic preprocessing)
ZEBRA = (
    'Solve the puzzle. Return the complete solution grid as a dictionary with keys "header" (the list of '
    'attribute names, starting with "House") and "rows" (one list of values per house, in header '
    'order) inside <answer> and </answer> tags, for example <answer> {"header": ["House", "Name"], '
    '"rows": [["1", "Alice"], ["2", "Bob"]]} </answer>.'
)
ARC = (
    "You are a world-class puzzle solver with exceptional pattern recognition skills. Your task is to "
    "analyze the examples, each an input grid and its output grid, find the transformation rule, and apply "
    "it to the test input."
)
ARC_ANSWER = (
    "Please put your answer within <answer> and </answer> tags, your final answer should be only the "
    "output grid (2d array)."
)
# simulation
CODEIO_ANSWER = "Please output the final answer within ```json```."
CRUXEVAL_O = (
    "You are given a Python function and an assertion containing an input to the function. Complete the "
    "assertion with a literal (no unsimplified expressions, no function calls) containing the output when "
    "executing the provided code on the given input, even if the function is incorrect or incomplete. "
    "Put the full assertion in a ```python``` block."
)
CRUXEVAL_I = (
    "You are given a Python function and an assertion of its output. Find any input such that executing "
    "the function on it leads to the given output. There may be several answers; give only one. Write "
    "the completed assertion, with the input as a literal, in a ```python``` block."
)

# Search-R1 (PeterJinGo/Search-R1, scripts/data_process/nq_search.py): the question follows this
# instruction; queries in <search> tags, results in <information> tags (rollout.tools.format search_r1)
SEARCH_R1 = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
    "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
    "by <search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: "
)
# verl's Search-R1-like multi-turn preprocessing (examples/data_preprocess/preprocess_search_r1_dataset.py):
# a system message, and queries as tool calls (rollout.tools.format hermes, names [search])
SEARCH_R1_SYSTEM = "You are a helpful and harmless assistant."
# (the call written out as the JSON a Hermes call is, as ferret's Search-R1 template does, where verl's
# prefix says "<tool_call> query </tool_call>" and leaves the JSON to the tools listed in the chat template)
SEARCH_R1_HERMES = SEARCH_R1.replace(
    "<search> query </search>",
    '<tool_call>{"name": "search", "arguments": {"query_list": ["query"]}}</tool_call>',
).replace("<information> and </information>", "<tool_response> and </tool_response>")


def user(text: str, instruction: str | None = None, sep: str = "\n\n") -> list[dict[str, str]]:
    """One user turn: the problem, then the instruction (if any)."""
    content = text.strip() if not instruction else f"{text.strip()}{sep}{instruction}"
    return [{"role": "user", "content": content}]


def code_fence(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code.rstrip()}\n```"


def markdown_table(rows: list[list]) -> str:
    """A cell matrix as a markdown table, the first row as the header."""
    rows = [[" ".join(str("" if c is None else c).split()).replace("|", "\\|") for c in r] for r in rows]
    width = max((len(r) for r in rows), default=0)
    rows = [r + [""] * (width - len(r)) for r in rows]
    if not rows:
        return ""
    lines = ["| " + " | ".join(rows[0]) + " |", "| " + " | ".join(["---"] * width) + " |"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows[1:]])


# reasoning-gym rows (the answer format its `extract_answer` and our reasoning_gym verifier read)
GYM = (
    "Think the problem through step by step, then give only the final answer inside <answer> and </answer> "
    "tags, in the format the question asks for."
)
