"""The workloads a measurement plan can run: one record each.

A workload is a one-line command the plan runner (guest/run-plan.sh) runs
under `bash -c` with NCPU (CPUs online) and SECS in its environment; a
workload longer than one line is a script in guest/workloads/.  Its parser
is a function of parsers.py that turns the workload's output into metrics,
and `metrics` names the ones the summary tables show (compare.py).
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from schedlab.core import deps
from schedlab.core.util import LabError, package_file
from schedlab.measuring import parsers

Parser = Callable[[str], Dict[str, parsers.Metric]]


@dataclass(frozen=True)
class Workload:
    name: str
    command: str        # one line of bash; may use $NCPU, $SECS
    parser: Parser
    tools: Tuple[str, ...]   # binaries it needs
    what: str
    timed: bool = True  # runs for $SECS (else a fixed amount of work)
    # The metrics of its own output the headline table shows, and the one
    # the sweep table's "result" column shows (default: the first of them).
    results: Tuple[str, ...] = ()
    sweep: str = ""
    # The least time limit of one run, whatever --seconds, and the seconds a
    # run takes besides its window (a workload that sets up groups and a
    # probe of its own around it), for the plan's estimate.
    min_limit: int = 0
    overhead: int = 0

    @property
    def sweep_result(self) -> str:
        return self.sweep or (self.results[0] if self.results else "")


def _script(name: str, *args: str) -> str:
    """The command that runs guest/workloads/NAME with ARGS."""
    return shlex.join(["bash", str(package_file(f"guest/workloads/{name}")), *args])


# Groups for the messaging benchmarks: one per four CPUs (20 senders and 20
# receivers each), so the task count follows the topology.
_G = "G=$(( NCPU >= 8 ? NCPU / 4 : 2 ))"

WORKLOADS: Dict[str, Workload] = {}


def _add(w: Workload) -> None:
    WORKLOADS[w.name] = w


for _load in (100, 90, 50, 25):
    _add(Workload(f"stress-{_load}",
                  f"stress-ng --cpu $NCPU --cpu-load {_load} --timeout ${{SECS}}s "
                  "--metrics-brief", parsers.stress_ng, ("stress-ng",),
                  f"stress-ng, one CPU worker per online CPU at {_load}% load "
                  "(the 2023 should_we_balance() report's load)",
                  results=("stress-ng cpu bogo-ops/s",)))
_add(Workload("hackbench-process", f"{_G}; hackbench -g $G -l 50", parsers.hackbench,
              ("hackbench",), "rt-tests hackbench, processes over sockets, 1 group per 4 CPUs",
              timed=False, results=("hackbench time",)))
_add(Workload("hackbench-overload", "hackbench -g $(( 2 * NCPU )) -l 20", parsers.hackbench,
              ("hackbench",), "rt-tests hackbench, processes over sockets, 2 groups per "
              "online CPU (80 tasks per CPU): overloaded and going idle often", timed=False,
              results=("hackbench time",)))
# For newly idle balancing against NI_RANDOM/NI_RATE (docs/results/newidle-ni-screen-smt8.md):
# many short idle periods that IPC wakeups end (a timed sleep rounds up to a
# tick in the lab's builds).
_add(Workload("ni-fifo", f"{_G}; stress-ng --fifo $G --fifo-readers 32 --timeout ${{SECS}}s "
              "--metrics-brief", parsers.stress_ng, ("stress-ng",),
              "stress-ng fifo, 1 writer per 4 CPUs waking its 32 readers one at a time "
              "(8 blocked readers per CPU, the shape of schbench -m 4 on 16 CPUs)",
              results=("stress-ng fifo bogo-ops/s",)))
_add(Workload("ni-hackbench", _script("ni-hackbench.sh"), parsers.ni_hackbench,
              ("hackbench", "awk"), "rt-tests hackbench, processes over sockets, 1 group per 4 "
              "CPUs (10 tasks per CPU), 20-loop rounds started again until --seconds have "
              "passed", results=("hackbench messages/s",)))
_add(Workload("hackbench-pipe", f"{_G}; hackbench -p -T -g $G -l 50", parsers.hackbench,
              ("hackbench",), "rt-tests hackbench, threads over pipes, 1 group per 4 CPUs",
              timed=False, results=("hackbench time",)))
# The other two of hackbench's four modes at the same group count, and one
# group alone (40 tasks: most CPUs of a large machine stay idle, so wakeups
# find idle CPUs and CPUs go newly idle): with hackbench-overload, three
# group counts.
_add(Workload("hackbench-thread", f"{_G}; hackbench -T -g $G -l 50", parsers.hackbench,
              ("hackbench",), "rt-tests hackbench, threads over sockets, 1 group per 4 CPUs",
              timed=False, results=("hackbench time",)))
_add(Workload("hackbench-process-pipe", f"{_G}; hackbench -p -g $G -l 50", parsers.hackbench,
              ("hackbench",), "rt-tests hackbench, processes over pipes, 1 group per 4 CPUs",
              timed=False, results=("hackbench time",)))
_add(Workload("hackbench-one-group", "hackbench -g 1 -l 200", parsers.hackbench,
              ("hackbench",), "rt-tests hackbench, processes over sockets, one group (40 "
              "tasks) whatever the CPU count", timed=False, results=("hackbench time",)))
_add(Workload("perf-messaging", f"{_G}; perf bench sched messaging -g $G -l 50",
              parsers.perf_bench_sched, ("perf",),
              "perf bench sched messaging (the in-tree hackbench), 1 group per 4 CPUs",
              timed=False, results=("perf sched messaging time",),
              sweep="perf sched messaging ops/s"))
_add(Workload("perf-pipe", "perf bench sched pipe -l 20000", parsers.perf_bench_sched,
              ("perf",), "perf bench sched pipe, 20000 round trips between two tasks",
              timed=False, results=("perf sched pipe time",), sweep="perf sched pipe ops/s"))
_add(Workload("dbench", "cd /tmp && dbench -t $SECS $NCPU", parsers.dbench, ("dbench",),
              "dbench on /tmp, one client per online CPU", results=("dbench throughput",)))
_add(Workload("tbench", _script("tbench.sh"), parsers.dbench, ("tbench", "tbench_srv"),
              "tbench over loopback, one client per online CPU",
              results=("tbench throughput",)))
_add(Workload("cgroup-nested", _script("cg-nested.sh"), parsers.cg_nested, ("stress-ng",),
              "nested cgroup CPU shares, the layout of the cgroup selftest "
              "test_cpucg_nested_weight_overprovisioned (a leaf beside a group of two, "
              "NCPU hogs each), read over a window all three share",
              results=("nested share error", "leaf0 share"), overhead=5))
# The task-group gathering study (guest/workloads/tg-gather.sh): a group
# whose tasks wake each other, at depth 1 or 2, every CPU kept busy by other
# groups.  Named tg-WAKER-dDEPTH-SHARE-tTASKS, SHARE being "seed" (default
# weights, as in the 2014 report) or sN (weights that entitle the group to N
# CPUs at either depth), with -lL at the end for L runnable tasks per CPU in
# all (the busy groups' hogs make up the rest; without it NCPU hogs in each
# busy group); any such name is a workload, these are listed.
TG_WAKERS = {
    "dbench": ("dbench clients", ("dbench",), "dbench throughput"),
    "hackbench": ("hackbench threads over pipes, each sender to every receiver, in rounds "
                  "of 20 loops", ("hackbench",), "hackbench rounds per s"),
    "fifo": ("stress-ng fifo, one writer waking TASKS-1 readers", ("stress-ng",),
             "stress-ng fifo bogo-ops/s"),
    "pipeherd": ("stress-ng pipeherd, 100 processes passing a token over one pipe",
                 ("stress-ng",), "stress-ng pipeherd bogo-ops/s"),
    "switch": ("stress-ng switch, TASKS/2 ping-pong pairs", ("stress-ng",),
               "stress-ng switch bogo-ops/s"),
    "cpu": ("stress-ng cpu, TASKS CPU hogs that never wake each other (the control)",
            ("stress-ng",), "stress-ng cpu bogo-ops/s"),
}
_TG_NAME = re.compile(r"tg-(" + "|".join(TG_WAKERS) + r")-d([12])"
                      r"-(seed|s\d+(?:\.\d+)?)-t(\d+)(?:-l(\d+(?:\.\d+)?))?")
TG_RESULTS = ("tg achieved/entitled", "tg cpus carrying >=10% of its time",
              "tg wakeups placed on a busy cpu")


def tg_workload(name: str) -> Optional[Workload]:
    """The record of a tg-... name, or None if NAME is not one."""
    m = _TG_NAME.fullmatch(name)
    if not m:
        return None
    waker, depth, share, tasks, load = m.groups()
    what, tools, throughput = TG_WAKERS[waker]
    if int(tasks) < 2:
        raise LabError(f"{name}: a group needs 2 tasks or more")
    if load is not None and not 0 < float(load) <= 16:
        raise LabError(f"{name}: -lL is runnable tasks per CPU, above 0 and at most 16")
    entitled = ("default weights (depth 2: a third of the depth-1 share)" if share == "seed"
                else f"entitled to {share[1:]} CPUs")
    busy = (f"{load} runnable tasks per CPU in all, sibling groups' CPU hogs making up the "
            "rest" if load else "every CPU kept busy by sibling groups")
    return Workload(name, _script("tg-gather.sh", waker, depth, share if share == "seed"
                                  else share[1:], tasks, *([load] if load else [])),
                    parsers.tg_gather, ("bpftrace", "stress-ng", *tools),
                    f"{what}, {tasks} tasks in a group at depth {depth}, {entitled}, {busy}",
                    results=TG_RESULTS + (throughput,), sweep="tg achieved/entitled",
                    # 110-120 s a run with 10 s windows under single-thread
                    # TCG on smt4 with a soak beside it.
                    min_limit=300, overhead=80)


for _w in TG_WAKERS:
    for _d in (1, 2):
        _add(tg_workload(f"tg-{_w}-d{_d}-seed-t8"))  # type: ignore[arg-type]

SCHBENCH = "schbench"
DEFAULT_PLAN = ["stress-100", "stress-50", "hackbench-process"]
# The first is what the stopping rule and the sweep tables take: the
# 99th percentile of wakeup latency, schbench's own headline.
SCHBENCH_RESULTS = ("schbench wakeup p99",) + tuple(
    n for n in (f"schbench {k} {p}" for k in ("wakeup", "request")
                for _, p in parsers.SCHBENCH_PCTS) if n != "schbench wakeup p99") \
    + ("schbench rps",)


def schbench_workload(binary: Path) -> Workload:
    return Workload(SCHBENCH, f"{shlex.quote(str(binary))} -m 2 -t $(( NCPU / 2 > 0 ? "
                    "NCPU / 2 : 1 )) -r $SECS", parsers.schbench, (str(binary),),
                    "schbench (your binary), 2 message threads, NCPU/2 workers each",
                    results=SCHBENCH_RESULTS)


# The benchmarks at one point of a sweep (kit/benchmarks.py picks the
# points from the CPU count), each run for $SECS: the fixed-work ones
# started again until then (guest/workloads/timed.sh), so that a run lasts
# as long on a large machine as on a small one.
#   hackbench-MODE-TRANSPORT-gG   rt-tests hackbench, G groups of 40 tasks
#   perf-messaging-gG             perf bench sched messaging, G groups
#   perf-pipe-timed               perf bench sched pipe, two tasks
#   tbench-cN                     tbench over loopback, N clients
#   schbench-mM-tN                schbench, M message threads, N workers each
_POINT = re.compile(r"(?:hackbench-(process|thread)-(socket|pipe)-g(\d+)"
                    r"|perf-messaging-g(\d+)|(perf-pipe-timed)|tbench-c(\d+)"
                    r"|schbench-m(\d+)-t(\d+))")
# Messages a hackbench or perf messaging group passes per loop: each of its
# 20 senders to each of its 20 receivers.
_GROUP_MESSAGES = 400
PIPE_LOOPS = 10000


def _loops(groups: int) -> int:
    """Loops of one hackbench round: about 800,000 messages whatever G, and
    at least 100 loops (2,000 messages a task), so that a round is the
    messages, not the start and exit of its tasks."""
    return max(100, 2000 // groups)


def point_workload(name: str, schbench: Optional[Path] = None) -> Optional[Workload]:
    """The record of a sweep point's NAME, or None if NAME is not one."""
    m = _POINT.fullmatch(name)
    if not m:
        return None
    mode, transport, hg, pg, pipe, clients, msg, workers = m.groups()
    count = int(hg or pg or clients or msg or 1)
    if count < 1 or int(workers or 1) < 1:
        raise LabError(f"{name}: counts start at 1")
    if hg or pg:
        groups = count
        loops = _loops(groups)
        flags = [*(["-T"] if mode == "thread" else []), *(["-p"] if transport == "pipe" else [])]
        label = "hackbench" if hg else "perf-messaging"
        cmd = (["hackbench", *flags, "-g", str(groups), "-l", str(loops)] if hg else
               ["perf", "bench", "sched", "messaging", "-g", str(groups), "-l", str(loops)])
        what = (f"rt-tests hackbench, {mode}es over {transport}s, {groups} group(s) of 40 tasks"
                if hg else f"perf bench sched messaging, {groups} group(s) of 40 processes "
                "over sockets")
        return Workload(name, _script("timed.sh", label, "messages",
                                      str(groups * _GROUP_MESSAGES * loops), *cmd),
                        parsers.timed, (cmd[0],),
                        f"{what}, rounds of {loops} loops until --seconds have passed",
                        results=(f"{label} messages/s", f"{label} messages/s, own time"))
    if pipe:
        cmd = ["perf", "bench", "sched", "pipe", "-l", str(PIPE_LOOPS)]
        return Workload(name, _script("timed.sh", "perf-pipe", "round-trips", str(PIPE_LOOPS),
                                              *cmd),
                        parsers.timed, ("perf",), f"perf bench sched pipe, rounds of "
                        f"{PIPE_LOOPS} round trips until --seconds have passed",
                        results=("perf-pipe round-trips/s", "perf-pipe round-trips/s, own time"))
    if clients:
        return Workload(name, _script("tbench.sh", clients), parsers.dbench,
                        ("tbench", "tbench_srv"), f"tbench over loopback, {clients} client(s)",
                        results=("tbench throughput",))
    if not schbench:
        raise LabError(f"{name} needs a schbench binary (schbench is not packaged: "
                       "./schedlab hw --setup fetches and builds it, or --bench-dir)")
    # No -w: schbench ignores its warm-up time in runs under 30 s; the
    # kit's warm-up comes before the sweep's first point.
    return Workload(name, shlex.join([str(schbench), "-m", msg, "-t", str(workers)])
                    + " -r $SECS", parsers.schbench, (str(schbench),),
                    f"schbench, {msg} message thread(s) with {workers} worker(s) each",
                    results=SCHBENCH_RESULTS)


