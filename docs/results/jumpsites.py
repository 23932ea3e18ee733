"""Jump sites per sched_feat key and out-of-line functions of two fair.o files."""
import collections, re, subprocess, sys

def text_syms(o):
    out = subprocess.run(["nm", "-n", "--defined-only", o], capture_output=True, text=True).stdout
    return [(int(a, 16), n) for a, t, n in (l.split() for l in out.splitlines() if len(l.split()) == 3)
            if t in "tT"]

def sites(o):
    rel = subprocess.run(["objdump", "-r", "-j", "__jump_table", o], capture_output=True, text=True).stdout
    by = collections.defaultdict(dict)
    for line in rel.splitlines():
        f = line.split()
        if len(f) == 3 and re.fullmatch(r"[0-9a-f]{16}", f[0]):
            off = int(f[0], 16)
            by[off // 16][off % 16] = f[2]
    syms = text_syms(o)
    def fn(addr):
        best = None
        for a, n in syms:
            if a > addr:
                break
            best = n
        return best
    out = collections.defaultdict(list)
    for e in by.values():
        code, key = e.get(0, ""), e.get(8, "")
        if key.startswith("sched_feat_keys") and "+0x" in code:
            out[int(key.split("+0x")[1], 16) // 16].append(fn(int(code.split("+0x")[1], 16)))
    return out

base, tip, index = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(f"jump sites keyed on sched_feat_keys[{index}]:")
for name, o in (("base", base), ("tip", tip)):
    print(f"  {name}: {sorted(sites(o).get(index, [])) or 'none'}")
b = {n for _, n in text_syms(base)}
t = {n for _, n in text_syms(tip)}
print("functions in tip's fair.o, not in base's:", sorted(t - b))
print("functions in base's fair.o, not in tip's:", sorted(b - t))
