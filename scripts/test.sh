#!/usr/bin/env bash
# `make test`: every test, in stages, with the time each took.
#
# Each stage starts when the stages it needs have passed, the stages it runs after have ended and the
# machine has room for it (s_weight, below); its output is printed whole when it ends. The builds come first,
# one after another: on 2 cores three Go and C++ builds at once took more than twice the CPU time they
# take in turn (caches and memory thrashed), so a fresh machine is done sooner building them in a row.
# apt downloads beside them. A stage whose need failed is not run; a stage that only runs after a
# failed one still runs. So one broken tool build does not blank the run: every stage that does not
# need it still tests and reports, the tests that need it fail by name (testproc.SkipIfMissing reads
# the .tools/bin/<tool>.build-failed marker this script leaves, which names the stage and its log),
# and the run as a whole still fails.
#
#   stage          what                                                         needs; runs after
#   apt            Debian packages (only what is missing)
#   llmd           llm-d-inference-sim, pinned, cached by version (scripts/test-deps.sh)
#   go-build       compiles every package and test package of the three        ; llmd
#                  modules without linking, and slaprobe as the tests build it (-trimpath); lists
#                  which packages' tests run a built tool
#   ollama         Ollama and tinymodel, pinned, cached by version              apt (g++, headers); go-build
#   grafana-npm    npm ci of @grafana/data, cached by its lock's hash           apt (node, npm)
# Then the tests, when the builds have ended, as the load allows, in this order (the longest and the
# busiest first):
#   go-test-tools  go test -race of those that run llm-d or Ollama              go-build; ollama
#   go-test        go test -race of the packages whose tests need no built tool go-build; ollama
#   checkrules     promtool and amtool, one process per rule test file          apt; ollama
#   test-e2e-go    go test -race ./test/e2e (Prometheus, Alertmanager)          go-build; ollama
#   fuzz-short     both fuzz targets, a fixed count of runs each                ; ollama
#   test-deploy    the test/deploy module                                       ; ollama
#   e2e            scripts/e2e.sh: the demo scraped by promtool                 apt, go-build; ollama
#   test-grafana   the test/grafana module                                      grafana-npm; ollama
#   go-test-quiet  the timing checks the go-test stages deferred                ; every other stage
# The stages that only need throughput (promtool, the test modules, scripts/e2e.sh, the fuzzing) run
# niced beside go test.
#
# Timing checks: a test whose tolerances are a few milliseconds, or that keeps a core busy itself (a
# real engine), calls testproc.Quiet (or QuietLight). In go-test and go-test-tools, Quiet skips the
# test and lists it (SLAPROBE_QUIET_DEFER), so that a test waiting for quiet cores never holds one of
# go test's package slots. go-test-quiet runs the listed tests once every other stage has ended
# (quiet_pass, below). The busy stages also hold the lock shared
# (flock -s, test/e2e's TestMain), which keeps timing checks away from them in a plain `go test ./...`
# too.
#
# go test's cache serves a package (or a quiet pass's checks) whose test binary, flags, environment
# and opened files are those of a run that passed; the tests that run a program read a digest of the
# tree and the tools (tree_key, testproc.SeesTree), so any change to what such a program reads runs
# them again. checkrules leaves a stamp keyed by its inputs. TEST_FRESH=1 runs everything again.
# TEST_SERIAL=1 runs the stages one after the other, in the order above.
set -uo pipefail

cd "$(dirname "$0")/.."
root=$PWD
GO=${GO:-go}
export SLAPROBE_REQUIRE_DEPS=1
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

say() { printf '==> %s\n' "$*"; }

# The light checks' packages that take longest, longest first (mt20, 2 cores: 99, 88, 44, 42, 39 s),
# so that the lanes end together; the others follow. Only the order depends on it.
light_longest="./collector ./internal/bench ./internal/sweeper ./internal/workload ./prober"

