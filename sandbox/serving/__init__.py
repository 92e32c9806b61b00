"""Serving the verifiers: the reward server, its client, the trainer adapters and Ray scale-out."""
