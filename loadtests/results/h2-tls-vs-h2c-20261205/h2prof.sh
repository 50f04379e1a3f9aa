#!/bin/bash
# h2prof.sh DRIVER: gateway on CPU 0; for h2c then h2 over TLS, h2load -t1 -c16 -m32 on CPU 1:
# an 8 s run measured (utime/stime per request), then a 6 s run under perf record (5 s of it).
DRV=${1:-io_uring}
sed "s/io_driver = .*/io_driver = \"$DRV\"/" /tmp/prof/gw-h2.toml > /tmp/prof/gw-h2-run.toml
taskset -c 0 /tmp/prof/gw-head --config /tmp/prof/gw-h2-run.toml run --allow-root > /tmp/prof/gw-h2.log 2>&1 &
GW=$!; sleep 1
tick=$(getconf CLK_TCK)
for t in h2c h2 h2c h2; do
  url=http://127.0.0.1:18082/; [[ $t == h2 ]] && url=https://127.0.0.1:18083/
  taskset -c 1 h2load -t1 -c16 -m32 -D 2 $url > /dev/null 2>&1
  read -r u0 s0 < <(awk '{print $14, $15}' /proc/$GW/stat)
  taskset -c 1 h2load -t1 -c16 -m32 -D 8 $url > /tmp/prof/h2load-$t.txt 2>&1
  read -r u1 s1 < <(awk '{print $14, $15}' /proc/$GW/stat)
  n=$(grep -oP 'requests: \d+ total, \d+ started, \K\d+(?= done)' /tmp/prof/h2load-$t.txt)
  proto=$(grep -oP 'Application protocol: \K\S+' /tmp/prof/h2load-$t.txt)
  echo "$DRV $t ($proto): $n requests, user $(echo "scale=2; ($u1-$u0)*1000000/$tick/$n" | bc) µs, sys $(echo "scale=2; ($s1-$s0)*1000000/$tick/$n" | bc) µs per request"
done
for t in h2c h2; do
  url=http://127.0.0.1:18082/; [[ $t == h2 ]] && url=https://127.0.0.1:18083/
  taskset -c 1 h2load -t1 -c16 -m32 -D 7 $url > /tmp/prof/h2load-perf-$t.txt 2>&1 &
  H=$!
  sleep 1.5; perf record -q -F 2999 -g -p $GW -o /tmp/prof/perf-$DRV-$t.data -- sleep 5 >/dev/null 2>&1
  wait $H
  n=$(grep -oP 'requests: \d+ total, \d+ started, \K\d+(?= done)' /tmp/prof/h2load-perf-$t.txt)
  echo "perf $DRV $t: $n requests in 7 s"
done
kill $GW; wait 2>/dev/null
