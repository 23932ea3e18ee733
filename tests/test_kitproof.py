"""The kit's switch proof: its arms, the code comparison, the icount check."""

import json
from pathlib import Path

import pytest

from schedlab.kit import kitproof
from schedlab.measuring import ab

KIT = Path("/kit/vmlinux")
VMLINUX = {**{s: Path(f"/at-{s}/vmlinux") for s in kitproof.STATE_NAMES}, "kit": KIT}


def test_arms_are_each_patch_then_each_state():
    arms = kitproof.arms()
    assert [a.variant for a in arms[:5]] == ["base", "topic-swb@1", "topic-swb@2",
                                              "topic-swb@3", "topic-swb"]
    assert [a.knobs for a in arms[5:]] == [(("swb_state", str(k)),) for k in range(5)]
    assert all(a.variant == ab.KIT_VARIANT for a in arms[5:])
    # The command line the docs print parses back to the same arms.
    items = [w.split(" ", 1)[1] for w in kitproof.command().split(" \\\n    ")
             if w.startswith("--arm ")]
    assert ab.parse_arms(items) == arms


def _fn(name, base, body, endbr=False):
    """A function as disassembly() gives it: BODY's instructions from BASE,
    4 bytes apart; 'jne +N' branches to the instruction N further on."""
    insns, addr = [], base
    if endbr:
        insns.append((addr, "endbr64"))
        addr += 4
    start = addr
    for i, t in enumerate(body):
        if t.startswith("jne +"):
            to = start + 4 * (i + int(t[5:]))
            t = f"jne {to:x} <{name}+0x{to - base:x}>"
        insns.append((addr, t))
        addr += 4
    return insns


BODY = ["call ffffffff8126b4c0 <__fentry__>", "push %rbx", "mov 0x30(%rdx),%rax",
        "mov %gs:0x1c1aca2(%rip),%rcx # ffffffff82efa030 <this_cpu_off>", "jne +2",
        "call ffffffff81234560 <idle_cpu>", "pop %rbx", "ret"]


def test_the_layout_is_taken_out_of_the_code():
    at = kitproof.normalised(_fn("should_we_balance", 0xffffffff812df370, BODY),
                             "should_we_balance")
    moved = [b.replace("0x30(", "0x38(").replace("0x1c1aca2", "0x1c1ab7e") for b in BODY]
    kit = kitproof.normalised(_fn("should_we_balance_s0", 0xffffffff812e0490, moved,
                                  endbr=True), "should_we_balance_s0")
    assert "jne <L6>" in kit and "jne <L6>" in at          # the same target, by index
    assert "mov %gs:REL(%rip),%rcx # <this_cpu_off>" in kit
    c = kitproof.compare_code(at, kit, "v7.3")
    assert c.ok and c.insns == len(BODY) and c.same == len(BODY) - 1
    assert c.layout == [("mov 0x30(%rdx),%rax", "mov 0x38(%rdx),%rax")]
    # Another branch target, register or mnemonic is not layout.
    for a, b in (("jne <L6>", "jne <L7>"), ("mov %r12,%rax", "mov %r13,%rax"),
                 ("add $0x1,%rax", "dec %rax"), ("mov 0x30(%rdx),%rax", "mov 0x30(%rdx),%rcx")):
        assert kitproof.compare_code([a], [b], "x").other == [(a, b)]
    # Another instruction, or one more, is not layout.
    other = kitproof.normalised(_fn("x", 0xffffffff81000000, BODY[:5] + ["nop"] + BODY[5:]), "x")
    c = kitproof.compare_code(at, other, "v7.3")
    assert not c.ok and c.other


def _disassembly(codes):
    def fake(vmlinux, function):
        return codes.get((vmlinux, function), [])
    return fake


def _codes(odd=None):
    codes = {(KIT, "should_we_balance"): [(0, "call ffffffff8126b4c0 <__fentry__>"),
                                          (5, "jmp ffffffff81ad31f0 <__SCT__sched_swb>")]}
    for k, s in enumerate(kitproof.STATE_NAMES):
        body = BODY + ["nop"] * k
        codes[(VMLINUX[s], "should_we_balance")] = _fn("should_we_balance", 0xffffffff81001000, body)
        if s == odd:
            body = body + ["nop"]
        codes[(KIT, f"should_we_balance_s{k}")] = _fn(f"should_we_balance_s{k}", 0xffffffff81009000,
                                                      body, endbr=True)
    return codes


