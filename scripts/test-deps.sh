#!/usr/bin/env bash
# Installs what the tests need when it is missing, and does nothing slow when it is already there:
#   - promtool (Debian package prometheus), amtool (prometheus-alertmanager), chromium, curl,
#     systemd-analyze (systemd), node and npm (nodejs, npm);
#   - llm-d-inference-sim, built from the version pinned in test/tools/go.mod into .tools/bin/;
#   - Ollama (a real engine: llama.cpp's ggml on CPU) and tinymodel, the generator of the tiny model
#     it serves, built from the versions pinned in test/tools/ollama/go.mod into .tools/bin/; the
#     build needs g++ and the headers of nlohmann-json3-dev and libstb-dev;
#   - Grafana's transformation code (@grafana/data, pinned in test/grafana/transforms/package-lock.json),
#     installed with npm ci into test/grafana/transforms/node_modules.
# Usage: scripts/test-deps.sh [apt|llmd|ollama|grafana|all]   (default: all)
#        scripts/test-deps.sh ollama-flags                     prints the flags Ollama is built with
#        scripts/test-deps.sh ollama-flags-for GOARCH NATIVE EXTRA < OPTIONS
#                                                              the same from a given compiler's option
#                                                              list (the test's fixtures)
#        scripts/test-deps.sh check-ollama-flags [FLAGS]       fails when FLAGS (default: those) would
#                                                              break Ollama's link (an __AMX_* macro)
# SLAPROBE_OLLAMA_EXTRA_FLAGS adds C/C++ flags to Ollama's build, after -march=native.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
what=${1:-all}

say() { printf '==> %s\n' "$*"; }
warn() { printf '==> WARNING: %s\n' "$*" >&2; }

# ---------------------------------------------------------------------------------------------
# Debian packages. Each is installed on its own, and only when what it provides is missing, so that
# one apt cannot install (Ubuntu's chromium is a snap; universe not enabled) leaves the others in and
# fails only the tests that need it. apt-get update runs once, and only when something is missing.
# What could not be installed is listed in .tools/apt-missing (package, why, what needs it, what to
# do instead), which make test prints in its summary; a later run that installs it removes the line.

