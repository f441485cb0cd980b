#!/usr/bin/env bash
# `make test`: every test, in stages, with the time each took.
#
# The stages that do not need each other run at once; tests that measure time get quiet cores:
#
#   1. apt                       Debian packages (only what is missing).
#   2. at once, each in its own log:
#        llmd, ollama            the pinned tool builds (cached by version, scripts/test-deps.sh)
#        grafana-npm             npm ci of @grafana/data (only when its lock changed)
#        go-build                compiles every test binary, so that the later stages only run tests
#   3. at once, none of them timing-sensitive:
#        fuzz-short, test-deploy, test-grafana
#   4. go-test-race              go test -race ./..., and beside it
#      checkrules                promtool, one process per test file, which keeps a core busy for minutes.
#                                A test whose tolerances are a few milliseconds, or that keeps a core busy
#                                itself (a real engine), calls testproc.Quiet: it takes an exclusive lock
#                                that checkrules holds shared (flock -s), so such tests wait until
#                                promtool is done, while the rest of go test runs beside it.
#   5. e2e                       scripts/e2e.sh, the demo scraped by promtool (alone)
#
set -uo pipefail

cd "$(dirname "$0")/.."
root=$PWD
GO=${GO:-go}
export SLAPROBE_REQUIRE_DEPS=1
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
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

group \
	"llmd:scripts/test-deps.sh llmd" \
	"ollama:scripts/test-deps.sh ollama" \
	"grafana-npm:scripts/test-deps.sh grafana" \
	"go-build:CGO_ENABLED=1 $GO test -race -count=1 -run '^\$' ./... >/dev/null && cd test/deploy && CGO_ENABLED=1 $GO test -count=1 -run '^\$' ./... >/dev/null && cd ../grafana && $GO test -count=1 -run '^\$' ./... >/dev/null && echo 'test binaries compiled'" ||
	finish

group \
	"fuzz-short:make --no-print-directory fuzz-short" \
	"test-deploy:make --no-print-directory test-deploy" \
	"test-grafana:cd test/grafana && $GO test ./..." ||
	finish

# The lock file testproc.Quiet takes (test/testproc): checkrules holds it shared while it runs.
quiet_lock=${TMPDIR:-/tmp}/slaprobe-quiet-cores.lock
if [ "${TEST_SERIAL:-0}" = 1 ] || ! command -v flock >/dev/null 2>&1; then
	run checkrules make --no-print-directory checkrules || finish
	run go-test-race env CGO_ENABLED=1 $GO test -race -timeout 20m ./... || finish
else
	group \
		"checkrules:flock -s '$quiet_lock' make --no-print-directory checkrules" \
		"go-test-race:sleep 1; CGO_ENABLED=1 $GO test -race -timeout 20m ./..." ||
		finish
fi
run e2e scripts/e2e.sh || finish
finish
