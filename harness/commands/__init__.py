"""One module per ``rlvr`` subcommand; each exposes ``register(subparsers)``."""