# apt_table: one package a line, |-separated: the package; what shows it is there (commands, any one
# of them on PATH, or a file when it starts with /); what needs it; what to do where apt cannot
# install it.
apt_table() {
	cat <<'EOF'
prometheus|promtool|make checkrules, scripts/e2e.sh, test/e2e, test/deploy|on Ubuntu enable universe (add-apt-repository universe); elsewhere put promtool and prometheus from Prometheus' release tarball (prometheus.io/download) on PATH
prometheus-alertmanager|amtool|make checkrules, test/e2e (paging)|on Ubuntu enable universe; elsewhere put amtool, and alertmanager as prometheus-alertmanager, from Alertmanager's release tarball on PATH
chromium|chromium chromium-browser|the headless-browser tests (test/browser: the status page, report.html)|Ubuntu ships Chromium only as a snap (its chromium-browser package installs the snap, which needs snapd: snap install chromium, then /snap/bin/chromium); or install Google Chrome (google-chrome-stable) or any Chromium build; then set SLAPROBE_CHROMIUM to the binary
curl|curl|scripts/e2e.sh|any curl on PATH
systemd|systemd-analyze|test/deploy (the systemd unit)|any systemd-analyze on PATH
nodejs|node|test/grafana, test/e2e (Grafana's transformations)|Node.js 20 or later (nodejs.org, NodeSource) on PATH
npm|npm|npm ci of @grafana/data (test/grafana)|npm comes with Node.js from nodejs.org
g++|g++|the Ollama build (test/ollama and every test that runs Ollama)|any g++ on PATH (go env CXX)
nlohmann-json3-dev|/usr/include/nlohmann/json.hpp|the Ollama build|on Ubuntu enable universe; elsewhere copy nlohmann/json.hpp (github.com/nlohmann/json releases) to /usr/include/nlohmann/
libstb-dev|/usr/include/stb/stb_image.h|the Ollama build|on Ubuntu enable universe; elsewhere copy stb_image.h (github.com/nothings/stb) to /usr/include/stb/
EOF
}

# apt_field PACKAGE N: field N of the package's line in apt_table.
apt_field() {
	apt_table | awk -F'|' -v p="$1" -v n="$2" '$1 == p { print $n; exit }'
}

# apt_has WHAT: the package's command (any of several) or file is there. SLAPROBE_CHROMIUM, when it
# names an executable, stands for chromium (test/browser looks there first).
apt_has() {
	local c
	for c in $1; do
		case $c in
		/*) [ -f "$c" ] && return 0 ;;
		*) command -v "$c" >/dev/null 2>&1 && return 0 ;;
		esac
	done
	case " $1 " in *" chromium "*) [ -n "${SLAPROBE_CHROMIUM:-}" ] && [ -x "$SLAPROBE_CHROMIUM" ] && return 0 ;; esac
	return 1
}

apt_deps() {
	local missing_file=$root/.tools/apt-missing
	local -a missing=() sudo=() failed=()
	local pkg has why="" out
	while IFS="|" read -r pkg has _; do
		apt_has "$has" || missing+=("$pkg")
	done < <(apt_table)
	mkdir -p "$root/.tools"
	if [ ${#missing[@]} -eq 0 ]; then
		rm -f "$missing_file"
		say "apt: promtool, amtool, chromium, curl, systemd-analyze, node, npm, g++ and Ollama's headers already installed"
		return 0
	fi

	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
			sudo=(sudo -n)
		else
			why="not root and no passwordless sudo: apt-get install ${missing[*]}"
		fi
	fi
	if [ -z "$why" ] && ! command -v apt-get >/dev/null 2>&1; then
		why="no apt-get here"
	fi
	if [ -n "$why" ]; then
		failed=("${missing[@]}")
	else
		say "apt: installing ${missing[*]}, one package at a time"
		# policy-rc.d keeps the packages' services (prometheus, alertmanager) from being started.
		local policy=/usr/sbin/policy-rc.d created_policy=
		if [ ! -e "$policy" ] && [ ${#sudo[@]} -eq 0 ]; then
			printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
		fi
		if ! out=$("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq 2>&1); then
			warn "apt-get update failed; installing from the package lists already here: $(tail -n 2 <<<"$out" | paste -sd' ')"
		fi
		for pkg in "${missing[@]}"; do
			if out=$("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
				-o Dpkg::Use-Pty=0 "$pkg" 2>&1) && apt_has "$(apt_field "$pkg" 2)"; then
				say "apt: installed $pkg"
			else
				failed+=("$pkg")
				warn "apt-get install $pkg failed: $(grep -E '^(E:|dpkg:)' <<<"$out" | tail -n 2 | paste -sd' ')"
			fi
		done
		[ -n "$created_policy" ] && rm -f "$policy"
		why="apt-get install failed"
	fi

	if [ ${#failed[@]} -eq 0 ]; then
		rm -f "$missing_file"
		return 0
	fi
	: >"$missing_file.tmp"
	for pkg in "${failed[@]}"; do
		printf '%s\t%s\t%s\t%s\n' "$pkg" "$why" "$(apt_field "$pkg" 3)" "$(apt_field "$pkg" 4)" >>"$missing_file.tmp"
		warn "$pkg not installed ($why). Needed by: $(apt_field "$pkg" 3). Instead: $(apt_field "$pkg" 4)." \
			"The tests that need it fail naming it (make test) or skip (go test); everything else runs."
	done
	mv -f "$missing_file.tmp" "$missing_file"
	return 0
}

# ---------------------------------------------------------------------------------------------
# Built tools are also kept by version outside the checkout, in $SLAPROBE_TOOLS_CACHE (default
# ~/.cache/slaprobe/tools/<hash of the stamp>/), so that a fresh clone on a machine that built them once
# copies them instead of building again. A stamp names the pins (and flags), so a new pin misses.
tools_cache=${SLAPROBE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slaprobe/tools}

# from_cache STAMP_CONTENT BIN_DIR NAME...: copies the cached binaries into BIN_DIR; fails on a miss.
from_cache() {
	local want=$1 bin=$2 dir n
	shift 2
	dir=$tools_cache/$(printf '%s' "$want" | sha256sum | cut -c1-16)
	for n in "$@"; do [ -x "$dir/$n" ] || return 1; done
	mkdir -p "$bin"
	for n in "$@"; do cp -f "$dir/$n" "$bin/$n.tmp" && mv -f "$bin/$n.tmp" "$bin/$n" || return 1; done
	say "copied $* from the tool cache $dir"
}

# to_cache STAMP_CONTENT BIN_DIR NAME...: keeps the built binaries (best effort).
to_cache() {
	local want=$1 bin=$2 dir n
	shift 2
	dir=$tools_cache/$(printf '%s' "$want" | sha256sum | cut -c1-16)
	mkdir -p "$dir" 2>/dev/null || return 0
	for n in "$@"; do cp -f "$bin/$n" "$dir/$n.tmp" 2>/dev/null && mv -f "$dir/$n.tmp" "$dir/$n" || return 0; done
}

# ---------------------------------------------------------------------------------------------
# llm-d-inference-sim. `go install pkg@version` does not work for it here, so test/tools is a module
# of its own that requires it (tools.go, build tag `tools`) and pins every dependency in go.sum.
llmd_dep() {
	local tools=$root/test/tools bin=$root/.tools/bin
	local exe=$bin/llm-d-inference-sim stamp=$bin/llm-d-inference-sim.stamp
	local version sum want
	version=$(awk '{ for (i = 1; i < NF; i++) if ($i == "github.com/llm-d/llm-d-inference-sim") { print $(i + 1); exit } }' "$tools/go.mod")
	if [ -z "$version" ]; then
		echo "test/tools/go.mod does not require github.com/llm-d/llm-d-inference-sim" >&2
		return 1
	fi
	# The stamp changes with the pinned version and with any other pinned dependency.
	sum=$(cat "$tools/go.mod" "$tools/go.sum" | sha256sum | cut -c1-16)
	want="llm-d-inference-sim $version $sum"
	if [ -x "$exe" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		say "llm-d-inference-sim $version already built: $exe"
		return 0
	fi

	if from_cache "$want" "$bin" llm-d-inference-sim; then
		printf '%s\n' "$want" >"$stamp"
		return 0
	fi
	say "building llm-d-inference-sim $version into .tools/bin (first build takes a few minutes)"
	mkdir -p "$bin"
	local start=$SECONDS
	# -mod=readonly: the build uses exactly what test/tools/go.sum pins, or fails.
	(cd "$tools" && GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off CGO_ENABLED=${CGO_ENABLED:-1} \
		go build -o "$exe.tmp" github.com/llm-d/llm-d-inference-sim/cmd/llm-d-inference-sim)
	mv -f "$exe.tmp" "$exe"
	printf '%s\n' "$want" >"$stamp"
	to_cache "$want" "$bin" llm-d-inference-sim
	say "built llm-d-inference-sim $version in $((SECONDS - start))s: $exe"
}

# ---------------------------------------------------------------------------------------------
# Ollama, a real inference engine, and tinymodel, which writes the tiny model it serves. One module,
# test/tools/ollama, pins both (and gen2brain/malgo, whose module ships the miniaudio.h that Ollama's
# module zip leaves out). -O3 -march=native matters: without it ggml is built for plain x86-64 and
# runs about four times slower (test/ollama/README.md). The stamp holds the pins, the flags and
# the CPU's features, since a -march=native binary is only good on the CPU it was built for.

# ollama_flags_for GOARCH NATIVE EXTRA < OPTIONS: the C and C++ flags of Ollama's build, from what the
# compiler accepts. A pure function (its input is its arguments and stdin), so that the test feeds it
# the option lists of compilers and machines that are not here (test/ollama/flags_test.go):
#   GOARCH   the architecture Ollama is built for (go env GOARCH);
#   NATIVE   the CPU-tuning flags the compiler accepted on a try-compile, in any order: -march=native
#            and/or -mcpu=native (none on a cross compiler, which knows no "native");
#   EXTRA    $SLAPROBE_OLLAMA_EXTRA_FLAGS;
#   OPTIONS  the compiler's target options, one a line, as `gcc -Q --help=target` prints them.
# The flags: -O3, the native flag (-march=native on x86-64, where ggml's own build uses it;
# -mcpu=native first elsewhere: on arm64 ggml uses it, and it sets the tuning too), EXTRA, then, on
# x86-64 only, -mno- of every -mamx-* option the compiler lists, sorted, so the result does not
# depend on the order of the list. On a CPU with AMX (Intel Xeon since Sapphire Rapids),
# -march=native defines __AMX_INT8__, and with it ggml-cpu.cpp calls ggml_backend_amx_buffer_type(),
# whose sources (ggml-cpu/amx/) are not part of Ollama's cgo build: the link fails with an undefined
# reference. Each AMX option must be named (in gcc 12, -mno-amx-tile alone leaves __AMX_INT8__
# defined); a compiler that lists none cannot turn AMX on either, and gets no -mno-amx-* (it would
# reject them, as every arm64 compiler does). AMX only speeds up ggml's quantized matrix products on
# such CPUs, which the tests' tiny model does not need; AVX-512 and the rest stay on.
ollama_flags_for() {
	local arch=$1 native=$2 extra=${3:-} pick="" f amx_off=""
	local -a prefer=(-march=native -mcpu=native)
	[ "$arch" = amd64 ] || prefer=(-mcpu=native -march=native)
	for f in "${prefer[@]}"; do
		case " $native " in *" $f "*)
			pick=$f
			break
			;;
		esac
	done
	if [ "$arch" = amd64 ]; then
		amx_off=$(awk '$1 ~ /^-mamx-[a-z0-9-]+$/ { sub(/^-m/, "-mno-", $1); print $1 }' | LC_ALL=C sort -u | paste -sd' ')
	else
		cat >/dev/null
	fi
	printf '%s\n' "-O3${pick:+ $pick}${extra:+ $extra}${amx_off:+ $amx_off}"
}

# accepts COMPILER FLAG: the compiler compiles an empty C++ unit with FLAG.
accepts() {
	# shellcheck disable=SC2086 # COMPILER may carry flags of its own (go env CXX)
	$1 "$2" -x c++ -c -o /dev/null - </dev/null >/dev/null 2>&1
}

# target_options COMPILER: the compiler's target options, one a line. gcc lists them
# (-Q --help=target); a compiler that does not (clang) gets a list of the AMX options it accepts on
# a try-compile, which are all ollama_flags_for needs from it.
target_options() {
	local cxx=$1 opts x
	# shellcheck disable=SC2086
	opts=$($cxx -Q --help=target 2>/dev/null) || opts=
	if grep -q '^ *-m' <<<"$opts"; then
		printf '%s\n' "$opts"
		return
	fi
	for x in amx-avx512 amx-bf16 amx-complex amx-fp16 amx-fp8 amx-int8 amx-movrs amx-tf32 amx-tile amx-transpose; do
		accepts "$cxx" "-m$x" && printf '  -m%s [accepted]\n' "$x"
	done
	return 0
}

# ollama_flags: ollama_flags_for fed what this machine's C++ compiler (go env CXX) accepts.
ollama_flags() {
	local cxx arch native="" f
	cxx=$(go env CXX 2>/dev/null) || cxx=g++
	cxx=${cxx:-g++}
	arch=$(go env GOARCH 2>/dev/null) || arch=$(uname -m)
	for f in -march=native -mcpu=native; do
		accepts "$cxx" "$f" && native="$native $f"
	done
	target_options "$cxx" | ollama_flags_for "$arch" "$native" "${SLAPROBE_OLLAMA_EXTRA_FLAGS:-}"
}

# check_ollama_flags FLAGS: the guard that keeps that link error from coming back. It asks the
# compiler which macros FLAGS define (no build: a tenth of a second) and fails when any __AMX_* is
# among them. Run on every make test, whether Ollama is built or copied from the cache.
check_ollama_flags() {
	local flags=$1 cxx macros
	cxx=$(go env CXX 2>/dev/null) || cxx=g++
	cxx=${cxx:-g++}
	# shellcheck disable=SC2086 # FLAGS is a list of flags
	macros=$($cxx $flags -x c++ -dM -E - </dev/null) || {
		echo "Ollama's flags '$flags': $cxx rejects them" >&2
		return 1
	}
	macros=$(awk '$2 ~ /^__AMX_/ { print $2 }' <<<"$macros" | sort | paste -sd' ')
	if [ -n "$macros" ]; then
		echo "Ollama's C/C++ flags '$flags' define $macros: ggml-cpu.cpp then calls the AMX buffer type," \
			"whose sources Ollama's cgo build does not compile, and the link fails (undefined reference to" \
			"ggml_backend_amx_buffer_type). Turn AMX off after every other flag (ollama_flags in $0)." >&2
		return 1
	fi
	say "Ollama's flags define no __AMX_* macro: $flags"
}

ollama_dep() {
	# The header goes to a directory outside the checkout: the include path is part of the cgo flags, and
	# with the same flags in every clone the Go build cache serves a second clone's build in seconds.
	local tools=$root/test/tools/ollama bin=$root/.tools/bin inc=${XDG_CACHE_HOME:-$HOME/.cache}/slaprobe/include
	local stamp=$bin/ollama.stamp version sum cpu want
	version=$(awk '$1 == "github.com/ollama/ollama" { print $2; exit }' "$tools/go.mod")
	if [ -z "$version" ]; then
		echo "test/tools/ollama/go.mod does not require github.com/ollama/ollama" >&2
		return 1
	fi
	local flags cxx
	cxx=$(go env CXX 2>/dev/null) || cxx=g++
	cxx=${cxx:-g++}
	if ! command -v "${cxx%% *}" >/dev/null 2>&1; then
		echo "building Ollama needs a C++ compiler, $cxx (go env CXX), and there is none: apt-get install g++ (scripts/test-deps.sh apt)" >&2
		return 1
	fi
	flags=$(ollama_flags)
	check_ollama_flags "$flags" || return 1
	cpu=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sha256sum | cut -c1-12)
	sum=$(cat "$tools/go.mod" "$tools/go.sum" "$tools"/cmd/tinymodel/*.go | sha256sum | cut -c1-16)
	want="ollama $version $sum cpu=$cpu flags=$flags"
	if [ -x "$bin/ollama" ] && [ -x "$bin/tinymodel" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		say "ollama $version and tinymodel already built: $bin/ollama"
		return 0
	fi
	if from_cache "$want" "$bin" ollama tinymodel; then
		printf '%s\n' "$want" >"$stamp"
		return 0
	fi
	local h
	for h in /usr/include/nlohmann/json.hpp /usr/include/stb/stb_image.h; do
		if [ ! -f "$h" ]; then
			echo "building Ollama needs $h: apt-get install nlohmann-json3-dev libstb-dev (scripts/test-deps.sh apt)" >&2
			return 1
		fi
	done
	say "building ollama $version and tinymodel into .tools/bin (first build takes several minutes)"
	mkdir -p "$bin" "$inc/miniaudio"
	local start=$SECONDS malgo
	export GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off CGO_ENABLED=1
	malgo=$(cd "$tools" && go mod download -json github.com/gen2brain/malgo | awk -F'"' '$2 == "Dir" { print $4 }')
	if [ ! -f "$malgo/miniaudio.h" ]; then
		echo "miniaudio.h not found in the gen2brain/malgo module ($malgo)" >&2
		return 1
	fi
	cp -f "$malgo/miniaudio.h" "$inc/miniaudio/miniaudio.h"
	(cd "$tools" && CGO_CPPFLAGS="-I$inc" CGO_CFLAGS="$flags" CGO_CXXFLAGS="$flags" \
		go build -ldflags "-X github.com/ollama/ollama/version.Version=${version#v}" -o "$bin/ollama.tmp" github.com/ollama/ollama)
	(cd "$tools" && go build -o "$bin/tinymodel.tmp" ./cmd/tinymodel)
	mv -f "$bin/ollama.tmp" "$bin/ollama"
	mv -f "$bin/tinymodel.tmp" "$bin/tinymodel"
	printf '%s\n' "$want" >"$stamp"
	to_cache "$want" "$bin" ollama tinymodel
	say "built ollama $version and tinymodel in $((SECONDS - start))s: $bin/ollama"
}

# ---------------------------------------------------------------------------------------------
# @grafana/data for test/grafana/transforms/check.mjs: npm ci from the lock file, again only when the
# lock changed (the stamp holds its hash).
grafana_dep() {
	local dir=$root/test/grafana/transforms
	local stamp=$dir/node_modules/.slaprobe-stamp want
	if ! command -v npm >/dev/null 2>&1; then
		warn "npm missing: the Grafana transformation check will skip (apt-get install nodejs npm)"
		return 0
	fi
	local major
	major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
	if [ "$major" -lt 20 ]; then
		warn "node $(node --version 2>/dev/null): test/grafana/transforms is tested on Node.js 20 or later (package.json engines)"
	fi
	want=$(sha256sum "$dir/package-lock.json" | cut -c1-16)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		say "@grafana/data already installed in test/grafana/transforms"
		return 0
	fi
	# A fresh clone on a machine that installed this lock before unpacks the tree kept in the tool
	# cache (a second) instead of running npm ci again (20 s or more).
	local cached=$tools_cache/npm-$want-node$major.tar
	local start=$SECONDS
	if [ -f "$cached" ] && rm -rf "$dir/node_modules" && tar -C "$dir" -xf "$cached" 2>/dev/null; then
		printf '%s\n' "$want" >"$stamp"
		say "@grafana/data copied from the tool cache ($cached) in $((SECONDS - start))s"
		return 0
	fi
	say "npm ci in test/grafana/transforms (@grafana/data, pinned)"
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
	printf '%s\n' "$want" >"$stamp"
	mkdir -p "$tools_cache" && tar -C "$dir" -cf "$cached.tmp$$" node_modules && mv "$cached.tmp$$" "$cached" ||
		warn "could not keep node_modules in the tool cache $tools_cache"
	say "installed @grafana/data in $((SECONDS - start))s"
}

# built NAME...: the programs are in .tools/bin as the pins ask, so a marker left by a failed build of
# make test (.tools/bin/NAME.build-failed, scripts/test.sh) no longer applies.
built() {
	local n
	for n in "$@"; do rm -f "$root/.tools/bin/$n.build-failed"; done
}

case $what in
apt) apt_deps ;;
llmd)
	llmd_dep
	built llm-d-inference-sim
	;;
ollama)
	ollama_dep
	built ollama tinymodel
	;;
ollama-flags) ollama_flags ;;
ollama-flags-for) ollama_flags_for "${2:?GOARCH}" "${3:-}" "${4:-}" ;;
check-ollama-flags) check_ollama_flags "${2:-$(ollama_flags)}" ;;
grafana) grafana_dep ;;
all)
	apt_deps
	llmd_dep
	built llm-d-inference-sim
	ollama_dep
	built ollama tinymodel
	grafana_dep
	;;
*)
	echo "usage: $0 [apt|llmd|ollama|grafana|all|ollama-flags|ollama-flags-for GOARCH NATIVE EXTRA|check-ollama-flags [FLAGS]]" >&2
	exit 2
	;;
esac
