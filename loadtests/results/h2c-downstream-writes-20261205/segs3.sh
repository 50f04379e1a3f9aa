#!/bin/bash
# segs3.sh PORT PID [URL scheme]: h2load -c16 -m32 7 s; per-socket counters and proxy CPU diffed between t=2 and t=6
pp=$1; pid=$2; sch=${3:-http}
taskset -c 1 h2load -t1 -c16 -m32 -D 7 $sch://127.0.0.1:$pp/ > /tmp/seg/h2load.txt 2>&1 &
snap() { ss -tinH state established "( sport = :$pp )" | grep -oP "$1:\K\d+" | awk '{s+=$1} END {print s+0}'; }
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
sleep 2
a1=$(snap ' segs_out'); c1=$(cpu); o1=$(awk '{print $14+$15}' /proc/$(pgrep -f 'nginx: worker' | head -1)/stat)
sleep 4
a2=$(snap ' segs_out'); c2=$(cpu); o2=$(awk '{print $14+$15}' /proc/$(pgrep -f 'nginx: worker' | head -1)/stat)
wait
n=$(grep -oP 'requests: \d+ total, \d+ started, \K\d+(?= done)' /tmp/seg/h2load.txt)
r=$(echo "scale=6; $n*4/7" | bc)
echo "port $pp: client out segs/req $(echo "scale=3; ($a2-$a1)/$r" | bc); cpu us/req $(echo "scale=2; ($c2-$c1)*10000/$r" | bc); proxy/origin $(echo "scale=3; ($c2-$c1)/($o2-$o1)" | bc)"
