"""The kit's record of what else moves the numbers, and the governor it pins."""

from pathlib import Path

import pytest

from schedlab.kit import noise


def _machine(root: Path, govs=("powersave", "powersave", "performance")) -> Path:
    cpu = root / noise.CPU
    for i, gov in enumerate(govs):
        (cpu / f"cpu{i}" / "cpufreq").mkdir(parents=True)
        (cpu / f"cpu{i}" / "cpufreq" / "scaling_governor").write_text(gov + "\n")
    (cpu / "cpufreq").mkdir()
    (cpu / "cpufreq" / "boost").write_text("1\n")
    (cpu / "cpuidle").mkdir()
    (cpu / "cpuidle" / "current_driver").write_text("intel_idle\n")
    for i, (name, off) in enumerate((("POLL", "0"), ("C1", "0"), ("C6", "1"))):
        st = cpu / "cpu0" / "cpuidle" / f"state{i}"
        st.mkdir(parents=True)
        (st / "name").write_text(name + "\n")
        (st / "disable").write_text(off + "\n")
    (cpu / "smt").mkdir()
    (cpu / "smt" / "control").write_text("on\n")
    (cpu / "smt" / "active").write_text("1\n")
    return root


def test_the_record_names_governor_boost_idle_states_and_smt(tmp_path, monkeypatch):
    root = _machine(tmp_path)
    monkeypatch.setattr(noise, "busy", lambda *a, **k: ["stress-ng (12) 97%"])
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/sched_schedstats").write_text("1\n")
    rec = noise.record(root)
    assert rec == {"governor": "powersave x 2, performance x 1", "boost": "boost 1",
                   "idle states": "intel_idle: POLL, C1, C6 (disabled)",
                   "smt": "control on, active 1", "schedstats": "1",
                   "busy processes": ["stress-ng (12) 97%"]}
    assert noise.record(tmp_path / "empty")["governor"] == "no cpufreq"


def test_busy_processes_are_those_over_the_share_busiest_first(tmp_path, monkeypatch):
    hz = 100
    snaps = iter([{1: ("idle", 10), 2: ("hog", 0), 3: ("some", 0), 4: ("self", 0)},
                  {1: ("idle", 11), 2: ("hog", 90), 3: ("some", 20), 4: ("self", 99),
                   5: ("new", 50)}])
    monkeypatch.setattr(noise, "_ticks", lambda root: next(snaps))
    monkeypatch.setattr(noise.time, "sleep", lambda s: None)
    monkeypatch.setattr(noise.os, "sysconf", lambda name: hz)
    assert noise.busy(tmp_path, 1.0, {4}) == ["hog (2) 90%", "some (3) 20%"]


def test_ticks_read_a_process_name_with_spaces_and_parentheses(tmp_path):
    d = tmp_path / "proc" / "42"
    d.mkdir(parents=True)
    # comm in parentheses, then state and 50 fields; utime and stime are
    # the 14th and 15th fields of the line.
    rest = ["S"] + [str(i) for i in range(4, 53)]
    rest[11], rest[12] = "300", "45"
    (d / "stat").write_text("42 (a (b) c) " + " ".join(rest) + "\n")
    assert noise._ticks(tmp_path) == {42: ("a (b) c", 345)}


def test_the_governor_is_pinned_and_put_back_also_after_an_error(tmp_path):
    root = _machine(tmp_path)
    gov = [root / noise.CPU / f"cpu{i}" / "cpufreq" / "scaling_governor" for i in range(3)]
    with pytest.raises(KeyboardInterrupt):
        with noise.pinned(True, root) as done:
            assert done == "performance set on 2 CPU(s), put back after"
            assert [g.read_text() for g in gov] == ["performance\n"] * 3
            raise KeyboardInterrupt
    assert [g.read_text() for g in gov] == ["powersave\n", "powersave\n", "performance\n"]
    with noise.pinned(False, root) as done:
        assert "--no-pin" in done and gov[0].read_text() == "powersave\n"
    with noise.pinned(True, tmp_path / "vm") as done:
        assert done == "no cpufreq here: nothing to set"
