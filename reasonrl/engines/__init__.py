"""Train engines: forward/backward/optimizer step for the policy, behind one protocol.

`single` (one CPU or CUDA device) is the reference; `fsdp2` (torchrun) comes later. Checkpoint I/O
is in `engines.checkpoint`. This package file owns nothing itself; engines do not own the loss
formulas (`algorithms`) or the order of a step (`trainer`).
"""
