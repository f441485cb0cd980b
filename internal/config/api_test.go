package config

import (
	"path/filepath"
	"testing"

	"github.com/slaprobe/slaprobe/prober"
)

// TestEveryTargetHasAnAPI: the API's default (chat) is resolved here, where the config and the flags
// are read, as every other default is, so that no target leaves config without one: the prober
// rejects an empty API (prober.TestPrepareRejectsEmptyAPI) instead of guessing it at each use. Every
// way a prober.Target comes out of config is covered: the file, the quick flags (alone, as `slaprobe
// bench` and `slaprobe demo` use them, and beside a file), file_sd, and /probe's address and
// configured-name forms.
func TestEveryTargetHasAnAPI(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "sd.yml"), `[{targets: ["10.0.0.1:8000"]}]`)
	file := func(body string) string {
		p := filepath.Join(t.TempDir(), "slaprobe.yml")
		writeFile(t, p, body)
		return p
	}
	sdFile := func(api string) string {
		return file("file_sd_configs:\n  - files: [" + filepath.Join(dir, "sd.yml") + "]\n" + api)
	}
	type probe struct{ target, scenario string }
	cases := []struct {
		name  string
		path  string
		flags Flags
		probe *probe // nil: every target of Targets()
		want  prober.API
	}{
		{"file, no api", file("targets: [{url: http://a:8000}]"), Flags{}, nil, prober.APIChat},
		{"file, api empty", file("targets: [{url: http://a:8000, api: ''}]"), Flags{}, nil, prober.APIChat},
		{"file, api messages", file("targets: [{url: http://a:8000, api: messages}]"), Flags{}, nil, prober.APIMessages},
		{"flags alone (bench, run)", "", Flags{TargetURLs: []string{"http://a:8000"}}, nil, prober.APIChat},
		{"flags alone, --target.api", "", Flags{TargetURLs: []string{"http://a:8000"}, TargetAPI: "responses"}, nil, prober.APIResponses},
		{"demo's flags", "", Flags{TargetURLs: []string{"http://127.0.0.1:1"}, TargetName: "sim", Scenarios: prober.DefaultScenarios}, nil, prober.APIChat},
		{"flags beside a file", file("targets: [{url: http://a:8000, api: chat}]"), Flags{TargetURLs: []string{"http://b:8000"}}, nil, prober.APIChat},
		{"file_sd, no api", sdFile(""), Flags{}, nil, prober.APIChat},
		{"file_sd, api completions", sdFile("    api: completions\n"), Flags{}, nil, prober.APICompletions},
		{"/probe address, probe.allowed_targets only", file("targets: [{url: http://a:8000}]\nprobe: {allowed_targets: [10.0.0.0/8]}"), Flags{}, &probe{"10.0.0.9:8000", "chatbot"}, prober.APIChat},
		{"/probe address, probe.api", file("targets: [{url: http://a:8000}]\nprobe: {api: completions, allowed_targets: ['http://10.0.0.9:8000']}"), Flags{}, &probe{"http://10.0.0.9:8000/v1", "chatbot"}, prober.APICompletions},
		{"/probe configured target", file("targets: [{url: http://a:8000, name: a}]\nprobe: {api: completions}"), Flags{}, &probe{"a", "chatbot"}, prober.APIChat},
		{"/probe flag target", "", Flags{TargetURLs: []string{"http://a:8000"}, TargetAPI: "messages"}, &probe{"a:8000", "chatbot"}, prober.APIMessages},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The daemon and the demo load through SafeConfig, bench and check-config through
			// LoadWithFlags: both are checked.
			sc := NewSafeConfig(c.flags)
			if _, err := sc.Reload(c.path); err != nil {
				t.Fatalf("Reload: %v", err)
			}
			direct, err := LoadWithFlags(c.path, c.flags)
			if err != nil {
				t.Fatalf("LoadWithFlags: %v", err)
			}
			for _, cfg := range []*Config{sc.Get(), direct} {
				var targets []prober.Target
				if c.probe != nil {
					tg, _, err := cfg.ProbeTarget(c.probe.target, c.probe.scenario)
					if err != nil {
						t.Fatalf("ProbeTarget(%q, %q): %v", c.probe.target, c.probe.scenario, err)
					}
					targets = append(targets, tg)
				} else if targets, err = cfg.Targets(); err != nil {
					t.Fatal(err)
				}
				if len(targets) == 0 {
					t.Fatal("no target")
				}
				for _, tg := range targets {
					if tg.API != c.want {
						t.Errorf("target %s: API %q; want %q", tg.Name, tg.API, c.want)
					}
					for _, s := range cfg.Scenarios(tg.Name) {
						if !s.APIOn(tg).Valid() {
							t.Errorf("target %s, scenario %s: probed on api %q", tg.Name, s.Name, s.APIOn(tg))
						}
					}
				}
			}
		})
	}
}
