"""reasonrl: reinforcement learning on verifiable rewards for reasoning language models.

This package file stays tiny so `import reasonrl` is fast: it imports no torch, no transformers and
no optional dependency. Import the sub-packages you need (`reasonrl.rewards`, `reasonrl.trainer`...).

Owns: `__version__`. Does not own: any re-export; everything lives in its sub-package.
"""

__version__ = "0.1.0"
