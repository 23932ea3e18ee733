# B2: the busy group balance CPU scans on after the first idle CPU.
import sys; p=sys.argv[1]; s=open(p).read()
old="""	for_each_cpu_and(cpu, group_balance_mask(sg), env->cpus) {
		if (cpu != env->dst_cpu && idle_cpu(cpu))
			return 0;
	}

	return 1;"""
new="""	idle_smt = 0;
	for_each_cpu_and(cpu, group_balance_mask(sg), env->cpus) {
		if (cpu != env->dst_cpu && idle_cpu(cpu))
			idle_smt = 1;
	}

	return !idle_smt;"""
assert s.count(old)==1; s=s.replace(old,new); open(p,'w').write(s)
