"""Models: loading any Hugging Face causal LM, and bootstrapping the tiny demo model offline.

This package file owns nothing itself (`models.loading`, `models.tiny`). Models do not own
training (`engines`) or checkpoints (`engines.checkpoint`).
"""