def all_results() -> List[Workload]:
    """Every workload record, schbench's and one of each kind of sweep point
    included (for the summary tables)."""
    points = [point_workload(n, Path(SCHBENCH)) for n in (
        "hackbench-process-socket-g1", "perf-messaging-g1", "perf-pipe-timed", "tbench-c1",
        "schbench-m1-t1")]
    return list(WORKLOADS.values()) + [schbench_workload(Path(SCHBENCH))] + \
        [w for w in points if w]


def workload(name: str, schbench: Optional[Path] = None) -> Workload:
    found = tg_workload(name) or point_workload(name, schbench)
    if found:
        return found
    if name == SCHBENCH:
        if not schbench:
            raise LabError("the schbench workload needs your binary: --schbench PATH "
                           "(schbench is not packaged by Debian)")
        return schbench_workload(schbench)
    if name not in WORKLOADS:
        raise LabError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}, "
                       f"{SCHBENCH} (with --schbench PATH)")
    return WORKLOADS[name]


def for_reparse(name: str, command: str) -> Workload:
    """The record of a workload named in a result (schbench is the user's binary)."""
    if name.startswith(SCHBENCH):
        return Workload(name, command, parsers.schbench, (), "", results=SCHBENCH_RESULTS)
    return WORKLOADS.get(name) or tg_workload(name) or point_workload(name) \
        or Workload(name, command, parsers.schbench, (), "")


def plan_workloads(text: Optional[str], schbench: Optional[Path] = None) -> List[Workload]:
    names = text.split(",") if text else list(DEFAULT_PLAN)
    return [workload(n, schbench) for n in names]


def missing_tools(tools: Sequence[str]) -> List[str]:
    """The tools this machine lacks, each with its Debian package."""
    out = []
    for tool in sorted(set(tools)):
        found = Path(tool).is_file() if "/" in tool else (
            shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin"))
        if not found:
            pkg = deps.GUEST_TOOLS.get(tool)
            out.append(f"{tool} (Debian package {pkg})" if pkg else tool)
    return out
