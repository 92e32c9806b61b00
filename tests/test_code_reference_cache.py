"""The cache of reference outputs: large expected values live in a content-addressed blob store,
checked when a cached reference is loaded, hashed once per process while their file is unchanged,
and stored again when found corrupt."""

import os

import pytest
from rlvr.sandbox.code.judging import blobs
from rlvr.sandbox.code.judging.reference import expected_outputs
from rlvr.sandbox.code.verify import CodeGrader


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path))
    return tmp_path


def _touch_later(path, seconds: int = 5) -> None:
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds * 10**9))


def test_an_unchanged_blob_is_hashed_once_and_a_changed_one_again(cache, monkeypatch):
    name = blobs.store(b"v" * 100_000)
    hashed = []
    real_digest = blobs.digest
    monkeypatch.setattr(blobs, "digest", lambda data: hashed.append(len(data)) or real_digest(data))
    blobs.check(name)
    blobs.check(name)
    assert hashed == [100_000]
    path = blobs._path(name)
    path.write_bytes(b"w" * 100_000)  # same size, other bytes
    # A later modification time: a rewrite within the clock's tick that keeps the size would
    # keep the stamp (the judge's own ``load`` still hashes what it reads).
    _touch_later(path)
    with pytest.raises(ValueError):
        blobs.check(name)
    assert len(hashed) == 2
    assert not path.exists()  # removed, so the value is stored anew
    with pytest.raises(FileNotFoundError):
        blobs.check(name)


def test_a_corrupt_blob_replaced_meanwhile_is_left_alone(cache, monkeypatch):
    """Another process may store the value again between our read and our removal: its new
    file (another inode) stays."""
    name = blobs.store(b"v" * 1000)
    path = blobs._path(name)
    path.write_bytes(b"w" * 1000)
    real_digest = blobs.digest

    def digest_then_replace(data):
        fresh = path.with_suffix(".fresh")
        fresh.write_bytes(b"v" * 1000)
        fresh.replace(path)  # as ``store`` does: a new file renamed into place
        return real_digest(data)

    monkeypatch.setattr(blobs, "digest", digest_then_replace)
    with pytest.raises(ValueError):
        blobs.check(name)
    monkeypatch.setattr(blobs, "digest", real_digest)
    assert path.read_bytes() == b"v" * 1000
    blobs.check(name)


def test_a_cached_reference_with_a_corrupt_blob_is_computed_and_stored_again(cache):
    reference = "def f(n):\n    return 'x' * n\n"
    with CodeGrader(workers=1) as grader:
        inputs, expected = expected_outputs(reference, [[200_000], [3]], "f", grader)
        big = expected[0]
        assert big.encoded is None and expected[1].encoded is not None  # by digest / inline
        path = blobs._path(big.digest)
        intact = path.read_bytes()
        path.write_bytes(intact[:-1] + b"y")
        _touch_later(path)
        again_inputs, again = expected_outputs(reference, [[200_000], [3]], "f", grader)
    assert again_inputs == inputs and [e.digest for e in again] == [e.digest for e in expected]
    assert path.read_bytes() == intact
    assert blobs.load(big.digest) == intact


def test_a_blob_found_corrupt_when_loaded_is_removed(cache):
    """The judge reads a blob whole with ``load``: a file changed in place (same size and
    modification time, which ``check`` trusts) is caught there and removed, so the caller's
    next reference run finds it gone and stores it again."""
    name = blobs.store(b"v" * 1000)
    path = blobs._path(name)
    blobs.check(name)
    stat = path.stat()
    path.write_bytes(b"w" * 1000)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    blobs.check(name)  # the stamp is unchanged: trusted
    with pytest.raises(ValueError):
        blobs.load(name)
    assert not path.exists()
    with pytest.raises(FileNotFoundError):
        blobs.check(name)