# quiet_pass LIST: runs the tests go-test and go-test-tools deferred (lines "<package dir>\t<test>\t
# <class>"), with go test -json through test/testsummary ($summary), so that go test's cache serves a
# check whose package, tree and tools are unchanged (scripts/test.sh's head). First the light checks
# (testproc.QuietLight: their own work keeps well under a core busy), a package's together in one go
# test, two packages more at once than there are cores, holding the lock shared (SLAPROBE_QUIET_SHARED);
# then the others, a package at a time, with the machine to themselves. A deferred subtest runs with
# its whole top-level test; a top-level test with any whole-machine part is not light. A package's go
# test links its test binary before the first check in it starts: beside a light check runs at most
# another package's link; a whole check never has a neighbour.
quiet_pass() {
	local list=$1 jobs lanes
	if [ ! -s "$list" ]; then
		say "no timing check was deferred to this pass"
		return 0
	fi
	jobs=$(mktemp)
	# The jobs, "<package>\t<tests>\t<class>": a package's light top-level tests (no part of them whole)
	# together, the longest first (light_longest), then the packages with the most; then its whole ones
	# together.
	awk -F'\t' -v root="$root" -v longest="$light_longest" '{ split($2, p, "/"); k = $1 "\t" p[1]; c = ($3 == "light") ? "light" : "whole"
		if (!(k in cls) || c == "whole") cls[k] = c; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
		END {
			for (i = 1; i <= n; i++) {
				split(order[i], f, "\t"); d = f[1]
				if (d == root) d = "."; else if (index(d, root "/") == 1) d = "./" substr(d, length(root) + 2)
				c = cls[order[i]]; j = d "\t" c
				if (!(j in tests)) { jobs[++m] = j; tests[j] = f[2]; cnt[j] = 1 } else { tests[j] = tests[j] "|" f[2]; cnt[j]++ }
			}
			nl = split(longest, l, " "); for (i = 1; i <= nl; i++) rank[l[i]] = i
			for (i = 1; i <= m; i++) { split(jobs[i], f, "\t"); r = (f[2] == "light" && (f[1] in rank)) ? rank[f[1]] : nl + 1
				print (f[2] == "light" ? 0 : 1) "\t" r "\t" cnt[jobs[i]] "\t" f[1] "\t" tests[jobs[i]] "\t" f[2] }
		}' "$list" | sort -t$'\t' -k1,1n -k2,2n -k3,3nr -s | cut -f4- >"$jobs"
	# Light checks keep 0.02-0.46 of a core busy each (the quiet table's cores; 0.62 for under a second):
	# two more lanes than cores keep their sum within the cores. With one more, 2 cores took 147 s
	# for the 9 light packages, 51 s longer than their longest (mt19).
	lanes=$(( $(nproc 2>/dev/null || echo 1) + 2 ))
	say "$(cut -f2 "$jobs" | tr '|' '\n' | wc -l) timing checks in $(cut -f1 "$jobs" | sort -u | wc -l) packages ($(grep $'\tlight$' "$jobs" | cut -f2 | tr '|' '\n' | wc -l) light, $lanes packages at once; the others alone, a package at a time)"
	local rc=0 running=0 pkg tests class
	check() { # package tests class: runs one package's checks, prints a line, and go test's output when they failed
		local log start r=0 how
		log=$(mktemp)
		start=$SECONDS
		# shellcheck disable=SC2086 # $count is one flag or none
		(set -o pipefail; SLAPROBE_QUIET_SHARED=$([ "$3" = light ] && echo 1) CGO_ENABLED=1 $GO test -race -json $count \
			-run "^($2)\$" -timeout 20m "$1" | "$summary" -held "$quiet_held" -why "$why_log") >"$log" 2>&1 || r=$?
		how=$((SECONDS - start))s
		grep -q '(cached)' "$log" && how="cached"
		if [ $r -eq 0 ]; then
			printf 'ok  \t%s %s (%s)\t%s\n' "$1" "$2" "$3" "$how"
		else
			cat "$log"
			printf 'FAIL\t%s %s (%s)\t%s (exit %s)\n' "$1" "$2" "$3" "$how" "$r"
		fi
		rm -f "$log"
		return $r
	}
	while IFS=$'\t' read -r pkg tests class; do
		[ "$class" = light ] || continue
		if [ $running -ge "$lanes" ]; then
			wait -n || rc=1
			running=$((running - 1))
		fi
		check "$pkg" "$tests" light </dev/null &
		running=$((running + 1))
	done <"$jobs"
	while [ $running -gt 0 ]; do
		wait -n || rc=1
		running=$((running - 1))
	done
	while IFS=$'\t' read -r pkg tests class; do
		[ "$class" = light ] && continue
		check "$pkg" "$tests" whole </dev/null || rc=1
	done <"$jobs"
	rm -f "$jobs"
	return $rc
}

