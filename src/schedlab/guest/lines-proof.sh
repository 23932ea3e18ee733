#!/bin/bash
# The lines probe's proof in the guest (measuring/lineproof.py): each line of
# PROOFS ("MODE ROUNDS CPU... [HOME]" or "idle N A B TASK"), after one mark of
# its own, so that the plugin's records of proof K carry epoch K.
set -u
PROOF=$1
PROOFS=$2
# The idle_cpu() checks write to debugfs (sched/lab_idle_cpu).
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
while read -r mode args; do
	"$PROOF" mark
	# shellcheck disable=SC2086  # the rounds, the CPUs and HOME, one argument each
	timeout 600 "$PROOF" "$mode" $args || echo "cohproof $mode failed: $?"
done < "$PROOFS"
