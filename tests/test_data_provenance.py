"""Shipped benchmark files decompress to exactly the bytes listed in harness/data/SOURCES.md."""

import gzip
import hashlib
import re

from conftest import ROOT

DATA = ROOT / "harness" / "data"


def checksums():
    table = {}
    for line in (DATA / "SOURCES.md").read_text().splitlines():
        m = re.match(r"\| `(\w+/[\w.]+\.jsonl)` \| (\d+) \| (\d+) \| ([0-9a-f]{64}) \|", line)
        if m:
            table[m.group(1)] = (int(m.group(2)), int(m.group(3)), m.group(4))
    return table


def test_every_file_matches_its_checksum():
    table = checksums()
    assert len(table) == 13
    for rel, (rows, size, digest) in table.items():
        data = gzip.decompress((DATA / (rel + ".gz")).read_bytes())
        assert len(data) == size, rel
        assert hashlib.sha256(data).hexdigest() == digest, rel
        assert data.count(b"\n") == rows, rel


def test_no_unlisted_data_files():
    listed = {rel + ".gz" for rel in checksums()}
    shipped = {str(p.relative_to(DATA)) for p in DATA.glob("*/*.jsonl.gz")}
    assert shipped == listed