# partition DIR: writes DIR/pkgs-tools, the packages whose tests run a built tool (they import
# test/llmd or test/ollama), and DIR/pkgs-other, the rest; test/e2e, a stage of its own, in neither.
partition() {
	local tools p
	tools=$($GO list -test -f '{{if .ForTest}}{{.ForTest}} {{join .Deps " "}}{{end}}' ./... |
		awk '/slaprobe\/test\/(llmd|ollama)( |$)/ { print $1 }' | sort -u) || return 1
	$GO list ./... | grep -v '/test/e2e$' | while read -r p; do
		if grep -qxF "$p" <<<"$tools"; then echo "$p" >&3; else echo "$p"; fi
	done >"$1/pkgs-other" 3>"$1/pkgs-tools"
}

# tree_key: a digest of the working tree (every file git tracks or would track, as it is on disk) and
# of the programs the tests run (.tools/bin, the installed Debian packages), or nothing outside a git
# checkout. The tests that run a program read it (testproc.SeesTree), so go test reuses their results
# only for the same tree and programs; the others go test keys by their package's code and the files
# they open. The stamps of the stages that are not go test use it too.
tree_key() {
	local idx
	command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1 || return 0
	idx=$(mktemp)
	cp "$(git rev-parse --git-path index)" "$idx" 2>/dev/null
	{
		GIT_INDEX_FILE=$idx git add -A . >/dev/null 2>&1 && GIT_INDEX_FILE=$idx git write-tree
		ls -lLn --time-style=+%s "$root/.tools/bin" 2>/dev/null
		dpkg-query -W -f '${Package}=${Version}\n' 2>/dev/null
	} | sha256sum | cut -c1-32
	rm -f "$idx"
}

# Go test's cache: without TEST_FRESH=1, go test reuses the result of a package (or of a quiet
# pass's checks) whose test binary, flags, environment and opened files are those of a run that
# passed; with it, every go test runs with -count=1 and no stage stamp is read.
count=
[ "${TEST_FRESH:-0}" = 1 ] && count=-count=1

# stamped NAME CMD: runs CMD, unless a stamp says it passed for the same inputs (the files and
# packages stamp_inputs names for NAME) and TEST_FRESH is not 1; leaves that stamp when it passes.
stamped() {
	local key stamp
	key=$(stamp_inputs "$1" | sha256sum | cut -c1-32)
	stamp=$root/.cache/make-test/$1.$key
	if [ -z "$count" ] && [ -f "$stamp" ]; then
		echo "==> $1: passed for the same inputs at $(cat "$stamp") (stamp .cache/make-test/$1.$key; TEST_FRESH=1 runs it again)"
		return 0
	fi
	bash -c "$2" || return
	mkdir -p "${stamp%/*}" && date -u +%FT%TZ >"$stamp"
}

# stamp_inputs NAME: what a stamped stage's result depends on.
stamp_inputs() {
	case $1 in
	checkrules) # the rules, their tests, Alertmanager's configs, the recipe and the two tools
		find alerts deploy -type f -print0 | sort -z | xargs -0 sha256sum
		sha256sum Makefile
		dpkg-query -W prometheus prometheus-alertmanager 2>/dev/null || command -v promtool amtool
		;;
	*) echo "stamp_inputs: no inputs named for $1" >&2; date +%s%N ;;
	esac
}

case ${1:-} in
--stamped)
	stamped "$2" "$3"
	exit
	;;
--quiet-pass)
	summary=$3 quiet_held=$4 why_log=$5
	quiet_pass "$2"
	exit
	;;
--partition)
	partition "$2"
	exit
	;;
esac

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# testproc.Quiet prints each timing check's wait and hold, and the checks it defers, on the test's
# output (as go test replays them from its cache too); test/testsummary ($summary) writes them here.
export SLAPROBE_QUIET_LOG=-
quiet_held=$logs/quiet.tsv
deferred=$logs/deferred.tsv
# Each failed test's last logged lines (testsummary -why), printed again at the end.
why_log=$logs/why.txt
summary=$logs/testsummary
SLAPROBE_TEST_TREE=$(tree_key)
export SLAPROBE_TEST_TREE
stamps=$root/.cache/make-test
if [ -n "$count" ]; then
	say "TEST_FRESH=1: every test runs again (-count=1), no stage stamp is read"
