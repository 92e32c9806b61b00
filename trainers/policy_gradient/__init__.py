"""Policy-gradient trainers: rollout, advantages, losses, the update, prompt selection
(and the four algorithm cards: GRPO, Dr. GRPO, DAPO, SRPO)."""
