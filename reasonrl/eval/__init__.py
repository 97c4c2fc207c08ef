"""Evaluation: accuracy of a policy on held-out problems (`eval.accuracy`).

This package file owns nothing itself. Evaluation does not own scoring (the same `rewards`
verifiers score training and evaluation) or generation (`rollout`).
"""
