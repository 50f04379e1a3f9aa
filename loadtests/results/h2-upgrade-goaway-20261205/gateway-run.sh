#!/bin/bash
# run.sh BIN LABEL: h2load h2c across one SIGUSR2 upgrade; prints h2load's totals.
BIN=$1; LABEL=$2; W=/tmp/ga/w-$LABEL; rm -rf $W; mkdir -p $W
cat > $W/gw.toml <<C
[server]
workers = 2
admin = { address = "127.0.0.1:19901" }
log_level = "${LOGLEVEL:-warn}"
upgrade_socket = "$W/upgrade.sock"
drain_timeout = "10s"
[[listeners]]
name = "h2c"
address = "127.0.0.1:19082"
protocols = ["h2"]
[[routes]]
name = "all"
match = { path_prefix = "/" }
cluster = "origin"
[[clusters]]
name = "origin"
endpoints = ["127.0.0.1:19000"]
C
pgrep -f "origin --listen 127.0.0.1:19000" >/dev/null || (setsid /work/main/target/release/origin --listen 127.0.0.1:19000 >/dev/null 2>&1 &)
sleep 0.3
setsid $BIN --config $W/gw.toml run --allow-root > $W/gw.log 2>&1 &
GW=$!
sleep 1
h2load -c8 -m16 -D 10 http://127.0.0.1:19082/bytes/512 > $W/h2load.txt 2>&1 &
H=$!
sleep 4
kill -USR2 $GW
wait $H
echo "$LABEL: $(grep -E '^requests:' $W/h2load.txt) | $(grep -E '^status codes' $W/h2load.txt)"
pkill -TERM -f -- "--config $W/gw.toml"; sleep 1.5; pkill -KILL -f -- "--config $W/gw.toml"
