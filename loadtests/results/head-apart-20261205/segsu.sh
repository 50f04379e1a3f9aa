#!/bin/bash
# The proxy's upstream-side segments per request (sockets to the origin on 18080), over 3 s of a wrk run (head-apart-20261205.md).
url=$1
taskset -c 1 wrk -t1 -c64 -d5s $url >/dev/null 2>&1 &
sleep 0.5
sum() { ss -tinH state established "$1" | grep -oP "$2:\K\d+" | awk '{s+=$1} END {print s+0}'; }
a1=$(sum "( dport = :18080 )" 'data_segs_in'); b1=$(sum "( dport = :18080 )" ' segs_in'); c1=$(sum "( dport = :18080 )" 'data_segs_out'); d1=$(sum "( dport = :18080 )" ' segs_out')
sleep 3
a2=$(sum "( dport = :18080 )" 'data_segs_in'); b2=$(sum "( dport = :18080 )" ' segs_in'); c2=$(sum "( dport = :18080 )" 'data_segs_out'); d2=$(sum "( dport = :18080 )" ' segs_out')
wait
r=$((c2-c1)); echo "upstream side, per request: in data $(echo "scale=3; ($a2-$a1)/$r" | bc), in all $(echo "scale=3; ($b2-$b1)/$r" | bc), out all $(echo "scale=3; ($d2-$d1)/$r" | bc)"
