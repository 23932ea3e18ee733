#!/bin/bash
set -u
o=/work/kb/kitproof
Q='-accel tcg,thread=single'
./run.sh 250 'sched_fair_lb.swb_states_answer_alike' --raw_output=all --qemu_args="$Q" > $o/alike-st.log 2>&1; echo "alike rc=$? $(date +%T)"
for k in 0 4 1 2 3; do
  ./run.sh 250 'sched_fair_lb.swb_probe_counts_per_pass' --raw_output=all --qemu_args="$Q" --kernel_args sched_swb_state=$k > $o/state-$k.log 2>&1
  echo "state $k rc=$? $(date +%T)"
done
# the kernels built at the topic's first three patches (kunit.py in /work/wt-split at each commit)
for c in 202e060de 0b79cbceb fa08bc9ed; do
  git -C /work/wt-split checkout -q --detach $c
  ./run.sh 250 'sched_fair_lb.swb_probe_counts_per_pass' --raw_output=all --qemu_args='-accel tcg,thread=single'
done