elif [ -n "$SLAPROBE_TEST_TREE" ]; then
	say "tree and tools $SLAPROBE_TEST_TREE: go test reuses what passed for the same code, tree and tools (TEST_FRESH=1 runs all again)"
fi
t_epoch=$(date +%s)
t_all=$SECONDS

declare -a names=() secs=() results=() failed=()
declare -a cpus=()
record() { # name seconds result
	names+=("$1")
	secs+=("$2")
	results+=("$3")
	cpus+=("$(cpu_seconds "$logs/$1.times")")
	[ "$3" = ok ] || failed+=("$1")
}

# run_one CMD TIMES: runs CMD in bash and writes the CPU time (user and system) that it and every
# process under it used to TIMES, as bash's `times` prints it for the children it waited for.
run_one() {
	bash -c 'bash -c "$1"; r=$?; times >"$2"; exit $r' run_one "$1" "$2"
}

# cpu_seconds TIMES: user + system seconds from run_one's file ("-" when there is none).
cpu_seconds() {
	[ -s "$1" ] || { echo -; return; }
	sed -n 2p "$1" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); s += a[1] * 60 + a[2] }; printf "%.0f", s }'
}

# stage NAME NEEDS AFTER CMD: NEEDS and AFTER are comma-separated lists of stages. The stage starts
# once every stage in NEEDS has passed and every stage in AFTER has ended, passed or not; when one in
# NEEDS fails (or is not run), the stage is not run.
declare -a s_name=() s_needs=() s_after=() s_cmd=()
stage() {
	s_name+=("$1")
	s_needs+=("$2")
	s_after+=("$3")
	s_cmd+=("$4")
}

# The programs each build stage puts in .tools/bin. When such a stage fails or is not run, its log is
# kept in .tools/logs/ and a marker beside each program names the stage and the log; tests that need
# the program fail with that message (testproc.SkipIfMissing). A passing build removes the markers.
declare -A s_tools=([llmd]="llm-d-inference-sim" [ollama]="ollama tinymodel")
mark_build() { # stage rc reason
	local n=$1 r=$2 why=$3 t log
	[ -n "${s_tools[$n]:-}" ] || return 0
	mkdir -p "$root/.tools/bin" "$root/.tools/logs"
	for t in ${s_tools[$n]}; do
		if [ "$r" = 0 ]; then
			rm -f "$root/.tools/bin/$t.build-failed"
			continue
		fi
		log=$root/.tools/logs/$n.log
		[ -f "$logs/$n.log" ] && cp -f "$logs/$n.log" "$log"
		if [ -f "$logs/$n.log" ]; then
			printf "make test's stage %s %s at %s; its log: %s\n" "$n" "$why" "$(date -u +%FT%TZ)" "$log"
		else
			printf "make test's stage %s %s at %s\n" "$n" "$why" "$(date -u +%FT%TZ)"
		fi >"$root/.tools/bin/$t.build-failed"
	done
}

# The load each stage puts on the machine, in half cores (2 unless named): the builds keep two cores
# busy; a go test stage keeps about one (its tests mostly wait on servers: 163 CPU seconds in 380 s
# for go-test), scripts/e2e.sh and test/grafana less. Stages start, in the order they are declared,
# while what runs adds up to at most twice the machine's cores (a stage that needs more starts when
# nothing else runs): on 2 cores, all eight test stages at once drove the load average to 25-30 and a
# Prometheus of test/e2e took 85 s to become ready; within one core over, the stages that mostly wait
# queued behind the long go test ones and the run took longer.
declare -A s_weight=([apt]=1 [llmd]=2 [go-build]=4 [ollama]=4 [grafana-npm]=1 [e2e]=1 [test-grafana]=1)
capacity=$((4 * $(nproc 2>/dev/null || echo 2)))

