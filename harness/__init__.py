"""rlvr harness: benchmarks, prompts, generation, metrics, evaluation runs, ablations,
leaderboards and the ``rlvr`` command line. Grades come only from ``sandbox``."""