def test_the_switch_adds_its_jump_the_endbr64_and_the_fentry_nop(monkeypatch):
    monkeypatch.setattr(kitproof, "disassembly", _disassembly(_codes()))
    n, how = kitproof.wrapper_constant(KIT)
    assert n == 3 and "__SCT__sched_swb" in how and "endbr64 and fentry nop" in how


def _write(root, label, boot, run, values, overhead=611.0, complete=True):
    d = root / label / f"boot-{boot}"
    d.mkdir(parents=True, exist_ok=True)
    metrics = {}
    for key, (median, mean) in values.items():
        metrics[f"{kitproof.MEDIAN}{key})"] = {"value": median}
        metrics[f"{kitproof.MEAN}{key})"] = {"value": mean}
    workload = kitproof.WORKLOADS.split(",")[run // kitproof.RUNS]
    (d / f"run-{workload}-{run % kitproof.RUNS}.json").write_text(json.dumps(
        {"label": label, "workload": workload, "run": run % kitproof.RUNS, "complete": complete,
         "metrics": metrics, "calibration": {"overhead": overhead}}))


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(kitproof.resmod, "results_dir", lambda label: tmp_path / label)
    return tmp_path


MEDIANS = {"v7.3": (103, 471), "busy": (105, 473), "one-cpu": (38, 482),
           "one-core": (38, 108), "prune": (40, 117)}


def _fill(root, added=3, odd=None, skip_kit_run=None):
    for state, (smt, mc) in MEDIANS.items():
        for boot in range(kitproof.BOOTS):
            for run in range(kitproof.expected_runs() // kitproof.BOOTS):
                spread = run % 2          # the MC median moves by one between runs
                _write(root, f"{kitproof.PREFIX}-at-{state}", boot, run,
                       {"SMT, busy": (smt, smt + 5.0), "MC, busy": (mc + spread, mc - 40.0)})
                if state == skip_kit_run and boot == 0 and run == 0:
                    continue
                extra = 1 if state == odd else 0
                _write(root, f"{kitproof.PREFIX}-kit-{state}", boot, run,
                       {"SMT, busy": (smt + added + extra, smt + 8.0),
                        "MC, busy": (mc + added + spread, mc - 37.0)})


def test_the_proof_holds(results, monkeypatch):
    monkeypatch.setattr(kitproof, "disassembly", _disassembly(_codes()))
    _fill(results)
    text, ok = kitproof.report(VMLINUX)
    assert ok, text
    assert "| one-core | stress-100, MC, busy | 108-109 | 111-112 | 108-109 |" in text
    assert "| one-core | stress-50, MC, busy | 108-109 | 111-112 | 108-109 |" in text
    assert "The switch adds 3 instructions to every call" in text
    assert "instruction for instruction" in text


def test_a_state_one_instruction_longer_fails_both_halves(results, monkeypatch):
    monkeypatch.setattr(kitproof, "disassembly", _disassembly(_codes(odd="one-cpu")))
    _fill(results, odd="one-cpu")
    text, ok = kitproof.report(VMLINUX)
    assert not ok
    assert "FAIL: one-cpu: the code differs: (nothing) | nop" in text
    assert "FAIL: one-cpu, stress-100, SMT, busy: the kit's medians less 3 (39) outside" in text
    assert "FAIL: busy" not in text


def test_missing_runs_and_code_fail(results, monkeypatch):
    monkeypatch.setattr(kitproof, "disassembly", _disassembly({}))
    _fill(results, skip_kit_run="busy")
    text, ok = kitproof.report(VMLINUX)
    assert not ok
    assert f"FAIL: kit-busy: {kitproof.expected_runs() - 1} complete runs of" in text
    assert "no should_we_balance() wrapper or copy" in text
    assert "FAIL: v7.3: no should_we_balance_sN in the kit's vmlinux" in text
    text, ok = kitproof.report(VMLINUX, "another-prefix")
    assert not ok and "no should_we_balance() instructions per call" in text


def test_the_code_half_alone_needs_no_runs(results, monkeypatch):
    monkeypatch.setattr(kitproof, "disassembly", _disassembly(_codes()))
    text, ok = kitproof.report(VMLINUX, "no-runs-here", code_only=True)
    assert ok, text
    assert "instruction for instruction (the icount half" in text
    assert "## Instructions per call" not in text
    monkeypatch.setattr(kitproof, "disassembly", _disassembly(_codes(odd="prune")))
    text, ok = kitproof.report(VMLINUX, "no-runs-here", code_only=True)
    assert not ok and "FAIL: prune: the code differs" in text
