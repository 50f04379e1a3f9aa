#!/bin/bash
# Per-socket segment counters of the proxy's client-side sockets during a wrk -t1 -c64 run (head-apart-20261205.md).
# segs.sh URL PROXYPORT: during a wrk run, per-socket segment counters of the proxy's sockets
url=$1; pp=$2
taskset -c 1 wrk -t1 -c64 -d5s $url >/dev/null 2>&1 &
sleep 4
sum() { ss -tinH state established "$1" | grep -oP "$2:\K\d+" | awk '{s+=$1} END {print s+0}'; }
cs_out=$(sum "( sport = :$pp )" 'data_segs_out'); cs_all=$(sum "( sport = :$pp )" ' segs_out'); cs_in=$(sum "( sport = :$pp )" 'data_segs_in'); cs_ain=$(sum "( sport = :$pp )" ' segs_in')
wait
echo "client side of the proxy: in data $cs_in, in all $cs_ain, out data $cs_out, out all $cs_all; per request in: $(echo "scale=3; $cs_ain/$cs_in" | bc), out data $(echo "scale=3; $cs_out/$cs_in" | bc), out all $(echo "scale=3; $cs_all/$cs_in" | bc)"
