# W3: the load compared with the waking CPU's, not the target's.
import sys; p=sys.argv[1]; s=open(p).read()
old="target_load = cpu_load_without(cpu_rq(target), p);"
assert s.count(old)==1; s=s.replace(old,"target_load = cpu_load_without(cpu_rq(smp_processor_id()), p);"); open(p,'w').write(s)
