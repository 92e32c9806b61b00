"""Judging outside the sandbox: the judge, trusted decoding and comparison, expected outputs."""
