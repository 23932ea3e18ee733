#!/usr/bin/env python3
"""Group-sum cache simulation for periodic load balancing (sched_balance_domains).

Machine: 2 sockets x 12 cores x 8 SMT = 192 CPUs; cpu = socket*96 + core*8 + thread.
Levels: L0 SMT (span core, groups = CPUs), L1 MC (span socket, groups = cores),
        L2 NUMA (span all, groups = sockets).
Stdlib only.  Usage: python3 sim.py [nseeds]
"""
import random
import sys
from collections import defaultdict

NCPU, NSOCK, NCORE, NSMT = 192, 2, 12, 8
BI = [8, 96, 192]            # sd->balance_interval (ms) = span weight
BUSY_FACTOR = 16
GW = [1, 8, 96]              # group weight at each level (L0 groups = 1 CPU)
W_SUMS, W_COPY, K_CHECK, I_READ = 200, 60, 25, 40
DESIGNS = ["none", "A", "B", "C-busy", "C-all", "D"]


def m2j(ms, hz):             # msecs_to_jiffies, rounds up
    return -(-ms * hz // 1000)


def intervals(hz):
    mx = hz * NCPU // 10
    cl = lambda x: max(1, min(mx, x))
    return ([cl(m2j(b * BUSY_FACTOR, hz) - 1) for b in BI],
            [cl(m2j(b, hz)) for b in BI])


def ttls(hz, form):
    t = [0, 0, 0]
    for L in (1, 2):
        if form == "v11":
            t[L] = m2j(BI[L] * BUSY_FACTOR, hz) // 64
        else:  # "ms": integer ms first, then round up to jiffies
            t[L] = m2j(BI[L] * BUSY_FACTOR // 64, hz)
    return t


def idle_set(busy_pct):
    p = 100 - busy_pct       # CPU i idle iff i*p/100 crosses an integer
    return [((i + 1) * p) // 100 > (i * p) // 100 for i in range(NCPU)]


def topology():
    core = [c // NSMT for c in range(NCPU)]          # global core id 0..23
    sock = [c // (NSMT * NCORE) for c in range(NCPU)]
    core_cpus = [list(range(k * NSMT, (k + 1) * NSMT)) for k in range(NSOCK * NCORE)]
    sock_cpus = [list(range(s * 96, (s + 1) * 96)) for s in range(NSOCK)]
    sock_cores = [list(range(s * NCORE, (s + 1) * NCORE)) for s in range(NSOCK)]
    return core, sock, core_cpus, sock_cpus, sock_cores


CORE, SOCK, CORE_CPUS, SOCK_CPUS, SOCK_CORES = topology()


def swb_table(idle):
    def first(grp):
        idl = [c for c in grp if idle[c]]
        return idl[0] if idl else grp[0]
    t0 = [True] * NCPU
    t1 = [first(CORE_CPUS[CORE[c]]) == c for c in range(NCPU)]
    t2 = [first(SOCK_CPUS[SOCK[c]]) == c for c in range(NCPU)]
    return [t0, t1, t2]


def run(hz, form, phase, busy_pct, design, seed):
    busyI, idleI = intervals(hz)
    ttl = ttls(hz, form)
    idle = idle_set(busy_pct)
    isbusy = [not x for x in idle]
    iv = [[busyI[L] if isbusy[c] else idleI[L] for c in range(NCPU)] for L in range(3)]
    swb = swb_table(idle)
    rng = random.Random(seed)
    start = 0
    T2 = busyI[2]
    cnt_from, end = start + T2, start + 4 * T2
    last = [[0] * NCPU for _ in range(3)]
    for L in range(3):
        off = rng.randint(0, busyI[L] - 1)            # used by "aligned"
        for c in range(NCPU):
            if phase == "random":
                last[L][c] = start - rng.randint(0, iv[L][c] - 1)
            else:
                last[L][c] = start - off
    # slots: level 1 = 24 cores, level 2 = 2 sockets
    stamp = {1: [None] * (NSOCK * NCORE), 2: [None] * NSOCK}
    wj = {1: [None] * (NSOCK * NCORE), 2: [None] * NSOCK}
    st = dict(bb=[0] * 3, bi=[0] * 3, up=[0] * 3, pat=[0] * 3, chk=[0] * 3,
              w=[0] * 3, hit=[0] * 3, grp=[0] * 3)

    child_writes = design in ("A", "B", "D")
    reader_writes_busy = design in ("C-busy", "C-all")
    reader_writes_idle = design == "C-all"
    cached = design != "none"

    def write(sl, g, s, now, counting, c=None, L=None):
        if wj[sl][g] == now:                         # fresh rule
            return
        if design == "D":
            old = stamp[sl][g]
            if old is not None and 2 * (now - old) < ttl[sl]:
                return
        if design == "B":
            if not (last[L + 1][c] + iv[L + 1][c] <= now + ttl[L + 1]):
                return
        stamp[sl][g] = s
        wj[sl][g] = now
        if counting:
            st["w"][sl] += 1

    def balance(L, c, now, counting):
        b = isbusy[c]
        if counting:
            (st["bb"] if b else st["bi"])[L] += 1
        if L == 0:
            if b and counting:
                st["up"][0] += NSMT
                st["pat"][0] += NSMT
            if child_writes:
                write(1, CORE[c], now, now, counting, c, 0)
            return
        groups = SOCK_CORES[SOCK[c]] if L == 1 else list(range(NSOCK))
        gw = GW[L] if L == 1 else 96
        ttlL = ttl[L]
        oldest = now
        if b:
            reads = 0
            for g in groups:
                s = stamp[L][g]
                if cached and s is not None and s <= now <= s + ttlL:
                    if s < oldest:
                        oldest = s
                    if counting:
                        st["hit"][L] += 1
                else:
                    reads += gw
                    if reader_writes_busy:
                        write(L, g, now, now, counting)
            if counting:
                st["up"][L] += gw * len(groups)
                st["pat"][L] += reads
                st["grp"][L] += len(groups)
                if cached:
                    st["chk"][L] += len(groups)
        else:
            if reader_writes_idle:
                for g in groups:
                    write(L, g, now, now, counting)
        if L == 1 and child_writes:
            write(2, SOCK[c], oldest, now, counting, c, 1)

    def nextdue(c):
        return min(last[0][c] + iv[0][c], last[1][c] + iv[1][c], last[2][c] + iv[2][c])

    buckets = defaultdict(list)
    for c in range(NCPU):
        buckets[max(nextdue(c), start)].append(c)
    for now in range(start, end):
        lst = buckets.pop(now, None)
        if not lst:
            continue
        lst.sort()
        counting = now >= cnt_from
        for c in lst:
            for L in range(3):
                if now < last[L][c] + iv[L][c]:
                    continue
                last[L][c] = now
                if not swb[L][c]:
                    break
                balance(L, c, now, counting)
            nd = nextdue(c)
            buckets[nd if nd > now else now + 1].append(c)
    st["jiffies"] = end - cnt_from
    return st


def avg(dicts):
    out = {}
    for k in dicts[0]:
        v = dicts[0][k]
        if isinstance(v, list):
            out[k] = [sum(d[k][i] for d in dicts) / len(dicts) for i in range(len(v))]
        else:
            out[k] = sum(d[k] for d in dicts) / len(dicts)
    return out


def job(args):
    hz, form, phase, busy, design, seeds = args
    return args, avg([run(hz, form, phase, busy, design, s) for s in seeds])


def pct(up, pat):
    return "   -  " if up == 0 else "%5.1f%%" % (100.0 * (up - pat) / up)


def summarize(design, r):
    up = r["up"][1] + r["up"][2]
    pat = r["pat"][1] + r["pat"][2]
    saved = up - pat
    W = W_COPY if design.startswith("C") else W_SUMS
    writes = r["w"][1] + r["w"][2]
    chk = r["chk"][1] + r["chk"][2]
    cost = writes * W + chk * K_CHECK
    net = saved * I_READ - cost
    be = (cost / saved) if saved > 0 else float("inf")
    # break-even W: instructions per write at which net = 0 (given I, K)
    bew = ((saved * I_READ - chk * K_CHECK) / writes) if writes > 0 else float("nan")
    return up, pat, saved, writes, chk, net, be, bew


def main():
    nseeds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    seeds = tuple(range(1, nseeds + 1))
    jobs = [(hz, form, phase, busy, d, seeds)
            for hz in (100, 250, 1000) for form in ("v11", "ms")
            for phase in ("random", "aligned") for busy in (100, 90, 50)
            for d in DESIGNS]
    try:
        import multiprocessing as mp
        with mp.Pool() as pool:
            res = dict(pool.map(job, jobs))
    except (OSError, ImportError):
        res = dict(map(job, jobs))

    print("Parameters: W(A/B/D)=%d W(C)=%d K=%d I=%d; seeds=%s (averaged)" %
          (W_SUMS, W_COPY, K_CHECK, I_READ, seeds))
    print("net = saved_reads*I - writes*W - checks*K over the counted window "
          "(3 top-level busy intervals); beI = break-even I (instr/read); beW = break-even W (instr/write) at I,K given\n")
    al_lines = []
    for hz in (100, 250, 1000):
        bI, iI = intervals(hz)
        for form in ("v11", "ms"):
            t = ttls(hz, form)
            for phase in ("random", "aligned"):
                print("=== HZ=%d ttl=%s (L1 %d, L2 %d jiffies) phase=%s | busy int %s idle int %s | window %d jiffies"
                      % (hz, form, t[1], t[2], phase, bI, iI, 3 * bI[2]))
                hdr = ("busy design | L0 bal b/i  | L1 bal b/i | L1 up   pat   sv%   | L2 bal b/i | L2 up  pat  sv%   "
                       "| checks | w_core w_sock | AL up  pat   sv%   | net      beI    beW")
                print(hdr)
                print("-" * len(hdr))
                for busy in (100, 90, 50):
                    for d in DESIGNS:
                        r = res[(hz, form, phase, busy, d, seeds)]
                        up, pat, saved, writes, chk, net, be, bew = summarize(d, r)
                        line = ("%3d%%  %-6s| %5.0f/%-5.0f | %4.0f/%-5.0f | %5.0f %5.0f %s | %4.0f/%-5.0f | %4.0f %4.0f %s "
                                "| %6.0f | %6.0f %6.0f | %5.0f %5.0f %s | %8.0f %s %6s" % (
                                    busy, d, r["bb"][0], r["bi"][0], r["bb"][1], r["bi"][1],
                                    r["up"][1], r["pat"][1], pct(r["up"][1], r["pat"][1]),
                                    r["bb"][2], r["bi"][2], r["up"][2], r["pat"][2],
                                    pct(r["up"][2], r["pat"][2]), chk, r["w"][1], r["w"][2],
                                    up, pat, pct(up, pat), net,
                                    ("%6.1f" % be) if be != float("inf") else "   inf",
                                    ("%6.1f" % bew) if bew == bew else "-"))
                        print(line)
                        al_lines.append((hz, form, phase, busy, d, up, pat, pct(up, pat), net, be))
                    print()
    # sanity checks
    print("=== Sanity checks")
    ok = True
    for k, r in res.items():
        if k[4] == "none":
            if any(r["pat"][L] != r["up"][L] for L in range(3)) or sum(r["w"]) or sum(r["chk"]):
                ok = False
                print("FAIL none-design saves/writes/checks:", k)
        for L in range(3):
            if r["pat"][L] > r["up"][L]:
                ok = False
                print("FAIL pat>up", k, L)
    print("no-cache saves 0, writes 0, checks 0; patched<=upstream everywhere:", "OK" if ok else "FAIL")
    for hz in (100, 250, 1000):
        for form in ("v11", "ms"):
            for busy in (100, 90):
                r = res[(hz, form, "random", busy, "A", seeds)]
                up, pat, *_ = summarize("A", r)
                print("A random HZ=%-4d ttl=%-3s busy=%d%%: L1 sv %s  L2 sv %s  above-lowest sv %s"
                      % (hz, form, busy, pct(r["up"][1], r["pat"][1]), pct(r["up"][2], r["pat"][2]), pct(up, pat)))


if __name__ == "__main__":
    main()
