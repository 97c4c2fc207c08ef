"""Trainer: the RL loop (`trainer.loop`) and the pieces it calls in order.

This package file owns nothing itself. The trainer does not own tensor math (`algorithms`),
generation (`rollout`), the optimizer step (`engines`) or scoring (`rewards`).
"""
