# W2: strictly less load than the target (a CPU with the same load is passed over).
import sys; p=sys.argv[1]; s=open(p).read()
old="cpu_load_without(cpu_rq(cpu), p) <= target_load"
assert s.count(old)==1; s=s.replace(old,"cpu_load_without(cpu_rq(cpu), p) < target_load"); open(p,'w').write(s)
