#!/bin/bash
# perfh1.sh BIN CONNS: wrk -cCONNS HTTP/1.1 through the gateway (plain listener), perf on CPU 0 for 6 s
bin=$1; c=${2:-64}
taskset -c 0 ./$bin --config gw.toml run --allow-root >/tmp/prof/gw.log 2>&1 & pid=$!
sleep 1
taskset -c 1 wrk -t1 -c$c -d2 http://127.0.0.1:18081/ >/dev/null 2>&1
(taskset -c 1 wrk -t1 -c$c -d8 http://127.0.0.1:18081/ > /tmp/prof/wrk-h1.txt 2>&1 &)
sleep 1
perf record -q -F 4999 -C 0 -o /tmp/prof/pc-h1.data -- sleep 6 >/dev/null 2>&1
sleep 2
rps=$(awk '/Requests\/sec/ {print $2}' /tmp/prof/wrk-h1.txt)
upc=$(ss -tn state established "( dport = :18080 )" | tail -n +2 | wc -l)
echo "$bin c=$c rps=$rps upconns=$upc"
perf report -i /tmp/prof/pc-h1.data --no-children --sort sym -n -q 2>/dev/null | awk -v rps=$rps '{s=$2; $1=$2=""; sub(/^ +/,""); us=s/4999/(rps*6)*1e6; print us"\t"$0}' > /tmp/prof/kh1-$bin-$c.tsv
kill $pid; wait $pid 2>/dev/null
