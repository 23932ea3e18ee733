#!/bin/bash
# tbench over loopback: CLIENTS clients (the first argument; default one per
# online CPU). NCPU, SECS from the plan runner.
set -u
tbench_srv >/dev/null 2>&1 &
srv=$!
sleep 2
tbench -t "$SECS" "${1:-$NCPU}" 127.0.0.1
rc=$?
kill "$srv"
exit $rc
