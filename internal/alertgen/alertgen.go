// Package alertgen is the one source of slaprobe's Prometheus recording and alerting rules. It writes
// them as a Prometheus rule file (alerts/slaprobe.rules.yml) and as a Kubernetes PrometheusRule
// (deploy/kubernetes/slaprobe-prometheusrule.yaml); `make rules` regenerates both and a test fails when
// the committed files differ from what the generator writes.
//
// The SLO objective and the burn-rate windows are Params. Operators get Default(); the end-to-end paging
// test passes short windows through the same generator, so it exercises these rules, not a copy.
package alertgen

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/internal/slo"
)

// Files the generator writes, relative to the repository root.
const (
	RuleFile           = "alerts/slaprobe.rules.yml"
	PrometheusRuleFile = "deploy/kubernetes/slaprobe-prometheusrule.yaml"
)

// RunbookBase is where runbook_url annotations point; each alert links to its own section.
const RunbookBase = "https://github.com/slaprobe/slaprobe/blob/main/docs/alerts.md"

// Tier is one burn-rate alert condition: the share of bad probes over Long, divided by the error
// budget (1 - objective), is above Burn, and so is it over the most recent Short window that held a
// probe.
type Tier struct {
	Long, Short time.Duration
	Burn        float64
	// MinProbes is the least number of probes the long window's ratio divides by. A scenario probed
	// rarely has few probes in the window; without a floor one slow probe would be a large share.
	// It is chosen so that 1/MinProbes stays below Burn × budget: one slow probe never fires.
	MinProbes int
	For       time.Duration
}

// Params are the knobs of the generated rules. Default() is what operators install.
type Params struct {
	// Objective is the share of probes that must be within the scenario's threshold (0.99: 99 %).
	Objective float64
	// GoodputObjective is the share of probes that must be good, within every threshold of their
	// scenario at once (slaprobe_probes_good_total ÷ slaprobe_probes_total; 0.99: 99 %). The goodput
	// alerts burn its budget with the same tiers.
	GoodputObjective float64
	// Page tiers fire SLA alerts with severity critical; Ticket tiers with severity warning.
	Page   []Tier
	Ticket []Tier
	// ConversationCache is when SlaprobeConversationCacheLost fires: agents' conversations lose their
	// prefix cache.
	ConversationCache ConversationCacheLost
	// MinTrafficMultiple is when SlaprobeTrafficHeadroomLow and SlaprobeLiveTrafficHeadroomLow fire:
	// the target takes less than this multiple of a workload trace's traffic
	// (slaprobe_capacity_traffic_multiple) or of its live traffic (…_live_traffic_multiple).
	MinTrafficMultiple float64
}

// ConversationCacheLost is the condition of SlaprobeConversationCacheLost, per conversation scenario
// and target, over Window, with at least MinFollowUps follow-ups of known cache class
// (slaprobe_conversation_turns_total, cache hit, partial or miss), for For: the follow-ups prefilled
// again more than RecomputedShare of what they could have reused
// (slaprobe_conversation_recomputed_tokens_total ÷ slaprobe_conversation_history_tokens_total, source
// reported), or more than MissShare of them were misses (where the server reports no cached tokens,
// the inferred share may read a hit up to 0.1 low, too much to judge RecomputedShare:
// docs/conversations.md).
type ConversationCacheLost struct {
	Window time.Duration
	// RecomputedShare: round-robin over two replicas recomputes about 12 % on a 12-turn
	// coding_agent (each follow-up lands on the replica that saw the conversation two turns before),
	// affinity under 1 % (the last partial block of each turn).
	RecomputedShare float64
	MissShare       float64
	// MinFollowUps is the least number of known-class follow-ups the share divides by, so that one miss
	// on a quiet probe does not fire: 1/MinFollowUps must not exceed MissShare.
	MinFollowUps int
	For          time.Duration
}

