// Package e2e holds end-to-end tests that run the slaprobe binary next to real third-party programs
// (Prometheus) on loopback. They need those programs installed (`make test-deps`) and skip without
// them, unless SLAPROBE_REQUIRE_DEPS=1, where they fail instead. They also skip under -short.
package e2e
