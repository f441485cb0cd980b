#!/usr/bin/env bash
# Measures slaprobe's /metrics at N targets × the nine built-in scenarios, for each
# global.classic_histogram_buckets mode: series, size (plain and gzip) and scrape time (median of
# 20 scrapes with curl, gzip accepted as Prometheus does). Runs `slaprobe sim` and `slaprobe run` on
# loopback; every scenario's interval is shortened so that each target × scenario has probed
# successfully before the measurement.
# Usage: scripts/series-budget.sh [targets]   (default 20). Figures: docs/scaling.md.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=${1:-20}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

go build -o "$work/slaprobe" ./cmd/slaprobe
"$work/slaprobe" sim --sim.listen-address=127.0.0.1:18000 --sim.time-scale=0.02 --log.level=warn &
pids+=($!)

scenarios=$("$work/slaprobe" run --help 2>&1 | tr -d '\n' | sed -E 's/.*Built in: ([a-z_, ]+)\. With.*/\1/; s/ +//g')
printf 'mode      series  bytes     gzip     scrape_ms(median of 20)\n'
for mode in full reduced none; do
	{
		echo "global: {jitter: 0, scenarios: [$scenarios], classic_histogram_buckets: $mode}"
		echo "engine: {enabled: false}"
		echo "scenarios:"
		for s in ${scenarios//,/ }; do echo "  - {name: $s, interval: 20s}"; done
		echo "targets:"
		for i in $(seq -w 1 "$targets"); do echo "  - {name: vllm-$i, url: 'http://127.0.0.1:18000'}"; done
	} >"$work/$mode.yml"
	"$work/slaprobe" run --config.file="$work/$mode.yml" --web.listen-address=127.0.0.1:19781 --log.level=warn &
	pid=$!
	want=$((targets * 9))
	for _ in $(seq 1 180); do
		got=$(curl -s http://127.0.0.1:19781/metrics | grep -c '^slaprobe_ttft_seconds_count' || true)
		[ "$got" -ge "$want" ] && break
		sleep 2
	done
	curl -s http://127.0.0.1:19781/metrics >"$work/m.txt"
	series=$(grep -vc '^#' "$work/m.txt")
	bytes=$(wc -c <"$work/m.txt")
	gz=$(gzip -c "$work/m.txt" | wc -c)
	times=$(for _ in $(seq 1 20); do curl -s -o /dev/null -H 'Accept-Encoding: gzip' -w '%{time_total}\n' http://127.0.0.1:19781/metrics; done | sort -n)
	median=$(echo "$times" | sed -n 10p)
	printf '%-8s  %6d  %8d  %7d  %.1f   (%s of %s target×scenario histograms filled)\n' \
		"$mode" "$series" "$bytes" "$gz" "$(awk -v t="$median" 'BEGIN { print t * 1000 }')" "$got" "$want"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
done
