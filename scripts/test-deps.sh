#!/usr/bin/env bash
# Installs what the tests need when it is missing, and does nothing slow when it is already there:
#   - promtool (Debian package prometheus), amtool (prometheus-alertmanager), chromium, curl,
#     systemd-analyze (systemd), node and npm (nodejs, npm);
#   - llm-d-inference-sim, built from the version pinned in test/tools/go.mod into .tools/bin/;
#   - Grafana's transformation code (@grafana/data, pinned in test/grafana/transforms/package-lock.json),
#     installed with npm ci into test/grafana/transforms/node_modules.
# Usage: scripts/test-deps.sh [apt|llmd|grafana|all]   (default: all)
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
what=${1:-all}

say() { printf '==> %s\n' "$*"; }
warn() { printf '==> WARNING: %s\n' "$*" >&2; }

# ---------------------------------------------------------------------------------------------
# Debian packages. Installed only when a command is missing; apt-get update runs once, and only then.
apt_deps() {
	local -a missing=()
	command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
	command -v amtool >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
	command -v chromium >/dev/null 2>&1 || missing+=(chromium)
	command -v curl >/dev/null 2>&1 || missing+=(curl) # scripts/e2e.sh
	command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd) # test/deploy: the unit file
	command -v node >/dev/null 2>&1 || missing+=(nodejs)             # test/grafana/transforms
	command -v npm >/dev/null 2>&1 || missing+=(npm)
	if [ ${#missing[@]} -eq 0 ]; then
		say "apt: promtool, amtool, chromium, curl, systemd-analyze, node and npm already installed"
		return 0
	fi

	local -a sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
			sudo=(sudo -n)
		else
			warn "missing ${missing[*]} and not root: install them with 'apt-get install ${missing[*]}'; tests that need them will skip"
			return 0
		fi
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		warn "missing ${missing[*]} and no apt-get here: install them by hand; tests that need them will skip"
		return 0
	fi

	say "apt: installing ${missing[*]}"
	# policy-rc.d keeps the packages' services (prometheus, alertmanager) from being started.
	local policy=/usr/sbin/policy-rc.d created_policy=
	if [ ! -e "$policy" ] && [ ${#sudo[@]} -eq 0 ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
	fi
	local rc=0
	{
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
			"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
				-o Dpkg::Use-Pty=0 "${missing[@]}" >/dev/null
	} || rc=$?
	[ -n "$created_policy" ] && rm -f "$policy"
	if [ $rc -ne 0 ]; then
		echo "apt-get failed (rc=$rc) installing ${missing[*]}" >&2
		return $rc
	fi
	for c in promtool amtool chromium curl systemd-analyze node npm; do
		command -v "$c" >/dev/null 2>&1 || { echo "$c still missing after apt-get install" >&2; return 1; }
	done
	say "apt: installed ${missing[*]}"
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

	say "building llm-d-inference-sim $version into .tools/bin (first build takes a few minutes)"
	mkdir -p "$bin"
	local start=$SECONDS
	# -mod=readonly: the build uses exactly what test/tools/go.sum pins, or fails.
	(cd "$tools" && GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off CGO_ENABLED=${CGO_ENABLED:-1} \
		go build -o "$exe.tmp" github.com/llm-d/llm-d-inference-sim/cmd/llm-d-inference-sim)
	mv -f "$exe.tmp" "$exe"
	printf '%s\n' "$want" >"$stamp"
	say "built llm-d-inference-sim $version in $((SECONDS - start))s: $exe"
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
	say "npm ci in test/grafana/transforms (@grafana/data, pinned)"
	local start=$SECONDS
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
	printf '%s\n' "$want" >"$stamp"
	say "installed @grafana/data in $((SECONDS - start))s"
}

case $what in
apt) apt_deps ;;
llmd) llmd_dep ;;
grafana) grafana_dep ;;
all)
	apt_deps
	llmd_dep
	grafana_dep
	;;
*)
	echo "usage: $0 [apt|llmd|grafana|all]" >&2
	exit 2
	;;
esac
