# B4: the busy path probes each CPU twice (a busy CPU asked again).
import sys; p=sys.argv[1]; s=open(p).read()
old="""		if (!idle_cpu(cpu)) {
			/* dst_cpu is busy after all, whatever env->idle said. */"""
new="""		if (!idle_cpu(cpu) && !idle_cpu(cpu)) {
			/* dst_cpu is busy after all, whatever env->idle said. */"""
assert s.count(old)==1; s=s.replace(old,new); open(p,'w').write(s)
