"""The built-in verifiers, one module per domain (math, code, multiple choice, logic, tables, IFEval /
IFBench, LiveBench, QA, LLM judge, reasoning-gym, procedural tasks, format terms). Each registers its
functions in `rewards.base.VERIFIERS` on import; `reasonrl.rewards` imports them all.
"""
