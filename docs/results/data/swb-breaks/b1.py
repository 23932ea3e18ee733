# B1: trust env->idle for a busy dst (no idle_cpu(dst) check): a stale
# __CPU_NOT_IDLE sends an idle dst down the busy path.
import sys; p=sys.argv[1]; s=open(p).read()
old="	if (env->idle != CPU_IDLE && !idle_cpu(env->dst_cpu))\n		goto busy;"
assert s.count(old)==1; s=s.replace(old,"	if (env->idle == __CPU_NOT_IDLE)\n		goto busy;"); open(p,'w').write(s)
