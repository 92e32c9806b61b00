"""rlvr reference trainers. Rewards come only from ``sandbox``; evaluation only from ``harness``."""
