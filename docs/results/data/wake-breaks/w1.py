# W1: drop the load test (the wakee may go to a CPU with more load than the target).
import sys; p=sys.argv[1]; s=open(p).read()
old="			if (cpu_load_without(cpu_rq(cpu), p) <= target_load)\n				return cpu;"
assert s.count(old)==1; s=s.replace(old,"			return cpu;"); open(p,'w').write(s)
