package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/slaprobe/slaprobe/prober"
)

// Flags are the quick command-line settings that make a config without a
// file, or adjust the one in the file.
//
// Without a file, they are the whole config: one target per TargetURL, with
// model TargetModel (empty: auto-detect), probing Scenarios (default: the
// default four) with every other setting at its default.
//
// With a file:
//   - TargetURLs add targets after the file's; their names (host:port) must
//     not clash with the file's targets;
//   - TargetModel and TargetName set the model and name of those added
//     targets only;
//   - Scenarios replaces global.scenarios, so it applies to every target
//     that does not list its own scenarios.
type Flags struct {
	TargetURLs  []string
	TargetModel string
	// TargetName names the target of a single TargetURL (default host:port).
	TargetName string
	// TargetAPI is the API of the TargetURL targets (default chat).
	TargetAPI string
	// Scenarios may hold comma-separated lists: "chatbot,rag".
	Scenarios []string
}

// IsZero reports whether no quick flag is set.
func (f Flags) IsZero() bool {
	return len(f.TargetURLs) == 0 && f.TargetModel == "" && f.TargetName == "" && f.TargetAPI == "" && len(f.scenarios()) == 0
}

func (f Flags) scenarios() []string {
	var out []string
	for _, s := range f.Scenarios {
		for _, name := range strings.Split(s, ",") {
			if name = strings.TrimSpace(name); name != "" {
				out = append(out, name)
			}
		}
	}
	return out
}

func (c *Config) applyFlags(f Flags) error {
	if f.TargetModel != "" && len(f.TargetURLs) == 0 {
		return errors.New("--target.model needs --target.url: it sets the model of the targets given on the command line")
	}
	if f.TargetAPI != "" && len(f.TargetURLs) == 0 {
		return errors.New("--target.api needs --target.url: it sets the API of the targets given on the command line")
	}
	if f.TargetAPI != "" && !prober.API(f.TargetAPI).Valid() {
		return fmt.Errorf("--target.api=%q; expected %s", f.TargetAPI, prober.APIList())
	}
	if f.TargetName != "" && len(f.TargetURLs) != 1 {
		return fmt.Errorf("--target.name needs exactly one --target.url, got %d", len(f.TargetURLs))
	}
	if s := f.scenarios(); len(s) > 0 {
		c.Global.Scenarios = s
		c.scenariosFlag = true
	}
	for _, u := range f.TargetURLs {
		t := DefaultTargetConfig
		t.URL = u
		t.Model = f.TargetModel
		t.Name = f.TargetName
		if f.TargetAPI != "" {
			t.API = prober.API(f.TargetAPI)
		}
		t.fromFlag = true
		c.TargetConfigs = append(c.TargetConfigs, t)
	}
	return nil
}
