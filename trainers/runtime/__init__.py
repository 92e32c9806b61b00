"""What both trainer families share: distribution, precision, checkpoints and the training log."""
