#!/bin/bash
# run.sh nginx|haproxy N: h2load h2c across one reload
P=$1; L=$2
pgrep -f "origin --listen 127.0.0.1:19000" >/dev/null || (setsid /work/main/target/release/origin --listen 127.0.0.1:19000 >/dev/null 2>&1 &)
if [[ $P == nginx ]]; then
  nginx -c /tmp/ga/peers/nginx.conf; PORT=19083; sleep 0.5
  h2load -c8 -m16 -D 10 http://127.0.0.1:$PORT/bytes/512 > h2load-$P-$L.txt 2>&1 & H=$!
  sleep 4; nginx -c /tmp/ga/peers/nginx.conf -s reload
  wait $H; nginx -c /tmp/ga/peers/nginx.conf -s quit; sleep 1
else
  haproxy -W -f /tmp/ga/peers/haproxy.cfg -D; PORT=19084; sleep 0.5
  h2load -c8 -m16 -D 10 http://127.0.0.1:$PORT/bytes/512 > h2load-$P-$L.txt 2>&1 & H=$!
  sleep 4; kill -USR2 $(cat /tmp/ga/peers/haproxy.pid)
  wait $H; kill -TERM $(cat /tmp/ga/peers/haproxy.pid); sleep 1
fi
echo "$P $L: $(grep -E '^requests:' h2load-$P-$L.txt) | $(grep -E '^status codes' h2load-$P-$L.txt)"
