"""Data: the verl/Reasoning360 row schema, file I/O, procedural tasks, prompt sampling.

Owns nothing itself (import `data.schema`, `data.prompts`, `data.sampler`, `data.tasks`). The data
package does not own scoring (`rewards`) or tokenised batches (`trainer.batching`).
"""
