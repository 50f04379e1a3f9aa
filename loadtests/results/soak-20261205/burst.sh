#!/bin/bash
# burst.sh BIN: (as run on 5 December; the config beside it names certificates under /tmp/prof/pki, made with openssl as lib.sh make_test_pki does) a fresh gateway (1 worker), a 5 s burst of 1000 h2c streams of 16 KiB answers, RSS after
B=$1
pgrep -f "origin --listen 127.0.0.1:18090" >/dev/null || (setsid /work/main/target/release/origin --listen 127.0.0.1:18090 > /tmp/seg/origin.log 2>&1 &)
sleep 0.5
(setsid $B --config $(dirname "$0")/gwd.toml run --allow-root > /tmp/seg/gwb.log 2>&1 &); sleep 1
P=$(pgrep -f "gwd.toml run")
rss() { awk '/VmRSS/{printf "%.1f", $2/1024}' /proc/$P/status; }
line="start $(rss)"
h2load -c10 -m100 -D 5 http://127.0.0.1:18082/bytes/16384 > /tmp/seg/burst-h2load.txt 2>&1
line="$line, after burst $(rss)"
for t in 5 10 15 20 25 30; do sleep 5; line="$line, +${t}s $(rss)"; done
echo "$(basename $B): $line MiB ($(grep -oP '\d+ succeeded' /tmp/seg/burst-h2load.txt))"
kill $P; sleep 0.5
