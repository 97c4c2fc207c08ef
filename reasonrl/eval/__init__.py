"""Evaluation: accuracy of a policy on held-out problems (`eval.accuracy`) and benchmark statistics
(`eval.metrics`: unbiased pass@k, mean / best / worst@n, maj@k over normalised answers, standard
errors, bootstrap intervals, macro averages).

This package file owns nothing itself. Evaluation does not own scoring (the same `rewards`
verifiers score training and evaluation) or generation (`rollout`).
"""
