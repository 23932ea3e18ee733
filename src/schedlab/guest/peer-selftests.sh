#!/bin/bash
# The kernel's own selftests for the peer tests (peer_tests.py): each
# program runs from its own folder with a time limit; its output goes to
# OUT/NAME.txt and its exit status to OUT/NAME.status (124: timed out).
# A program that fails (neither 0 nor KSFT_SKIP) runs again, at most
# RETRIES (6 here; peer_tests.py passes 3) more times on the same boot, as
# long as one of its tests has failed in every attempt so far: the cgroup
# tests compare CPU times with wall time, which single-thread TCG does not
# always honour (one test_cpu run takes about a minute). A program still
# failing after that gets a second boot from peer_tests.py, in its own
# folder. Attempt K (from 1) goes to
# OUT/NAME.retryK.{txt,status}. When OUT/known-failures lists tests (NAME
# or NAME.CASE, one a line: what did not pass on base), those are not
# retried: only a new failure could be an error.
# Usage: peer-selftests.sh OUT PROGRAM...
set -u
out=${1:?usage: peer-selftests.sh OUT PROGRAM...}
shift
limit=900
retries=${RETRIES:-6}
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
attempt() {	# attempt PROG FILE-PREFIX: run PROG once; its status in $rc
	(cd "$(dirname "$1")" && timeout -k 10 "$limit" "./$(basename "$1")") > "$2.txt" 2>&1
	rc=$?
	echo $rc > "$2.status"
}
touch "$out/known-failures"
cases() {	# cases NAME FILE "ok"|"not ok": NAME.CASE of each such TAP line
	sed -n "s/^$3 [0-9]* \(- \)\{0,1\}\([^#]*[^# ]\).*/$1.\2/p" "$2"
}
new_failure() {	# new_failure NAME FILE: a test of NAME failed in FILE, is not
	local failed	# known, and passed in no earlier attempt
	failed=$(cases "$1" "$2" "not ok")
	[ -n "$failed" ] || failed=$1
	cases "$1" "$2" ok >> "$out/$1.passed"
	grep -qvxF -f <(cat "$out/known-failures" "$out/$1.passed") <<< "$failed"
}
for prog in "$@"; do
	name=$(basename "$(dirname "$prog")")/$(basename "$prog")
	name=${name//\//.}
	attempt "$prog" "$out/$name"
	k=0
	last=$out/$name.txt
	while [ "$rc" != 0 ] && [ "$rc" != 4 ] && [ "$k" -lt "$retries" ] &&
		new_failure "$name" "$last"; do
		k=$(( k + 1 ))
		attempt "$prog" "$out/$name.retry$k"
		last=$out/$name.retry$k.txt
	done
done
dmesg > "$out/dmesg.txt"
echo 0 > "$out/status.txt"