// Default returns the operators' parameters: a 99 % objective, the multi-window multi-burn-rate
// pairs of the SRE workbook (1h/5m at 14.4 and 6h/30m at 6 page, 1d/2h at 3 opens a ticket), with a
// probe-count floor so that rarely probed scenarios do not page on one slow probe.
func Default() Params {
	return Params{
		Objective:        slo.Objective,
		GoodputObjective: slo.GoodputObjective,
		Page: []Tier{
			{Long: time.Hour, Short: 5 * time.Minute, Burn: 14.4, MinProbes: 20, For: 2 * time.Minute},
			{Long: 6 * time.Hour, Short: 30 * time.Minute, Burn: 6, MinProbes: 20, For: 2 * time.Minute},
		},
		Ticket: []Tier{
			{Long: 24 * time.Hour, Short: 2 * time.Hour, Burn: 3, MinProbes: 40, For: 15 * time.Minute},
		},
		// A 12-turn agent conversation every 5 minutes counts 66 follow-ups in 30 minutes; the two-turn
		// built-ins (one follow-up every 5 or 10 minutes) stay under the floor and are left to
		// SlaprobePrefixCachingNotWorking.
		ConversationCache:  ConversationCacheLost{Window: 30 * time.Minute, RecomputedShare: 0.05, MissShare: 0.25, MinFollowUps: 8, For: 10 * time.Minute},
		MinTrafficMultiple: DefaultMinTrafficMultiple,
	}
}

// Validate reports the first parameter that cannot produce sane rules.
func (p Params) Validate() error {
	if p.Objective <= 0 || p.Objective >= 1 {
		return fmt.Errorf("alertgen: objective=%v; expected a share between 0 and 1, e.g. 0.99", p.Objective)
	}
	if p.GoodputObjective <= 0 || p.GoodputObjective >= 1 {
		return fmt.Errorf("alertgen: goodput_objective=%v; expected a share between 0 and 1, e.g. 0.99", p.GoodputObjective)
	}
	if len(p.Page) == 0 {
		return fmt.Errorf("alertgen: no page tier; expected at least one")
	}
	if !(p.MinTrafficMultiple > 0) || math.IsInf(p.MinTrafficMultiple, 0) {
		return fmt.Errorf("alertgen: min_traffic_multiple=%v; expected a positive factor, e.g. %v", p.MinTrafficMultiple, DefaultMinTrafficMultiple)
	}
	switch c := p.ConversationCache; {
	case c.Window <= 0:
		return fmt.Errorf("alertgen: conversation_cache.window=%s; expected a positive duration, e.g. 30m", c.Window)
	case !(c.RecomputedShare > 0 && c.RecomputedShare < 1):
		return fmt.Errorf("alertgen: conversation_cache.recomputed_share=%v; expected a share between 0 and 1, e.g. 0.05", c.RecomputedShare)
	case c.MissShare <= 0 || c.MissShare >= 1:
		return fmt.Errorf("alertgen: conversation_cache.miss_share=%v; expected a share between 0 and 1, e.g. 0.25", c.MissShare)
	case c.MinFollowUps < 1 || 1/float64(c.MinFollowUps) > c.MissShare:
		return fmt.Errorf("alertgen: conversation_cache.min_follow_ups=%d; expected at least %d, so that one miss stays within miss_share %v",
			c.MinFollowUps, int(math.Ceil(1/c.MissShare)), c.MissShare)
	case c.For < 0:
		return fmt.Errorf("alertgen: conversation_cache.for=%s; expected a duration >= 0", c.For)
	}
	// One bad probe burns the smaller budget fastest: the probe floor must hold for it.
	budget := 1 - max(p.Objective, p.GoodputObjective)
	for i, t := range append(append([]Tier(nil), p.Page...), p.Ticket...) {
		switch {
		case t.Short <= 0 || t.Long <= t.Short:
			return fmt.Errorf("alertgen: tier %d: long=%s short=%s; expected 0 < short < long", i, t.Long, t.Short)
		case t.Burn <= 0:
			return fmt.Errorf("alertgen: tier %d: burn=%v; expected a positive burn rate", i, t.Burn)
		case t.MinProbes < 1:
			return fmt.Errorf("alertgen: tier %d: min_probes=%d; expected at least 1", i, t.MinProbes)
		case 1/float64(t.MinProbes) >= t.Burn*budget && t.Burn*budget < 1:
			return fmt.Errorf("alertgen: tier %d: min_probes=%d lets one bad probe reach burn %v (1/%d >= %v); expected more",
				i, t.MinProbes, t.Burn, t.MinProbes, t.Burn*budget)
		}
	}
	return nil
}

