#!/bin/bash
# The ad-hoc A/B of latency-ring-flags-20261202.md, kept as it ran: several gateway instances
# (NAME=BINARY:DRIVER:ENV, ENV e.g. GW_URING_FLAGS=coop for the temporary override build) on
# CPU 0, measured in turn with `wrk -t1 -c1 -d8s --latency` on CPU 1, ROUNDS times; CPU per
# request from /proc/PID/stat. It takes its config from a kept h1-small.sh latency work
# directory (KEEP_WORK=1) whose nginx origin is running.
# usage: c1ab.sh ROUNDS NAME=BIN:DRIVER:ENV ...
R=$1; shift
declare -A PORT PID
i=0
for spec in "$@"; do
  name=${spec%%=*}; rest=${spec#*=}; bin=${rest%%:*}; rest=${rest#*:}; drv=${rest%%:*}; envv=${rest#*:}
  port=$((24000+i)); i=$((i+1))
  sed "s/io_uring/$drv/;s/23724/$port/" /tmp/latency.sSDcTl/gateway-uring/gateway.toml > /tmp/c1-$name.toml
  (setsid env $envv taskset -c 0 $bin run --config /tmp/c1-$name.toml --allow-root > /tmp/c1-$name.log 2>&1 &)
  PORT[$name]=$port
done
sleep 1.5
for spec in "$@"; do name=${spec%%=*}; PID[$name]=$(pgrep -f "c1-$name.toml"); curl -s http://127.0.0.1:${PORT[$name]}/ >/dev/null || echo "$name not up"; grep -m1 "driver" /tmp/c1-$name.log | head -c 300; echo; done
for ((r=1;r<=R;r++)); do
  for spec in "$@"; do name=${spec%%=*}; p=${PID[$name]}
    taskset -c 1 wrk -t1 -c1 -d1s http://127.0.0.1:${PORT[$name]}/ >/dev/null
    c0=$(awk '{print $14+$15}' /proc/$p/stat)
    taskset -c 1 wrk -t1 -c1 -d8s --latency http://127.0.0.1:${PORT[$name]}/ > /tmp/c1-w.txt
    c1=$(awk '{print $14+$15}' /proc/$p/stat)
    reqs=$(grep -E "requests in" /tmp/c1-w.txt | awk '{print $1}')
    p50=$(grep -E "^ +50%" /tmp/c1-w.txt | awk '{print $2}'); p99=$(grep -E "^ +99%" /tmp/c1-w.txt | awk '{print $2}')
    echo "round $r $name reqs=$reqs cpu_us_per_req=$(echo "($c1-$c0)*10000/$reqs" | bc -l | cut -c1-5) p50=$p50 p99=$p99"
  done
done
for spec in "$@"; do name=${spec%%=*}; kill ${PID[$name]}; done
