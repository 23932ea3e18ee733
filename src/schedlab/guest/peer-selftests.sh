#!/bin/bash
# The kernel's own selftests for the peer tests (peer_tests.py): each
# program runs from its own folder with a time limit; its output goes to
# OUT/NAME.txt and its exit status to OUT/NAME.status (124: timed out).
# Usage: peer-selftests.sh OUT PROGRAM...
set -u
out=${1:?usage: peer-selftests.sh OUT PROGRAM...}
shift
limit=900
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
for prog in "$@"; do
	name=$(basename "$(dirname "$prog")")/$(basename "$prog")
	name=${name//\//.}
	(cd "$(dirname "$prog")" && timeout -k 10 "$limit" "./$(basename "$prog")") \
		> "$out/$name.txt" 2>&1
	echo $? > "$out/$name.status"
done
dmesg > "$out/dmesg.txt"
echo 0 > "$out/status.txt"
