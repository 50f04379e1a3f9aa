#!/bin/bash
# h2c.sh NAME: proxy NAME (gw|gwe|haproxy) on CPU 0; h2load h2c load from CPU 1.
name=$1; dur=${DUR:-8}
case $name in
  gw) taskset -c 0 ./${GW:-gw-head} --config gw.toml run --allow-root >/tmp/prof/gw.log 2>&1 & pid=$!; port=18082 ;;
  gwe) taskset -c 0 ./${GW:-gw-head} --config gw-epoll.toml run --allow-root >/tmp/prof/gw.log 2>&1 & pid=$!; port=18082 ;;
  haproxy) taskset -c 0 haproxy -f haproxy.cfg >/tmp/prof/hap.log 2>&1 & pid=$!; port=18092 ;;
esac
sleep 1
taskset -c 1 h2load -t1 -c16 -m32 -D 3 http://127.0.0.1:$port/ >/dev/null 2>&1
op=$(pgrep -f "nginx: worker" | head -1)
t0=$(awk '{print $14+$15, $15}' /proc/$pid/stat)
o0=$(awk '{print $14+$15}' /proc/$op/stat)
nstat -n >/dev/null
out=$(taskset -c 1 h2load -t1 -c16 -m32 -D $dur http://127.0.0.1:$port/ 2>&1)
ns=$(nstat 2>/dev/null)
t1=$(awk '{print $14+$15, $15}' /proc/$pid/stat)
o1=$(awk '{print $14+$15}' /proc/$op/stat)
ups=$(ss -tn state established "( dport = :18080 )" | tail -n +2 | wc -l)
req=$(echo "$out" | awk '/^requests:/ {print $8}')
tck=$(getconf CLK_TCK)
set -- $t0 $t1
echo "$ns" | awk -v n=$name -v req=$req -v a=$1 -v ak=$2 -v b=$3 -v bk=$4 -v tck=$tck -v ups=$ups -v dur=$dur -v oc=$((o1-o0)) '
 /TcpInSegs/ {i=$2} /TcpOutSegs/ {o=$2} /TcpExtDelayedACKs / {d=$2} /TcpExtTCPPureAcks/ {pa=$2}
 END { printf "%s req/s=%d cpu_us=%.2f kern_us=%.2f segs_in/req=%.2f out/req=%.2f delacks/req=%.3f upconns=%d ratio=%.3f\n", n, req/dur, (b-a)/tck*1e6/req, (bk-ak)/tck*1e6/req, i/req, o/req, d/req, ups, (b-a)/oc }'
kill $pid; wait $pid 2>/dev/null
