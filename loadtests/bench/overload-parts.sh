# Sourced by overload.sh: the gateway's per-worker sampling (admin port) and the report of the
# no-false-shedding scenarios (SCENARIO=load-dependent | noisy).
#
# Per-worker sampling: `/metrics?per_worker=1` on the gateway's admin port, once a second during
# the loaded phase, read into one JSON line per sample:
#   {"t": seconds since the phase began, "workers": {"0": {"limit": L, "served": S, "shed": D}, ...}}
# limit: `gateway_cluster_concurrency_limit{cluster="origin"}` (the worker's in-flight limit for
# the origin: adaptive, or the fixed cap); served / shed: `gateway_priority_requests_total`
# summed over the classes, outcome `served`, and outcomes `shed` + `overflow` (both 503s),
# counted since the gateway started.

# scrape_workers: one sample of the current gateway's workers as a JSON object (keyed by worker
# id), or nothing if the admin port does not answer.
scrape_workers() {
    curl -sS --max-time 2 "http://127.0.0.1:$ADMIN_PORT/metrics?per_worker=1" 2>/dev/null | awk '
    function label(line, name,    rest) {
        if (!match(line, name "=\"[^\"]*\"")) return ""
        rest = substr(line, RSTART + length(name) + 2, RLENGTH - length(name) - 3)
        return rest
    }
    /^gateway_cluster_concurrency_limit\{/ {
        if (label($0, "cluster") != "origin") next
        w = label($0, "worker"); seen[w] = 1; limit[w] = $NF
    }
    /^gateway_priority_requests_total\{/ {
        w = label($0, "worker"); o = label($0, "outcome"); seen[w] = 1
        if (o == "served") served[w] += $NF
        else if (o == "shed" || o == "overflow") shed[w] += $NF
    }
    END {
        n = 0
        printf "{"
        for (w in seen) {
            printf "%s\"%s\":{\"limit\":%s,\"served\":%d,\"shed\":%d}", (n++ ? "," : ""), w,
                (w in limit ? limit[w] : "null"), served[w], shed[w]
        }
        printf "}\n"
    }'
}

# sample_workers OUT: appends {"t": .., "workers": {..}} to OUT once a second until stopped.
sample_workers() {
    local out=$1 start now sample
    start=$(date +%s.%N)
    while :; do
        sample=$(scrape_workers) || sample=""
        now=$(date +%s.%N)
        [[ -n $sample && $sample != "{}" ]] &&
            printf '{"t":%s,"workers":%s}\n' "$(awk -v a="$start" -v b="$now" 'BEGIN { printf "%.2f", b - a }')" \
                "$sample" >>"$out"
        sleep 1
    done
}

# workers_json DIR: the run's per-worker record (null without samples): the per-second series of
# each worker's limit and their sum, and each worker's served and shed requests in the loaded
# phase (the last sample minus the one taken just before it).
workers_json() {
    local dir=$1 out
    if [[ ! -s $dir/workers.jsonl || ! -s $dir/workers-base.json || ! -s $dir/workers-end.json ]]; then
        echo null
        return
    fi
    out=$(jq -cn --slurpfile series "$dir/workers.jsonl" --slurpfile first "$dir/workers-base.json" \
        --slurpfile last "$dir/workers-end.json" --argjson configured "$GATEWAY_WORKERS" '
        ($last[0] | keys_unsorted | map(tonumber) | sort | map(tostring)) as $ids
        | {
          configured: $configured,
          running: ($ids | length),
          series: [$series[] | {t, limits: [.workers[$ids[]].limit], sum: ([.workers[$ids[]].limit // 0] | add)}],
          totals: [$ids[] as $w | {worker: ($w | tonumber),
                   served: (($last[0][$w].served // 0) - ($first[0][$w].served // 0)),
                   shed: (($last[0][$w].shed // 0) - ($first[0][$w].shed // 0))}]
        }') && [[ -n $out ]] || out=null
    echo "$out"
}

# workers_summary_jq: a jq function, worker_summary(duration; halved): the run's per-worker
# record summarised: the median sum of the limits (before and after the halving, when there is
# one) and each worker's share of the served requests.
workers_summary_jq() {
    cat <<'EOF'
def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
  else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def worker_summary($duration; $halved):
  if . == null then null else
  (.totals | map(.served) | add) as $served
  | {configured, running,
     limit_sum_median: (if $halved then [([.series[] | select(.t < $duration / 2) | .sum] | median),
                                          ([.series[] | select(.t >= $duration / 2) | .sum] | median)]
                        else [[.series[] | .sum] | median] end),
     served_share_pct: [.totals[] | if $served > 0 then .served * 100 / $served else null end],
     totals, series}
  end;
EOF
}

# workers_markdown: the per-worker table (jq filter over the summary; needs fixed/name).
workers_markdown_jq() {
    cat <<'EOF'
(if ([.runs[] | select(.workers)] | length) > 0 then
  "### Per worker (gateway admin port, `/metrics?per_worker=1` once a second in the loaded phase)",
  "",
  "| proxy | workers (running) | median sum of the workers' limits\(if $p.origin.halves_at_s then ", before → after halving" else "" end) | origin capacity | served share per worker min / max % | served / shed per worker |",
  "| --- | --- | --- | --- | --- | --- |",
  (.runs[] | select(.workers) | .workers as $w |
    "| \(name) | \($w.configured) (\($w.running)) | \([$w.limit_sum_median[] | fixed(1)] | join(" → ")) | \(if $p.origin.capacity_rps then (if $p.origin.halves_at_s then "\($p.origin.capacity) → \($p.origin.capacity / 2 | floor)" else "\($p.origin.capacity)" end) else "no limit" end) | \($w.served_share_pct | min | fixed(1)) / \($w.served_share_pct | max | fixed(1)) | \([$w.totals[] | "\(.served) / \(.shed)"] | join(", ")) |"),
  "",
  "All the gateway's workers run on the proxy CPU (the gateway pins its workers round-robin over the CPUs its affinity mask allows, and the benchmark pins it to one): the numbers check the per-worker limits for correctness, not the speed of several workers.",
  ""
else empty end)
EOF
}

# ---------------------------------------------------------------------------------------------
# The no-false-shedding scenarios: an origin with no concurrency limit at its usual rate (the
# reference phase), then at LOAD_FACTOR x that rate. Nothing is overloaded, so every 503 is
# false shedding: load-dependent must stay under 0.5% of the loaded phase's requests, noisy at 0.

scenario_summary_jq() {
    workers_summary_jq
    cat <<'EOF'
def pct(a; b): if b > 0 then a * 100 / b else null end;
def check(ok; value): {pass: ok, value: value};
def class_row: {offered, succeeded, ok_pct: pct(.succeeded; .offered), shed, shed_pct: pct(.shed; .offered),
                rate_limited, timed_out: (.timed_out + (.error_status["504"] // 0)),
                other_errors: (.errors - (.error_status["504"] // 0)),
                ok_p50_ms: .ok_ms.p50, ok_p99_ms: .ok_ms.p99, ok_max_ms: .ok_ms.max};
{
  benchmark: "overload",
  scenario: $scenario,
  description: (if $scenario == "load-dependent"
    then "origin without a concurrency limit whose service time grows with load (\($service_ms) ms + \($per_inflight_ms) ms per request in service), at \($rate / $usual_rps) x its usual rate; every 503 is false shedding"
    else "origin without a concurrency limit with noisy service times (log-normal, median \($service_ms) ms, p99/p50 \($p99_ratio)), at \($rate / $usual_rps) x its usual rate; every 503 is false shedding" end),
  timestamp: $stamp,
  machine: {kernel: $kernel, nproc: $nproc, cpu_model: $cpu, loadavg_before: $loadavg},
  git: {commit: $commit, dirty: $dirty},
  params: {
    origin: {mode: $scenario, service_ms: $service_ms, capacity_rps: null,
             per_inflight_ms: (if $scenario == "load-dependent" then $per_inflight_ms else null end),
             p99_ratio: (if $scenario == "noisy" then $p99_ratio else null end),
             seed: (if $scenario == "noisy" then $origin_seed else null end)},
    load: {mix: $mix, usual_rps: $usual_rps, rate: $rate, duration_s: $duration,
           usual_duration_s: $unloaded_duration, client_timeout_ms: $client_timeout_ms},
    target_shed_pct: (if $scenario == "load-dependent" then 0.5 else 0 end),
    route_timeout_ms: $route_timeout_ms, rounds: $rounds,
    proxy_cpu: $pcpu, load_cpu: $lcpu, order: $order, gateway_workers: $gateway_workers
  },
  skipped: $skipped,
  runs: [$runs[] | . as $r | .overload as $o | ($r.unloaded) as $u
    | ($o.total.shed) as $shed | pct($shed; $o.total.offered) as $shed_pct
    | ([$o.classes[] | .timed_out + .errors] | add) as $failed
    | {
      proxy: $r.proxy, round: $r.round, config_note: $r.config_note,
      valid: ($o.generator.overloaded == 0 and $u.generator.overloaded == 0),
      classes: ($o.classes | with_entries(.value |= class_row)),
      total: ($o.total | class_row),
      usual: {classes: ($u.classes | with_entries(.value |= class_row)), total: ($u.total | class_row)},
      origin: $r.origin,
      proxy_peak_rss_kb: $r.proxy_peak_rss_kb,
      proxy_cpu_s: $r.proxy_cpu_s,
      workers: ($r.workers | worker_summary($duration; false)),
      generator: {overloaded: ($o.generator.overloaded + $u.generator.overloaded),
                  scheduler_max_lag_ms: ([$o.generator.scheduler_max_lag_ms, $u.generator.scheduler_max_lag_ms] | max),
                  send_lag_p50_ms: $o.generator.send_lag_ms.p50, send_lag_p99_ms: $o.generator.send_lag_ms.p99,
                  connections_opened: $o.generator.connections_opened},
      checks: {
        false_shedding: (if $scenario == "load-dependent" then check($shed_pct != null and $shed_pct < 0.5; $shed_pct)
                         else check($shed == 0; $shed) end),
        all_answered: check($failed == 0; $failed)
      },
      series: $o.series,
      config: $r.config
    }]
}
EOF
}

scenario_markdown() {
    jq -r '
    def fixed(n): if . == null then "–" elif . < 0 then "-" + (-. | fixed(n)) elif n == 0 then round | tostring
      else pow(10; n) as $m | (. * $m | round) as $c | ($c % $m | tostring) as $f
        | "\($c / $m | floor).\([range(n - ($f | length))] | map("0") | join(""))\($f)" end;
    def mark: if .pass then "✓ " else "✗ " end;
    def name: if $rounds > 1 then "\(.proxy) #\(.round)" else .proxy end;
    def row($r; $phase; $k): "| \($r | name) | \($phase) | \($k) | \(.offered) | \(.ok_pct | fixed(1)) | \(.shed) | \(.shed_pct | fixed(2)) | \(.timed_out) | \(.other_errors) | \(.ok_p50_ms | fixed(1)) | \(.ok_p99_ms | fixed(1)) |";
    .params as $p |
    "## overload, scenario \(.scenario) \(.timestamp)",
    "",
    "Origin: `capacity-origin --mode \($p.origin.mode)`, no concurrency limit, \(if $p.origin.mode == "load-dependent" then "service time \($p.origin.service_ms) ms + \($p.origin.per_inflight_ms) ms per other request in service" else "service time log-normal, median \($p.origin.service_ms) ms, p99/p50 \($p.origin.p99_ratio) (seed \($p.origin.seed)), independent of load" end). Load: `overload-load`, open loop, mix \($p.load.mix), the usual \($p.load.usual_rps) req/s for \($p.load.usual_duration_s) s, then \($p.load.rate) req/s (\($p.load.rate / $p.load.usual_rps)×) for \($p.load.duration_s) s; client timeout \($p.load.client_timeout_ms) ms, route timeout \($p.route_timeout_ms) ms. Nothing is overloaded: every 503 is false shedding (target: \(if $p.target_shed_pct > 0 then "< \($p.target_shed_pct)%" else "none" end) in the \($p.load.rate / $p.load.usual_rps)× phase). Gateway: \($p.gateway_workers) worker(s), on its defaults; proxy pinned to CPU \($p.proxy_cpu), origin and load to CPU \($p.load_cpu); \($p.rounds) round(s).",
    "",
    "Machine: Linux \(.machine.kernel), \(.machine.nproc) CPUs (\(.machine.cpu_model)), load average \(.machine.loadavg_before) before the rounds; commit \(.git.commit)\(if .git.dirty then " (dirty tree)" else "" end).",
    "",
    "### Per class",
    "",
    "| proxy | phase | class | offered | ok % | shed 503 | shed % | timed out | other errors | p50 ok ms | p99 ok ms |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    (.runs[] as $r | (($r.usual.classes | to_entries[] | .key as $k | .value | row($r; "usual"; $k)),
                      ($r.usual.total | row($r; "usual"; "all")),
                      ($r.classes | to_entries[] | .key as $k | .value | row($r; "\($p.load.rate / $p.load.usual_rps)×"; $k)),
                      ($r.total | row($r; "\($p.load.rate / $p.load.usual_rps)×"; "all")))),
    "",
    "### Per proxy",
    "",
    "| proxy | origin max in flight | origin served | proxy peak RSS MiB | proxy CPU s | generator lag p50 / p99 ms |",
    "| --- | --- | --- | --- | --- | --- |",
    (.runs[] | "| \(name) | \(.origin.max_in_flight // "–") | \(.origin.served // "–") | \(.proxy_peak_rss_kb / 1024 | fixed(1)) | \(.proxy_cpu_s | fixed(2)) | \(.generator.send_lag_p50_ms | fixed(2)) / \(.generator.send_lag_p99_ms | fixed(2))\(if .valid then "" else ", OVERLOADED (\(.generator.overloaded) not sent): not valid" end) |"),
    "",
    '"$(workers_markdown_jq)"',
    "### Targets",
    "",
    "| proxy | false shedding \(if $p.target_shed_pct > 0 then "< \($p.target_shed_pct)%" else "= 0 (count)" end) | every request answered (failures) |",
    "| --- | --- | --- |",
    (.runs[] | .checks as $c |
      "| \(name) | \($c.false_shedding | mark)\(if $p.target_shed_pct > 0 then "\($c.false_shedding.value | fixed(2))% (\(.total.shed) of \(.total.offered))" else "\($c.false_shedding.value) of \(.total.offered)" end) | \($c.all_answered | mark)\($c.all_answered.value) |"),
    (.runs[] | select(.config_note) | "", "Note (\(name)): \(.config_note)."),
    (if (.skipped | length) > 0 then "", "Skipped: " + ([.skipped[] | "\(.proxy) (round \(.round)): \(.reason)"] | join("; ")) else empty end)
    ' --argjson rounds "$ROUNDS" "$1"
}
