// Package buildinfo fills the version of a binary built without the
// Makefile's -ldflags (go build, go install, go run) from the build
// information the Go toolchain embeds, so that --version, the landing page
// and slaprobe_build_info never show empty strings. Importing the package
// is enough: its init runs before any package variable of main.
//
// What the toolchain embeds, and so what this gives:
//   - go install …@v1.2.3: version v1.2.3;
//   - go build in a git checkout: a pseudo-version such as
//     v0.0.0-20261123195555-c1efdeb2a62e (+dirty with local changes) and the
//     revision;
//   - go run, or go build with -buildvcs=false (the Makefile's setting, for
//     clones owned by another user): no version at all; the version is then
//     "devel" and the revision "unknown".
//
// The Makefile and the Dockerfile set every field through -ldflags; a field
// set there is never replaced.
package buildinfo

import (
	"runtime/debug"
	"strings"

	"github.com/prometheus/common/version"
)

func init() { Fill() }

// Fill sets each empty variable of prometheus/common/version from the
// binary's build information.
func Fill() {
	bi, _ := debug.ReadBuildInfo()
	apply(bi)
}

// Vars are the variables Fill sets.
type Vars struct {
	Version, Revision, Branch, BuildUser, BuildDate string
}

func apply(bi *debug.BuildInfo) {
	v := Vars{version.Version, version.Revision, version.Branch, version.BuildUser, version.BuildDate}
	v = From(bi, v)
	version.Version, version.Revision, version.Branch, version.BuildUser, version.BuildDate =
		v.Version, v.Revision, v.Branch, v.BuildUser, v.BuildDate
}

// From fills the empty fields of v from bi (which may be nil).
func From(bi *debug.BuildInfo, v Vars) Vars {
	settings := map[string]string{}
	mainVersion := ""
	if bi != nil {
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		mainVersion = bi.Main.Version
	}
	rev := settings["vcs.revision"]
	if rev != "" && settings["vcs.modified"] == "true" {
		rev += "-modified"
	}
	if v.Version == "" {
		switch {
		case mainVersion != "" && mainVersion != "(devel)":
			v.Version = mainVersion
		case rev != "":
			v.Version = "devel-" + shortRev(rev)
		default:
			v.Version = "devel"
		}
	}
	if v.Revision == "" {
		v.Revision = rev
		if rev == "" {
			v.Revision = "unknown"
		}
	}
	if v.Branch == "" {
		v.Branch = "unknown" // not in the build information
	}
	if v.BuildUser == "" {
		v.BuildUser = "unknown"
	}
	if v.BuildDate == "" {
		// The commit time is what the toolchain records; say so.
		if t := settings["vcs.time"]; t != "" {
			v.BuildDate = "commit " + t
		} else {
			v.BuildDate = "unknown"
		}
	}
	return v
}

func shortRev(rev string) string {
	base, mod := strings.CutSuffix(rev, "-modified")
	if len(base) > 12 {
		base = base[:12]
	}
	if mod {
		return base + "-modified"
	}
	return base
}