# run_stages: starts each stage once it may (as the machine's load allows, or one by one with
# TEST_SERIAL=1); a stage whose need failed is not run. Returns non-zero when any failed.
run_stages() {
	local -A state=() rc=() pid=() start=()
	local i n d ready blocked r pending any=0 load=0 w
	while :; do
		pending=0
		for i in "${!s_name[@]}"; do
			n=${s_name[$i]}
			case ${state[$n]:-pending} in
			pending)
				pending=1
				ready=1 blocked=
				for d in ${s_needs[$i]//,/ }; do
					case ${state[$d]:-pending} in
					done) [ "${rc[$d]}" = 0 ] || blocked=$d ;;
					*) ready=0 ;;
					esac
				done
				for d in ${s_after[$i]//,/ }; do
					[ "${state[$d]:-pending}" = done ] || ready=0
				done
				w=${s_weight[$n]:-2}
				[ $load -gt 0 ] && [ $((load + w)) -gt "$capacity" ] && ready=0
				if [ -n "$blocked" ]; then
					state[$n]=done rc[$n]=1
					say "stage $n: not run, $blocked failed"
					record "$n" 0 "not run ($blocked failed)"
					mark_build "$n" 1 "was not run ($blocked failed)"
					any=1
				elif [ $ready = 1 ]; then
					start[$n]=$SECONDS
					if [ "${TEST_SERIAL:-0}" = 1 ]; then
						say "stage $n: start"
						r=0
						run_one "${s_cmd[$i]}" "$logs/$n.times" 2>&1 | tee "$logs/$n.log" || r=$?
						state[$n]=done rc[$n]=$r
						say "stage $n: $((SECONDS - start[$n]))s$([ $r -ne 0 ] && echo ", FAILED (exit $r)")"
						record "$n" $((SECONDS - start[$n])) "$([ $r -eq 0 ] && echo ok || echo "FAIL ($r)")"
						mark_build "$n" $r "failed (exit $r)"
						[ $r -ne 0 ] && any=1
					else
						say "stage $n: start (at $((SECONDS - t_all))s; its output follows when it ends)"
						run_one "${s_cmd[$i]}" "$logs/$n.times" >"$logs/$n.log" 2>&1 &
						pid[$n]=$!
						state[$n]=running
						load=$((load + w))
					fi
				fi
				;;
			running)
				pending=1
				if ! kill -0 "${pid[$n]}" 2>/dev/null; then
					r=0
					wait "${pid[$n]}" || r=$?
					state[$n]=done rc[$n]=$r
					load=$((load - ${s_weight[$n]:-2}))
					cat "$logs/$n.log"
					say "stage $n: $((SECONDS - start[$n]))s$([ $r -ne 0 ] && echo ", FAILED (exit $r)")"
					record "$n" $((SECONDS - start[$n])) "$([ $r -eq 0 ] && echo ok || echo "FAIL ($r)")"
					mark_build "$n" $r "failed (exit $r)"
					[ $r -ne 0 ] && any=1
				fi
				;;
			esac
		done
		[ $pending = 0 ] && break
		[ "${TEST_SERIAL:-0}" = 1 ] || sleep 0.5
	done
	return $any
}

table() {
	local i
	echo
	echo "==> make test: stages (seconds each ran, they overlap; CPU seconds its processes used)"
	printf '    %-16s %8s %8s  %s\n' stage seconds cpu result
	local cpu_all=0
	for i in "${!names[@]}"; do
		printf '    %-16s %8s %8s  %s\n' "${names[$i]}" "${secs[$i]}" "${cpus[$i]}" "${results[$i]}"
		[ "${cpus[$i]}" = - ] || cpu_all=$((cpu_all + cpus[i]))
	done
	printf '    %-16s %8s %8s  (%s cores)\n' total $((SECONDS - t_all)) $cpu_all "$(nproc 2>/dev/null || echo ?)"
	if [ -s "$quiet_held" ]; then
		echo
		echo "==> timing checks on quiet cores (seconds since make test started; cores: how many its process and the programs it ran kept busy)"
		printf '    %-58s %7s %7s %7s %6s\n' test asked got held cores
		sort -t$'\t' -k3,3n "$quiet_held" |
			awk -F'\t' -v t0="$t_epoch" '$6 == "cached" { printf "    %-58s %7s %7s %7.1f %6s  (go test cached: an earlier run)\n", substr($1, 1, 58), "-", "-", $4 - $3, ($5 == "" ? "-" : $5); next }
				{ printf "    %-58s %7.0f %7.0f %7.1f %6s\n", substr($1, 1, 58), $2 - t0, $3 - t0, $4 - $3, ($5 == "" ? "-" : $5) }'
	fi
}

# The lock file testproc.Quiet takes. The stages that keep cores busy without measuring time hold it
# shared, so that the timing checks of go-test-quiet wait for them.
quiet_lock=${TMPDIR:-/tmp}/slaprobe-quiet-cores.lock
# They also run niced: they only need throughput, while go test's own short timings (a simulator's
# stall, a window's rates) need the scheduler's attention beside them.
if [ "${TEST_SERIAL:-0}" = 1 ] || ! command -v flock >/dev/null 2>&1; then
	busy=
