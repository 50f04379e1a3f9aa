#!/bin/bash
# perf.sh BIN LABEL: perf record the gateway for 6 s of 4 parallel s_time -new -www /
bin=$1 label=$2
nginx -c /tmp/hs/origin.conf
taskset -c 0 $bin run --allow-root --config /tmp/hs/gw.toml > /tmp/hs/gw-$label.log 2>&1 &
gpid=$!
sleep 1
for i in 1 2 3 4; do taskset -c 1 openssl s_time -connect 127.0.0.1:19443 -new -tls1_3 -www / -time 9 > /tmp/hs/st-$label-$i.log 2>&1 & done
sleep 2
t0=$(awk '{print $14+$15}' /proc/$gpid/stat)
perf record -q -e cpu-clock -F 2000 -g -p $gpid -o /tmp/hs/perf-$label.data -- sleep 6 2>/dev/null
t1=$(awk '{print $14+$15}' /proc/$gpid/stat)
wait %2 %3 %4 %5 2>/dev/null
sleep 1
kill $gpid; wait $gpid 2>/dev/null
nginx -s stop -c /tmp/hs/origin.conf
n=$(grep -h "connections in .* real" /tmp/hs/st-$label-*.log | awk '{s+=$1} END {print s}')
echo "$label: ticks $((t1-t0)) over 6 s; connections (all 9 s) $n"
