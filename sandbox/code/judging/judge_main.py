"""A judge process's entry point (``python -m rlvr.sandbox.code.judging.judge_main``).

The zygote is forked first, holding only what sandboxes run (the isolation and running modules
and the standard library they need), and the judge's own modules (comparison, test caches,
digests) load after. Every sandbox process is a fork of that zygote's image: each one copies its
page tables at fork, and writes and frees its pages, so what the judge alone needs is kept out of
it (``tests/test_code_zygote_prep.py``)."""

from __future__ import annotations

from rlvr.sandbox.code.isolation.primitives import isolation_available
from rlvr.sandbox.code.isolation.zygote import start_zygote


def main() -> None:
    isolation = isolation_available()
    zygote = start_zygote(isolation[0])
    from rlvr.sandbox.code.judging import judge

    judge.main(isolation, zygote)


if __name__ == "__main__":
    main()
