#!/usr/bin/env bash
# `make test`: every test, in stages, with the time each took.
#
# The stages that do not need each other run at once; tests that measure time get quiet cores:
#
#   1. apt                       Debian packages (only what is missing).
#   2. at once, each in its own log:
#        llmd, ollama            the pinned tool builds (cached by version, scripts/test-deps.sh)
#        grafana-npm             npm ci of @grafana/data (cached by its lock's hash)
#        go-build                compiles every package and test package, without linking
#        fuzz-short              both fuzz targets, a fixed count of runs each (both cores, briefly)
#   3. at once:
#        go-test-race            go test -race of every package but test/e2e, three at a time
#        test-e2e-go             go test -race ./test/e2e (Prometheus, Alertmanager, demos, a browser)
#        checkrules              promtool, one process per test file
#        test-deploy, test-grafana
#        e2e                     scripts/e2e.sh, the demo scraped by promtool
#      A test whose tolerances are a few milliseconds, or that keeps a core busy itself (a real
#      engine), calls testproc.Quiet: an exclusive lock. Everything in this stage that keeps the cores
#      busy without measuring time holds that lock shared (flock -s, or test/e2e's TestMain), so the
#      timing checks wait until those are done while the rest of go test runs beside them.
#
# Every go test runs with -count=1: a rerun tests again instead of printing cached results.
set -uo pipefail

cd "$(dirname "$0")/.."
root=$PWD
GO=${GO:-go}
export SLAPROBE_REQUIRE_DEPS=1
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# testproc.Quiet logs each timing check's wait and hold here; table prints them.
export SLAPROBE_QUIET_LOG=$logs/quiet.tsv
t_epoch=$(date +%s)
declare -a names=() secs=() results=()
failed=()
t_all=$SECONDS

say() { printf '==> %s\n' "$*"; }

record() { # name seconds rc
	names+=("$1")
	secs+=("$2")
	if [ "$3" -eq 0 ]; then results+=("ok"); else results+=("FAIL ($3)"); failed+=("$1"); fi
}

# run NAME CMD...: a stage in the foreground, its output straight through.
run() {
	local name=$1 start=$SECONDS rc=0
	shift
	say "stage $name: start"
	"$@" || rc=$?
	say "stage $name: $((SECONDS - start))s$([ $rc -ne 0 ] && echo ", FAILED (exit $rc)")"
	record "$name" $((SECONDS - start)) $rc
	return $rc
}

# group NAME:CMD ...: stages at once (or one by one with TEST_SERIAL=1); each stage's output is
# printed whole when it ends. Returns non-zero when any failed.
group() {
	local -a gnames=() pids=() starts=()
	local spec name cmd i rc any=0
	if [ "${TEST_SERIAL:-0}" = 1 ]; then
		for spec in "$@"; do
			run "${spec%%:*}" bash -c "${spec#*:}" || any=1
		done
		return $any
	fi
	for spec in "$@"; do
		name=${spec%%:*} cmd=${spec#*:}
		say "stage $name: start (beside others; its output follows when it ends)"
		bash -c "$cmd" >"$logs/$name.log" 2>&1 &
		pids+=($!)
		gnames+=("$name")
		starts+=($SECONDS)
	done
	# Wait in order of completion so each log is printed as soon as its stage ends.
	local -A ended=()
	while [ ${#ended[@]} -lt ${#pids[@]} ]; do
		for i in "${!pids[@]}"; do
			[ -n "${ended[$i]:-}" ] && continue
			if ! kill -0 "${pids[$i]}" 2>/dev/null; then
				rc=0
				wait "${pids[$i]}" || rc=$?
				ended[$i]=1
				cat "$logs/${gnames[$i]}.log"
				say "stage ${gnames[$i]}: $((SECONDS - starts[i]))s$([ $rc -ne 0 ] && echo ", FAILED (exit $rc)")"
				record "${gnames[$i]}" $((SECONDS - starts[i])) $rc
				[ $rc -ne 0 ] && any=1
			fi
		done
		sleep 0.5
	done
	return $any
}

table() {
	local i
	echo
	echo "==> make test: stages"
	printf '    %-16s %8s  %s\n' stage seconds result
	for i in "${!names[@]}"; do
		printf '    %-16s %8s  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"
	done
	printf '    %-16s %8s\n' total $((SECONDS - t_all))
	if [ -s "$SLAPROBE_QUIET_LOG" ]; then
		echo
		echo "==> timing checks on quiet cores (seconds since make test started; they run one at a time)"
		printf '    %-58s %7s %7s %7s\n' test asked got held
		sort -t$'\t' -k3,3n "$SLAPROBE_QUIET_LOG" |
			awk -F'\t' -v t0="$t_epoch" '{ printf "    %-58s %7.0f %7.0f %7.1f\n", substr($1, 1, 58), $2 - t0, $3 - t0, $4 - $3 }'
	fi
}

finish() {
	table
	if [ ${#failed[@]} -gt 0 ]; then
		echo "==> make test: FAILED in stage(s): ${failed[*]}"
		exit 1
	fi
	echo "==> make test: all passed"
	exit 0
}

run apt scripts/test-deps.sh apt || finish

# go-build compiles every package and test package (go list -export) without linking: go test links
# each test binary anyway, so linking here too would only do it twice.
group \
	"llmd:scripts/test-deps.sh llmd" \
	"ollama:scripts/test-deps.sh ollama" \
	"grafana-npm:scripts/test-deps.sh grafana" \
	"fuzz-short:make --no-print-directory fuzz-short" \
	"go-build:set -e; CGO_ENABLED=1 $GO list -race -test -export -deps -f '' ./...; cd test/deploy; CGO_ENABLED=1 $GO list -test -export -deps -f '' ./...; cd ../grafana; $GO list -test -export -deps -f '' ./...; echo 'every package and test package compiled'" ||
	finish

# The lock file testproc.Quiet takes (test/testproc). The stages that keep cores busy without measuring
# time hold it shared (flock -s; test/e2e's TestMain does the same), so the timing checks of
# go-test-race wait for them, while the rest of go-test-race runs beside them. go-test-race runs three
# packages at once (-p 3): a package waiting for quiet cores holds no core, and a timing check has at
# most two other packages beside it (with four, llm-d's and Ollama's timings drifted past their tolerances).
quiet_lock=${TMPDIR:-/tmp}/slaprobe-quiet-cores.lock
others=$($GO list ./... | grep -v '/test/e2e$' | tr '\n' ' ')
# go-test-race is not niced: niced, its tests that time short gaps without asking for quiet cores
# (vllmsim's fault stalls, the warm-cache checks) starved beside the busy stages and failed.
if [ "${TEST_SERIAL:-0}" = 1 ] || ! command -v flock >/dev/null 2>&1; then
	busy=
else
	busy="flock -s '$quiet_lock'"
fi
group \
	"checkrules:$busy make --no-print-directory checkrules" \
	"test-e2e-go:CGO_ENABLED=1 $GO test -race -count=1 -timeout 20m ./test/e2e" \
	"test-deploy:$busy make --no-print-directory test-deploy" \
	"test-grafana:cd test/grafana && $busy $GO test -count=1 ./..." \
	"e2e:$busy scripts/e2e.sh" \
	"go-test-race:CGO_ENABLED=1 $GO test -race -count=1 -p 3 -timeout 20m $others" ||
	finish
finish
