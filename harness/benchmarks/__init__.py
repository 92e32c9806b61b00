"""Benchmark definitions: loaders, per-benchmark grading settings and data quirks."""
