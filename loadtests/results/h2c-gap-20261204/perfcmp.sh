#!/bin/bash
# perfcmp.sh NAME: like h2c.sh but perf records CPU 0 for 6 s during the load; prints req count
name=$1
case $name in
  gw) taskset -c 0 ./${GW:-gw-base} --config gw.toml run --allow-root >/tmp/prof/gw.log 2>&1 & pid=$!; port=18082 ;;
  haproxy) taskset -c 0 haproxy -f haproxy.cfg >/tmp/prof/hap.log 2>&1 & pid=$!; port=18092 ;;
esac
sleep 1
taskset -c 1 h2load -t1 -c16 -m32 -D 3 http://127.0.0.1:$port/ >/dev/null 2>&1
(taskset -c 1 h2load -t1 -c16 -m32 -D 8 http://127.0.0.1:$port/ > /tmp/prof/h2l-$name.txt 2>&1 &)
sleep 1
perf record -q ${PG:-} -F 4999 -C 0 -o /tmp/prof/pc-$name.data -- sleep ${PS:-6} >/dev/null 2>&1
sleep 2
awk '/^requests:/ {print "req/s", $8/8}' /tmp/prof/h2l-$name.txt
kill $pid; wait $pid 2>/dev/null
