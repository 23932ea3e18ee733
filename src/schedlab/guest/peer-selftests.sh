#!/bin/bash
# The kernel's own selftests for the peer tests (peer_tests.py): each
# program runs from its own folder with a time limit; its output goes to
# OUT/NAME.txt and its exit status to OUT/NAME.status (124: timed out).
# A program that fails (neither 0 nor KSFT_SKIP) runs again, at most
# RETRIES more times on the same boot: the cgroup tests compare CPU times
# with wall time, which single-thread TCG does not always honour. Attempt
# K (from 1) goes to OUT/NAME.retryK.{txt,status}.
# Usage: peer-selftests.sh OUT PROGRAM...
set -u
out=${1:?usage: peer-selftests.sh OUT PROGRAM...}
shift
limit=900
retries=${RETRIES:-2}
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
attempt() {	# attempt PROG FILE-PREFIX: run PROG once; its status in $rc
	(cd "$(dirname "$1")" && timeout -k 10 "$limit" "./$(basename "$1")") > "$2.txt" 2>&1
	rc=$?
	echo $rc > "$2.status"
}
for prog in "$@"; do
	name=$(basename "$(dirname "$prog")")/$(basename "$prog")
	name=${name//\//.}
	attempt "$prog" "$out/$name"
	k=0
	while [ "$rc" != 0 ] && [ "$rc" != 4 ] && [ "$k" -lt "$retries" ]; do
		k=$(( k + 1 ))
		attempt "$prog" "$out/$name.retry$k"
	done
done
dmesg > "$out/dmesg.txt"
echo 0 > "$out/status.txt"