else
	busy="flock -s '$quiet_lock' nice -n 10"
fi

# go-build compiles without linking (go list -export): go test links each test binary anyway.
stage apt "" "" "scripts/test-deps.sh apt"
stage llmd "" "" "scripts/test-deps.sh llmd"
stage go-build "" llmd "set -e; CGO_ENABLED=1 $GO list -race -test -export -deps -f '' ./...; scripts/test.sh --partition '$logs'; CGO_ENABLED=1 $GO build -trimpath -o /dev/null ./cmd/slaprobe; $GO build -o '$summary' ./test/testsummary; cd test/deploy; CGO_ENABLED=1 $GO list -test -export -deps -f '' ./...; cd ../grafana; $GO list -test -export -deps -f '' ./...; echo 'every package and test package compiled'"
stage ollama apt go-build "scripts/test-deps.sh ollama"
stage grafana-npm apt "" "scripts/test-deps.sh grafana"
# gotest ARGS: go test -race -json ARGS through test/testsummary, the timing checks deferred.
gotest="set -o pipefail; SLAPROBE_QUIET_DEFER=- CGO_ENABLED=1 $GO test -race -json $count"
tosummary="| '$summary' -defer '$deferred' -held '$quiet_held' -why '$why_log'"
stage go-test-tools go-build ollama "$gotest -p 2 -timeout 20m \$(cat '$logs/pkgs-tools') $tosummary"
stage go-test go-build ollama "$gotest -p 2 -timeout 20m \$(cat '$logs/pkgs-other') $tosummary"
stage checkrules apt ollama "$busy scripts/test.sh --stamped checkrules 'make --no-print-directory checkrules'"
stage test-e2e-go go-build ollama "$gotest -timeout 20m ./test/e2e $tosummary"
stage fuzz-short "" ollama "$busy make --no-print-directory fuzz-short"
stage test-deploy "" ollama "$busy make --no-print-directory test-deploy TEST_COUNT='$count'"
stage e2e apt,go-build ollama "$busy scripts/e2e.sh"
stage test-grafana grafana-npm ollama "cd test/grafana && $busy $GO test $count ./..."
stage go-test-quiet "" go-test,go-test-tools,test-e2e-go,checkrules,e2e,test-deploy,test-grafana,fuzz-short "scripts/test.sh --quiet-pass '$deferred' '$summary' '$quiet_held' '$why_log'"

# missing_summary: what could not be installed (.tools/apt-missing, written by the apt stage) and the
# tests that failed because a program was missing (testproc and test/browser end such a failure with
# "(SLAPROBE_REQUIRE_DEPS=1)"), each under the name go test gave it.
missing_summary() {
	local f=$root/.tools/apt-missing
	if [ -s "$f" ]; then
		echo
		echo "==> Debian packages apt could not install (scripts/test-deps.sh apt); the tests that need them fail:"
		awk -F'\t' '{ printf "    %s (%s)\n      needed by: %s\n      instead: %s\n", $1, $2, $3, $4 }' "$f"
	fi
	local failed_for_missing
	failed_for_missing=$(cat "$logs"/*.log 2>/dev/null | awk '
		/^ *--- FAIL: / { name = $3 }
		/\(SLAPROBE_REQUIRE_DEPS=1\)/ { sub(/^[ \t]+/, ""); print "    " (name == "" ? "" : name ": ") $0 }' | sort -u)
	if [ -n "$failed_for_missing" ]; then
		echo
		echo "==> tests that failed because a program they need is missing:"
		echo "$failed_for_missing"
	fi
}

# why_summary: each failed test's last logged lines, after the tables, so that the end of make test's
# output says why (its whole output is further up, in its stage's).
why_summary() {
	[ -s "$why_log" ] || return 0
	echo
	echo "==> the tests that failed, and the last lines each logged (the first line of each log or error; its whole output is above)"
	head -c 8000 "$why_log"
}

rc=0
run_stages || rc=1
table
missing_summary
why_summary
if [ $rc -ne 0 ]; then
	echo "==> make test: FAILED in stage(s): ${failed[*]}"
	exit 1
fi
echo "==> make test: all passed"
