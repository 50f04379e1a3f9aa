#!/bin/bash
# uptls-ab.sh ROUNDS DRIVER BIN_A BIN_B: interleaved rounds, plain clients (wrk -t1 -c64, 8 s after
# 2 s warm-up) through the gateway to an nginx origin over TLS 1.3; prints per round the
# gateway's CPU per request and its CPU over the origin's. The order of the builds flips each round.
rounds=$1 driver=$2; shift 2
sed "s/DRIVER/$driver/" /tmp/hs/uptls.toml > /tmp/hs/uptls-run.toml
taskset -c 1 nginx -c /tmp/hs/origin-tls.conf
sleep 0.5
opid=$(pgrep -f "nginx: worker process" | while read p; do grep -q 19444 /proc/$p/cmdline 2>/dev/null; echo $p; done | tail -1)
opid=$(ps -eo pid,ppid,cmd | awk -v m=$(cat /tmp/hs/nginx-tls.pid) '$2==m {print $1}')
bins=("$@")
for r in $(seq $rounds); do
  # ABBA: the order flips every round, so that what favours the first or second run cancels.
  order=("${bins[@]}")
  ((r % 2 == 0)) && order=("${bins[1]}" "${bins[0]}")
  for bin in "${order[@]}"; do
    taskset -c 0 $bin run --allow-root --config /tmp/hs/uptls-run.toml > /tmp/hs/uptls-gw.log 2>&1 &
    gpid=$!
    sleep 0.7
    taskset -c 1 wrk -t1 -c64 -d2s http://127.0.0.1:19081/ > /dev/null
    g0=$(awk '{print $14+$15}' /proc/$gpid/stat); o0=$(awk '{print $14+$15}' /proc/$opid/stat)
    out=$(taskset -c 1 wrk -t1 -c64 -d8s http://127.0.0.1:19081/)
    g1=$(awk '{print $14+$15}' /proc/$gpid/stat); o1=$(awk '{print $14+$15}' /proc/$opid/stat)
    kill $gpid; wait $gpid 2>/dev/null
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
    awk -v r=$r -v b=$bin -v g=$((g1-g0)) -v o=$((o1-o0)) -v rps=$rps -v bad="${non2xx:-0}" 'BEGIN { printf "round %d %s: %.0f req/s, %.2f us CPU/req, gateway/origin CPU %.3f, non-2xx %s\n", r, b, rps, g*10000/(rps*8), g/o, bad }'
  done
done
nginx -s stop -c /tmp/hs/origin-tls.conf