// windows lists every window a tier needs, shortest first, without duplicates.
func (p Params) windows() []time.Duration {
	seen := map[time.Duration]bool{}
	var out []time.Duration
	for _, t := range append(append([]Tier(nil), p.Page...), p.Ticket...) {
		for _, w := range []time.Duration{t.Short, t.Long} {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// dur writes a duration the way PromQL and rule files spell it: 1h, 30m, 1d.
func dur(d time.Duration) string { return model.Duration(d).String() }

// Rule is one recording or alerting rule.
type Rule struct {
	Comment     string            `yaml:"-"`
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// Group is a rule group.
type Group struct {
	Comment string `yaml:"-"`
	Name    string `yaml:"name"`
	Rules   []Rule `yaml:"rules"`
}

// Groups returns the rule groups for p.
func Groups(p Params) ([]Group, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rec := Group{Name: "slaprobe.rules", Rules: append(latencyRecordingRules(), sliRecordingRules(p)...)}
	rec.Rules = append(rec.Rules, goodputRecordingRules(p)...)
	rec.Rules = append(rec.Rules, probeRecordingRules()...)
	alerts := Group{Name: "slaprobe.alerts", Rules: append(append(append(append(sliAlerts(p), goodputAlerts(p)...), otherAlerts()...), newAlerts()...), conversationAlerts(p)...)}
	alerts.Rules = append(alerts.Rules, engineAlerts()...)
	alerts.Rules = append(alerts.Rules, headroomAlerts(p)...)
	return []Group{rec, alerts}, nil
}

const header = `# GENERATED by internal/alertgen (make rules): edit the generator, not this file.
# slaprobe's recording and alerting rules. What each alert means and what to do: docs/alerts.md.
#
# SLA thresholds are never written here: the SLO rules compare probe histograms with
# slaprobe_sla_threshold{scenario, metric}, which slaprobe exports from its config, joined on
# (job, instance, scenario). Change a threshold in slaprobe's config and the alerts follow; a scenario
# without a threshold on a metric is not alerted on for that metric.
#
# The selector job="slaprobe" must match the scrape job of slaprobe (deploy/prometheus.yml).
`

// RuleFileYAML renders the groups as a Prometheus rule file.
func RuleFileYAML(p Params) ([]byte, error) {
	groups, err := Groups(p)
	if err != nil {
		return nil, err
	}
	body, err := encode(map[string]any{"groups": groups}, groups, 0)
	if err != nil {
		return nil, err
	}
	return append([]byte(header), body...), nil
}

// PrometheusRuleYAML renders the groups as a prometheus-operator PrometheusRule.
func PrometheusRuleYAML(p Params) ([]byte, error) {
	groups, err := Groups(p)
	if err != nil {
		return nil, err
	}
	type meta struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	doc := struct {
		APIVersion string         `yaml:"apiVersion"`
		Kind       string         `yaml:"kind"`
		Metadata   meta           `yaml:"metadata"`
		Spec       map[string]any `yaml:"spec"`
	}{
		APIVersion: "monitoring.coreos.com/v1",
		Kind:       "PrometheusRule",
		Metadata: meta{Name: "slaprobe", Labels: map[string]string{
			"app.kubernetes.io/name":      "slaprobe",
			"app.kubernetes.io/component": "alerting",
			// The label kube-prometheus' default ruleSelector matches; change it to your Prometheus'.
			"prometheus": "k8s",
		}},
		Spec: map[string]any{"groups": groups},
	}
	body, err := encode(doc, groups, 1)
	if err != nil {
		return nil, err
	}
	return append([]byte(strings.Replace(header, "slaprobe's recording", "A Kubernetes PrometheusRule of slaprobe's recording", 1)), body...), nil
}

// encode marshals v and attaches each group's and rule's comment to its node. depth is how many
// mappings lie above the "groups" key (0 in a rule file, 1 under spec in a PrometheusRule).
func encode(v any, groups []Group, depth int) ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	gs := find(&n, depth)
	if gs != nil {
		for i, g := range gs.Content {
			if i >= len(groups) {
				break
			}
			g.HeadComment = groups[i].Comment
			rules := value(g, "rules")
			for j, r := range rules.Content {
				if j < len(groups[i].Rules) {
					r.HeadComment = groups[i].Rules[j].Comment
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// find returns the "groups" sequence node: under the document at depth 0, under "spec" at depth 1.
func find(n *yaml.Node, depth int) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if depth == 1 {
		n = value(n, "spec")
		if n == nil {
			return nil
		}
	}
	return value(n, "groups")
}

func value(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// Write regenerates both files with Default() under root (the repository root).
func Write(root string) error {
	p := Default()
	for _, f := range []struct {
		path string
		gen  func(Params) ([]byte, error)
	}{{RuleFile, RuleFileYAML}, {PrometheusRuleFile, PrometheusRuleYAML}} {
		b, err := f.gen(p)
		if err != nil {
			return err
		}
		path := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}
