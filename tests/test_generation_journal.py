"""The generation journal behind resumable RandOpt / CoRP runs: exact keys, torn lines, replay accounting."""

from rlvr.trainers.populations.journal import GenerationJournal, generation_key
from rlvr.trainers.populations.perturb import Component


def test_keys_tell_apart_every_change_of_spec_or_problems():
    spec = [Component(7, 0.002), Component(9, 0.004, -1.0)]
    key = generation_key(spec, ["a", "b"])
    assert key == generation_key(list(spec), ["a", "b"])
    assert key != generation_key(spec, ["b", "a"])  # completions are stored in problem order
    assert key != generation_key(spec[:1], ["a", "b"])
    assert key != generation_key([Component(7, 0.002), Component(9, 0.004, 1.0)], ["a", "b"])
    assert key != generation_key([Component(7, 0.0020000000000000005), spec[1]], ["a", "b"])
    assert generation_key([], ["a"]) != generation_key([], ["a", "b"])


def test_a_torn_line_is_cut_and_earlier_entries_replay_once(tmp_path):
    journal = GenerationJournal(tmp_path, keep=False)
    journal.record("k1", ["one", "two"], 2.5)
    journal.record("k2", ["three"], 1.0)
    journal.close()
    path = tmp_path / "generations.jsonl"
    whole = path.read_text()
    path.write_text(whole + '{"key": "k3", "texts": ["fo')  # killed mid-write
    resumed = GenerationJournal(tmp_path, keep=True)
    assert set(resumed.entries) == {"k1", "k2"} and path.read_text() == whole
    assert resumed.lookup("k1") == ["one", "two"] and resumed.lookup("k1") == ["one", "two"]
    assert resumed.lookup("k3") is None
    assert (resumed.replayed, resumed.replayed_seconds) == (1, 2.5)  # the second hit was free in the first run too
    resumed.record("k3", ["four"], 0.5)
    resumed.close()
    again = GenerationJournal(tmp_path, keep=True)
    again.close()
    assert set(again.entries) == {"k1", "k2", "k3"}
    fresh = GenerationJournal(tmp_path, keep=False)  # a fresh run starts an empty journal
    fresh.close()
    assert fresh.entries == {} and path.read_text() == ""


def test_a_corrupt_line_ends_the_journal_there(tmp_path):
    path = tmp_path / "generations.jsonl"
    path.write_text('{"key": "k1", "texts": ["x"], "seconds": 1}\nnot json\n{"key": "k2", "texts": [], "seconds": 1}\n')
    journal = GenerationJournal(tmp_path, keep=True)
    journal.close()
    assert set(journal.entries) == {"k1"} and path.read_text().count("\n") == 1
