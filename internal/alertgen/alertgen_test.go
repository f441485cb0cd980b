package alertgen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFilesUpToDate fails when the committed rule files differ from what the generator writes: edit
// internal/alertgen and run `make rules`, never the files.
func TestFilesUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, f := range []struct {
		path string
		gen  func(Params) ([]byte, error)
	}{{RuleFile, RuleFileYAML}, {PrometheusRuleFile, PrometheusRuleYAML}} {
		want, err := f.gen(Default())
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, f.path))
		if err != nil {
			t.Fatalf("%v: run `make rules`", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what internal/alertgen generates: run `make rules` and commit the result", f.path)
		}
	}
}

func TestParamsValidate(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default(): %v", err)
	}
	bad := Default()
	bad.Page[0].MinProbes = 5 // 1/5 = 20 % > 14.4 %: one slow probe would page
	if err := bad.Validate(); err == nil {
		t.Error("MinProbes 5 at burn 14.4: no error")
	}
	bad = Default()
	bad.Objective = 1
	if err := bad.Validate(); err == nil {
		t.Error("objective 1: no error")
	}
	for _, tc := range []struct {
		mutate func(*ConversationCacheLost)
		want   string // in the error
	}{
		{func(c *ConversationCacheLost) { c.MinFollowUps = 3 }, "conversation_cache.min_follow_ups=3; expected at least 4"}, // one miss of 3 is 33 % > 25 %
		{func(c *ConversationCacheLost) { c.MissShare = 1 }, "conversation_cache.miss_share=1"},
		{func(c *ConversationCacheLost) { c.RecomputedShare = 0 }, "conversation_cache.recomputed_share=0"},
		{func(c *ConversationCacheLost) { c.Window = 0 }, "conversation_cache.window=0s"},
		{func(c *ConversationCacheLost) { c.For = -time.Minute }, "conversation_cache.for=-1m0s"},
	} {
		bad = Default()
		tc.mutate(&bad.ConversationCache)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one with %q", bad.ConversationCache, err, tc.want)
		}
	}
	ok := Default()
	ok.ConversationCache.MinFollowUps = 4 // one miss of 4 is 25 %: not over the share
	if err := ok.Validate(); err != nil {
		t.Errorf("min_follow_ups 4 at miss share 0.25: %v", err)
	}
}

// TestEveryAlertDocumentedAndTested: every alert has its annotations and severity, a runbook section
// in docs/alerts.md, and a promtool case in alerts/*_test.yml.
func TestEveryAlertDocumentedAndTested(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := filepath.Glob(filepath.Join(root, "alerts", "*_test.yml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no promtool tests in alerts/: %v", err)
	}
	var promtool []byte
	for _, f := range tests {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		promtool = append(promtool, b...)
	}
	groups, err := Groups(Default())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			if !bytes.Contains(doc, []byte("\n### "+r.Alert+"\n")) {
				t.Errorf("%s: no section in docs/alerts.md (runbook_url points there)", r.Alert)
			}
			if !bytes.Contains(promtool, []byte("alertname: "+r.Alert+"\n")) {
				t.Errorf("%s: no promtool case in alerts/*_test.yml", r.Alert)
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d alerts generated", n)
	}
}

// The goodput objective is its own knob: it sets the budget of the goodput alerts only, and the probe
// floor is checked against it.
func TestGoodputObjective(t *testing.T) {
	p := Default()
	p.GoodputObjective = 0.95
	groups, err := Groups(p)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range groups[1].Rules {
		switch r.Alert {
		case GoodputPageAlert, GoodputTicketAlert:
			seen++
			if !strings.Contains(r.Expr, ") / 0.05 > ") || strings.Contains(r.Expr, "/ 0.01 >") {
				t.Errorf("%s: expression does not burn a 5 %% budget:\n%s", r.Alert, r.Expr)
			}
			if !strings.Contains(r.Annotations["description"], "95 % goodput objective") {
				t.Errorf("%s: description does not name the objective: %s", r.Alert, r.Annotations["description"])
			}
		case "SlaprobeTTFTAboveMaxSafe":
			if !strings.Contains(r.Expr, ") / 0.01 > 14.4") {
				t.Errorf("the TTFT page moved with the goodput objective:\n%s", r.Expr)
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d goodput alerts, want a page and a ticket", seen)
	}
	for _, o := range []float64{0, 1, 0.995} { // 0.995: one bad probe of 20 is burn 10 > 6
		p.GoodputObjective = o
		if err := p.Validate(); err == nil {
			t.Errorf("goodput objective %v: no error", o)
		}
	}
}
