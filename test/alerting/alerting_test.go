package alerting

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/internal/alertgen"
)

// TestSetFor checks that SetFor changes the `for` of the named alerts only, and refuses a name that
// is not an alert of the file.
func TestSetFor(t *testing.T) {
	rules, err := alertgen.RuleFileYAML(PagingParams())
	if err != nil {
		t.Fatal(err)
	}
	fors := func(b []byte) map[string]string {
		var f struct {
			Groups []struct {
				Rules []struct {
					Alert string `yaml:"alert"`
					For   string `yaml:"for"`
					Expr  string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if r.Alert != "" {
					out[r.Alert] = r.For + " " + r.Expr
				}
			}
		}
		return out
	}
	before := fors(rules)
	got, err := SetFor(rules, map[string]time.Duration{"SlaprobeProbesFailing": 4 * time.Second, "SlaprobeSweepRegression": 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	after := fors(got)
	if len(after) != len(before) || len(after) < 30 {
		t.Fatalf("%d alerts after, %d before", len(after), len(before))
	}
	for name, b := range before {
		a := after[name]
		want := b
		switch name {
		case "SlaprobeProbesFailing":
			want = "4s " + strings.SplitN(b, " ", 2)[1]
		case "SlaprobeSweepRegression":
			want = "3s " + strings.SplitN(b, " ", 2)[1]
		}
		if a != want {
			t.Errorf("%s: for and expr %.60q, want %.60q", name, a, want)
		}
	}
	if _, err := SetFor(rules, map[string]time.Duration{"SlaprobeNoSuchAlert": time.Second}); err == nil || !strings.Contains(err.Error(), "SlaprobeNoSuchAlert") {
		t.Errorf("an unknown alert: error %v, want one naming it", err)
	}
}
