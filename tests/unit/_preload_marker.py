"""Imported only where a test asks for it: `RewardRunner(preload=...)` workers (tests/unit/test_rewards_runner.py)."""
