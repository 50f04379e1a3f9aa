#!/bin/bash
# Syscalls per request of one gateway build under the https scenario's load (strace -c, 5 s).
# usage: strace-https.sh BINARY LABEL
bin=$1 label=$2
cd /work/main
rm -f /tmp/strace-$label.txt
(SCENARIO=https SKIP_BUILD=1 PROXIES='gateway-baseline' BASELINE_GATEWAY_BIN=$bin ROUNDS=1 DURATION=14 RESULT_NAME=strace-tmp-$label RESULTS_DIR=/tmp loadtests/bench/h1-small.sh > /tmp/strace-run-$label.log 2>&1 &)
# wait for the measured run: the gateway is up and wrk is running
for i in $(seq 60); do
  pid=$(pgrep -f "^$bin " | head -1)
  if [[ -n $pid ]] && pgrep -x wrk >/dev/null; then break; fi
  sleep 0.5
done
sleep 4   # past warm-up into the measured run
timeout 6 strace -c -f -p "$pid" -o /tmp/strace-$label.txt &
sleep 7
wait
cat /tmp/strace-$label.txt | head -20
