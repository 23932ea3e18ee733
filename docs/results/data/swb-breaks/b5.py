# B5: look for an idle core in a group that is one SMT core again (drop the
# sg->flags test of "Skip the idle-core check in a group of one core").
import sys; p=sys.argv[1]; s=open(p).read()
old="	check_core = sched_smt_active() && !(env->sd->flags & SD_SHARE_CPUCAPACITY) &&\n		     !(sg->flags & SD_SHARE_CPUCAPACITY);"
assert s.count(old)==1; s=s.replace(old,"	check_core = sched_smt_active() && !(env->sd->flags & SD_SHARE_CPUCAPACITY);"); open(p,'w').write(s)
