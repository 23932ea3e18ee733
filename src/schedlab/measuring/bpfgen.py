"""The bpftrace programs of the probes: one program's text per attach method.

A probe's program is guest/bt/NAME.bt with placeholders: %ENTRY%, %EXIT%,
%IDLE% and %RQ% per attach method (fentry, as bpftrace's kfunc, or kprobe),
and the probe's own (params: placeholder, kfunc value, kprobe value).  The
cost probes share guest/bt/cost.bt, whose placeholders cost_params() makes.
Every program ends with a line that prints its maps when the window closes.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from schedlab.core.util import package_file

# A cost probe keyed by domain and idle type keys a call by level * 4 + idle
# (7.3's enum cpu_idle_type has three values).
IDLE_KEYS = 4

Params = Tuple[Tuple[str, str, str], ...]


def program(name: str, attach: str, maps: Sequence[str], params: Params = ()) -> str:
    """guest/bt/NAME.bt for one attach method ('kfunc' or 'kprobe'), with a
    line that prints MAPS when the window closes; "" for no program."""
    if not name:
        return ""
    kfunc = attach == "kfunc"
    text = package_file(f"guest/bt/{name}.bt").read_text()
    for key, on_kfunc, on_kprobe in params:
        text = text.replace(key, on_kfunc if kfunc else on_kprobe)
    for key, value in (("%ENTRY%", "kfunc" if kfunc else "kprobe"),
                       ("%EXIT%", "kretfunc" if kfunc else "kretprobe"),
                       ("%IDLE%", "args->idle" if kfunc else "arg3"),
                       ("%RQ%", "args->rq" if kfunc else "((struct rq *)arg0)")):
        text = text.replace(key, value)
    return text.rstrip("\n") + "\n" + print_at_close(maps) + "\n"


def print_at_close(maps: Sequence[str]) -> str:
    """Print the maps when the window closes, before the gate says 'stopped'
    (the gate is attached last, so it runs last): the counts are out even when
    bpftrace then hangs detaching its fentry probes under TCG and has to be
    killed, which lost 3 of 15 runs of one plan before this."""
    prints = " ".join(f"print(@{m});" for m in maps)
    return f'tracepoint:sched:sched_process_exec /comm == "schedlab-off"/ {{ {prints} }}'


def gate() -> str:
    """The gate (guest/bt/gate.bt): nothing is counted until it opens."""
    return package_file("guest/bt/gate.bt").read_text()


def cost_params(func: str, prefix: str, sd: Optional[Tuple[str, str]], top: int, step: int = 1,
                key_out: str = "", entry_key: Optional[Tuple[str, str]] = None,
                pairs: bool = False, idle: Optional[Tuple[str, str]] = None) -> Params:
    """guest/bt/cost.bt's placeholders for one cost probe (probes.cost_probe()
    says what the arguments mean)."""
    lv = f"@{prefix}_lv[cpu]"
    kf, kp = sd or ("", "")
    key = (f"{kf}->level", f"{kp}->level") if sd else entry_key or ("0", "0")
    if sd and idle:
        key = (f"{key[0]} * {IDLE_KEYS} + {idle[0]}", f"{key[1]} * {IDLE_KEYS} + {idle[1]}")
    store = (f"@{prefix}_name[$k] = str({kf}->name);",
             f"@{prefix}_name[$k] = str({kp}->name);") if sd else ("", "")
    if pairs:
        pair = f"@{prefix}_pair[$k, cpu] = count();"
        store = (f"{store[0]} {pair}", f"{store[1]} {pair}")
    params = (("%FUNC%", func, func), ("%P%", prefix, prefix), ("%KEY%", *key),
              ("%NAME%", *store), ("%KEY_OUT%", key_out or lv, key_out or lv),
              ("%TOP%", str(top), str(top)), ("%STEP%", str(step), str(step)))
    return params
