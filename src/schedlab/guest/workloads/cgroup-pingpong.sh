#!/bin/bash
# Nested-cgroup ping-pong (cgroup v2) for the task-group-idle study: a
# two-task pipe ping-pong in a group at depth 1 or 2 while two sibling groups
# at the same depth keep CPUs busy.  Usage: cgroup-pingpong.sh DEPTH
# (NCPU and SECS from the plan runner).  The runner removes the groups.
set -u
depth=${1:?usage: cgroup-pingpong.sh DEPTH (1 or 2)}
cgr=/sys/fs/cgroup
mountpoint -q "$cgr" || mount -t cgroup2 none "$cgr"
echo +cpu > "$cgr/cgroup.subtree_control"
parent=$cgr/schedlab
[ "$depth" = 2 ] && parent=$cgr/schedlab/top
mkdir -p "$parent"
[ "$depth" = 2 ] && echo +cpu > "$cgr/schedlab/cgroup.subtree_control"
echo +cpu > "$parent/cgroup.subtree_control"
mkdir -p "$parent/pp" "$parent/busy1" "$parent/busy2"
busy=()
for b in busy1 busy2; do
	(echo "$BASHPID" > "$parent/$b/cgroup.procs"
	 exec stress-ng --cpu $(( NCPU > 3 ? NCPU / 4 : 1 )) --timeout $(( SECS * 10 ))s \
		>/dev/null 2>&1) &
	busy+=("$!")
done
sleep 1
(echo "$BASHPID" > "$parent/pp/cgroup.procs"; exec perf bench sched pipe -l 2000)
rc=$?
kill -TERM "${busy[@]}"
wait
exit $rc
