#!/bin/bash
# perf-uring-vs-epoll.sh (run from /tmp/prof with gw.toml, gw-epoll.toml and an nginx origin on :18080, as h2c-gap-20261204/perfcmp.sh): perf h2c profile of the gateway on io_uring and on epoll (same binary), per-request µs by symbol
cd /tmp/prof
for v in uring epoll; do
  cfg=gw.toml; [ $v = epoll ] && cfg=gw-epoll.toml
  taskset -c 0 $GWBIN --config $cfg run --allow-root >/tmp/prof/gw-$v.log 2>&1 & pid=$!
  sleep 1
  taskset -c 1 h2load -t1 -c16 -m32 -D 3 http://127.0.0.1:18082/ >/dev/null 2>&1
  (taskset -c 1 h2load -t1 -c16 -m32 -D 8 http://127.0.0.1:18082/ > /tmp/prof/h2l-$v.txt 2>&1 &)
  sleep 1
  perf record -q -F 4999 -C 0 -o /tmp/prof/pc2-$v.data -- sleep 6 >/dev/null 2>&1
  sleep 2
  kill $pid; wait $pid 2>/dev/null
  reqs=$(awk '/^requests:/ {print $8/8}' /tmp/prof/h2l-$v.txt)
  echo "$v req/s $reqs"
  perf report -i /tmp/prof/pc2-$v.data --sort sym -F overhead,sample,sym --stdio --no-children 2>/dev/null | grep -v "^#" | awk -v r=$reqs 'NF>=3 {s=$2; $1="";$2=""; printf "%.3f\t%s\n", s/4999/(r*6)*1e6, $0}' > /tmp/prof/sym-$v.tsv
  awk '{t+=$1} END {print "total us/req", t}' /tmp/prof/sym-$v.tsv
done
