# W4: cpu_load() for cpu_load_without(): the wakee's own blocked load counts where it last ran.
import sys; p=sys.argv[1]; s=open(p).read()
for old, new in (("target_load = cpu_load_without(cpu_rq(target), p);", "target_load = cpu_load(cpu_rq(target));"),
                 ("cpu_load_without(cpu_rq(cpu), p) <= target_load", "cpu_load(cpu_rq(cpu)) <= target_load")):
    assert s.count(old)==1; s=s.replace(old,new)
open(p,'w').write(s)
