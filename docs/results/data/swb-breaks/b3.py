# B3: no sibling shortcut: is_core_idle() for every idle CPU above SMT
# (asks again about siblings the scan passed).
import sys; p=sys.argv[1]; s=open(p).read()
old="""			   (cpumask_first_and_and(cpu_smt_mask(cpu), balance,
						  env->cpus) < cpu ||
			    !is_core_idle(cpu))) {"""
new="""			   !is_core_idle(cpu)) {"""
assert s.count(old)==1; s=s.replace(old,new); open(p,'w').write(s)
