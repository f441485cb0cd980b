#!/usr/bin/env bash
# End-to-end: build slaprobe, run `slaprobe demo` on a free loopback port, and check what a user sees:
#   /-/healthy and /-/ready answer, every default scenario (chatbot, rag, agentic, tool_calling) gets a
#   successful probe within E2E_TIMEOUT seconds, the status page at / shows each of them within its SLA,
#   and the exposition passes `promtool check metrics`.
set -euo pipefail

cd "$(dirname "$0")/.."
timeout_s=${E2E_TIMEOUT:-120}
scenarios=(chatbot rag agentic tool_calling)

say() { printf '==> %s\n' "$*"; }

work=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

fail() {
	echo "e2e: FAIL: $*" >&2
	if [ -s "$work/demo.log" ]; then
		echo "--- slaprobe demo output (last 40 lines) ---" >&2
		tail -n 40 "$work/demo.log" >&2
	fi
	exit 1
}

# A port nothing listens on (bash's /dev/tcp connects when something does).
port=
for _ in $(seq 1 50); do
	p=$((20000 + RANDOM % 20000))
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		port=$p
		break
	fi
done
[ -n "$port" ] || fail "no free port found"
base=http://127.0.0.1:$port

for c in curl promtool; do
	command -v "$c" >/dev/null 2>&1 || fail "$c is missing: run \`make test-deps\`"
done

say "build slaprobe"
# -trimpath as the image's build (Dockerfile): the tests that build slaprobe share one compilation.
CGO_ENABLED=1 go build -trimpath -o "$work/slaprobe" ./cmd/slaprobe
"$work/slaprobe" --version >/dev/null 2>&1 || fail "slaprobe --version failed"

say "start slaprobe demo on 127.0.0.1:$port"
"$work/slaprobe" demo --web.listen-address="127.0.0.1:$port" >"$work/demo.log" 2>&1 &
pid=$!

fetch() { curl -fsS --max-time 5 "$@"; }

say "wait up to ${timeout_s}s for a successful probe of: ${scenarios[*]}"
deadline=$((SECONDS + timeout_s))
while :; do
	kill -0 "$pid" 2>/dev/null || fail "slaprobe demo exited"
	missing=()
	if fetch "$base/metrics" >"$work/metrics.txt" 2>/dev/null; then
		for s in "${scenarios[@]}"; do
			grep -E "^slaprobe_probes_total\{[^}]*scenario=\"$s\"" "$work/metrics.txt" |
				grep -qE 'result="success"[^}]*\} [1-9]' || missing+=("$s")
		done
	else
		missing=("${scenarios[@]}")
	fi
	[ ${#missing[@]} -eq 0 ] && break
	[ $SECONDS -lt $deadline ] || fail "no successful probe after ${timeout_s}s for: ${missing[*]}"
	sleep 2
done
say "all four scenarios probed successfully after $((SECONDS - deadline + timeout_s))s"

fetch "$base/-/healthy" >/dev/null || fail "/-/healthy"
fetch "$base/-/ready" >/dev/null || fail "/-/ready"

say "status page at / shows every scenario"
fetch "$base/" >"$work/status.html" || fail "GET / (the status page)"
for s in "${scenarios[@]}"; do
	grep -q "data-scenario=\"$s\" data-status=\"ok\"" "$work/status.html" ||
		fail "the status page does not show $s within its SLA"
done

say "promtool check metrics"
fetch "$base/metrics" >"$work/metrics.txt" || fail "scrape /metrics"
promtool check metrics <"$work/metrics.txt" || fail "promtool check metrics"

say "e2e: ok"
