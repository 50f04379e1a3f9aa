#!/bin/bash
# cpu.sh PID HOST PORT: µs of the PID's CPU per request over an 8 s wrk run (after 2 s warm-up)
PID=$1; HOST=$2; PORT=$3
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
taskset -c 1 wrk -t1 -c64 -d2 -H "Host: $HOST" http://127.0.0.1:$PORT/bytes/2 >/dev/null
a=$(cpu); out=$(taskset -c 1 wrk -t1 -c64 -d8 -H "Host: $HOST" http://127.0.0.1:$PORT/bytes/2); b=$(cpu)
req=$(echo "$out" | awk '/requests in/ {print $1}')
tck=$(getconf CLK_TCK)
python3 -c "print(f'{($b-$a)/$tck*1e6/$req:.1f} us/req, {$req/8:.0f} req/s')"
