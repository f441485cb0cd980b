package deploy

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	argov1 "github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/evaluate"
	argotemplate "github.com/argoproj/argo-rollouts/utils/template"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/fluxcd/flagger/pkg/metrics/observers"
	"sigs.k8s.io/yaml"
)

const (
	rolloutsDir    = "deploy/rollouts"
	argoFile       = "argo-analysistemplate.yaml"
	flaggerFile    = "flagger-metrictemplates.yaml"
	flaggerCanary  = "flagger-canary.yaml"
	canaryValues   = "values-canary.yaml"
	renderedGolden = "testdata/rollouts-rendered.json"
)

// The three checks, by Argo metric name; Flagger's MetricTemplates are named slaprobe-<check>.
var rolloutChecks = []string{"goodput-share-drop", "ttft-p95-ratio", "success-share-drop"}

// The arguments test/e2e's TestRolloutGatesOnOllama and TestRolloutGatesOnPrometheus run the
// rendered queries with: their slaprobe probes a stable engine and canaries (identical, 10 % slower
// (Ollama only), 30 % slower, 30 % errors) with scenario "chat", and Prometheus evaluates over 30 s
// windows.
var (
	e2eStable   = "stable"
	e2eCanaries = []string{"canary-same", "canary-slow10", "canary-slow", "canary-errors"}
	e2eScenario = "chat"
	e2eWindow   = "30s"
	// e2eTolerances replace the templates' defaults in the e2e run, for Argo's args and the
	// Flagger Canary's threshold ranges alike. The defaults (5 points of goodput, a p95 ratio of
	// 1.2) sit too close to what a 30 s window of ~15 probes per target shows on a loaded CI
	// machine: one slow probe of the identical canary is 6.7 points of goodput, and the 30 %
	// slower canary's p95 ratio read 1.22 from native histograms. These keep a margin of about
	// 10 % on both sides: the identical canary reads 0.94 to 1.0 and the slower one 1.22 to 1.5.
	e2eTolerances = map[string]float64{"goodput-max-drop": 0.2, "ttft-max-ratio": 1.1}
)

// renderedQuery is one template's query as the controller would send it, and the range of values
// its analysis passes (an absent bound is open). test/e2e reads these.
type renderedQuery struct {
	Engine string   `json:"engine"` // argo or flagger
	Check  string   `json:"check"`
	Canary string   `json:"canary"`
	Query  string   `json:"query"`
	Min    *float64 `json:"min,omitempty"`
	Max    *float64 `json:"max,omitempty"`
}

func rolloutsPath(t *testing.T, name string) string {
	return filepath.Join(repoRoot(t), rolloutsDir, name)
}

func loadArgoTemplate(t *testing.T) *argov1.AnalysisTemplate {
	t.Helper()
	var at argov1.AnalysisTemplate
	if err := yaml.UnmarshalStrict(readFile(t, rolloutsPath(t, argoFile)), &at); err != nil {
		t.Fatalf("%s does not decode strictly into argo-rollouts' AnalysisTemplate: %v", argoFile, err)
	}
	if at.APIVersion != "argoproj.io/v1alpha1" || at.Kind != "AnalysisTemplate" {
		t.Fatalf("%s: %s %s, want argoproj.io/v1alpha1 AnalysisTemplate", argoFile, at.APIVersion, at.Kind)
	}
	return &at
}

func loadFlagger(t *testing.T) (map[string]*flaggerv1.MetricTemplate, *flaggerv1.Canary) {
	t.Helper()
	templates := map[string]*flaggerv1.MetricTemplate{}
	for i, doc := range splitDocs(string(readFile(t, rolloutsPath(t, flaggerFile)))) {
		var mt flaggerv1.MetricTemplate
		if err := yaml.UnmarshalStrict([]byte(doc), &mt); err != nil {
			t.Fatalf("%s document %d does not decode strictly into flagger's MetricTemplate: %v", flaggerFile, i+1, err)
		}
		if mt.APIVersion != "flagger.app/v1beta1" || mt.Kind != "MetricTemplate" {
			t.Fatalf("%s document %d: %s %s, want flagger.app/v1beta1 MetricTemplate", flaggerFile, i+1, mt.APIVersion, mt.Kind)
		}
		templates[mt.Name] = &mt
	}
	var c flaggerv1.Canary
	if err := yaml.UnmarshalStrict(readFile(t, rolloutsPath(t, flaggerCanary)), &c); err != nil {
		t.Fatalf("%s does not decode strictly into flagger's Canary: %v", flaggerCanary, err)
	}
	return templates, &c
}

var argoRef = regexp.MustCompile(`\{\{\s*args\.([^}\s]+)\s*\}\}`)

// argoRefs lists the args a metric uses, in its query, its provider address and its conditions.
func argoRefs(m argov1.Metric) []string {
	var out []string
	for _, s := range []string{m.Provider.Prometheus.Query, m.Provider.Prometheus.Address, m.SuccessCondition, m.FailureCondition} {
		for _, g := range argoRef.FindAllStringSubmatch(s, -1) {
			out = append(out, g[1])
		}
	}
	return out
}

func TestArgoAnalysisTemplate(t *testing.T) {
	at := loadArgoTemplate(t)
	declared := map[string]bool{}
	for _, a := range at.Spec.Args {
		declared[a.Name] = false
	}
	var names []string
	for _, m := range at.Spec.Metrics {
		names = append(names, m.Name)
		if m.Provider.Prometheus == nil || m.Provider.Prometheus.Query == "" {
			t.Errorf("metric %s: no Prometheus query", m.Name)
			continue
		}
		if m.SuccessCondition == "" {
			t.Errorf("metric %s: no successCondition", m.Name)
		}
		for _, ref := range argoRefs(m) {
			if _, ok := declared[ref]; !ok {
				t.Errorf("metric %s uses {{args.%s}}, which spec.args does not declare", m.Name, ref)
				continue
			}
			declared[ref] = true
		}
	}
	for name, used := range declared {
		if !used {
			t.Errorf("spec.args declares %s, which no metric uses", name)
		}
	}
	if !slices.Equal(names, rolloutChecks) {
		t.Errorf("metrics %v, want %v", names, rolloutChecks)
	}
}

var flaggerVar = regexp.MustCompile(`\{\{\s*variables\.([A-Za-z0-9_]+)\s*\}\}`)

func TestFlaggerMetricTemplates(t *testing.T) {
	templates, canary := loadFlagger(t)
	var names []string
	for _, c := range rolloutChecks {
		names = append(names, "slaprobe-"+c)
	}
	if got := slices.Sorted(maps.Keys(templates)); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		t.Errorf("MetricTemplates %v, want %v", got, names)
	}
	for _, mt := range templates {
		if mt.Spec.Provider.Type != "prometheus" || mt.Spec.Provider.Address == "" || mt.Spec.Query == "" {
			t.Errorf("%s: provider %+v, query %q: want a prometheus provider with an address, and a query", mt.Name, mt.Spec.Provider, mt.Spec.Query)
		}
	}
	if canary.Spec.Analysis == nil || len(canary.Spec.Analysis.Metrics) != len(rolloutChecks) {
		t.Fatalf("%s: want one analysis metric per template (%d)", flaggerCanary, len(rolloutChecks))
	}
	for _, m := range canary.Spec.Analysis.Metrics {
		if m.TemplateRef == nil {
			t.Errorf("%s: metric %s has no templateRef", flaggerCanary, m.Name)
			continue
		}
		mt, ok := templates[m.TemplateRef.Name]
		if !ok {
			t.Errorf("%s: metric %s refers to MetricTemplate %s, which %s does not define", flaggerCanary, m.Name, m.TemplateRef.Name, flaggerFile)
			continue
		}
		used := map[string]bool{}
		for _, g := range flaggerVar.FindAllStringSubmatch(mt.Spec.Query, -1) {
			used[g[1]] = true
			if _, ok := m.TemplateVariables[g[1]]; !ok {
				t.Errorf("%s uses {{ variables.%s }}, which the Canary's metric %s does not set", mt.Name, g[1], m.Name)
			}
		}
		for v := range m.TemplateVariables {
			if !used[v] {
				t.Errorf("the Canary's metric %s sets %s, which %s does not use", m.Name, v, mt.Name)
			}
		}
		if m.ThresholdRange == nil || (m.ThresholdRange.Min == nil) == (m.ThresholdRange.Max == nil) {
			t.Errorf("the Canary's metric %s: want a thresholdRange with one bound", m.Name)
		}
		if _, err := observers.RenderQuery(mt.Spec.Query, flaggerModel(canary, m)); err != nil {
			t.Errorf("%s with the Canary's variables: %v", mt.Name, err)
		}
	}
}

// flaggerModel is what Flagger's scheduler hands to RenderQuery for one analysis metric.
func flaggerModel(c *flaggerv1.Canary, m flaggerv1.CanaryMetric) flaggerv1.MetricTemplateModel {
	return flaggerv1.MetricTemplateModel{
		Name:      c.Name,
		Namespace: c.Namespace,
		Target:    c.Spec.TargetRef.Name,
		Service:   c.Spec.TargetRef.Name,
		Interval:  m.Interval,
		Variables: m.TemplateVariables,
	}
}

var argoBound = regexp.MustCompile(`^result\[0\] (>=|<=) (-?[0-9.]+)$`)

// argoRange reads a rendered successCondition of the form `result[0] >= x` or `result[0] <= x`,
// and checks with Argo's own evaluator that it passes and fails where the range says (1 % either side).
func argoRange(t *testing.T, cond string) (min, max *float64) {
	t.Helper()
	g := argoBound.FindStringSubmatch(cond)
	if g == nil {
		t.Fatalf("successCondition %q: want result[0] >= x or result[0] <= x (test/e2e evaluates that form)", cond)
	}
	bound, err := strconv.ParseFloat(g[2], 64)
	if err != nil {
		t.Fatal(err)
	}
	if g[1] == ">=" {
		min = &bound
	} else {
		max = &bound
	}
	for _, v := range []float64{bound - 0.01*math.Abs(bound), bound + 0.01*math.Abs(bound), bound} {
		want := (min == nil || v >= *min) && (max == nil || v <= *max)
		got, err := evaluate.EvalCondition([]float64{v}, cond)
		if err != nil || got != want {
			t.Errorf("argo evaluates %q on [%v]: %v (%v), want %v", cond, v, got, err, want)
		}
	}
	return min, max
}

// flaggerTolerance names the Argo arg that holds each check's tolerance, which the Flagger
// Canary sets as a threshold range instead.
var flaggerTolerance = map[string]string{"goodput-share-drop": "goodput-max-drop", "ttft-p95-ratio": "ttft-max-ratio", "success-share-drop": "success-max-drop"}

// renderAll renders every template for each of test/e2e's canaries, with Argo's ResolveArgs and
// Flagger's RenderQuery, and reads each check's passing range from Argo's successCondition and the
// Flagger Canary's thresholdRange.
func renderAll(t *testing.T) []renderedQuery {
	t.Helper()
	at := loadArgoTemplate(t)
	templates, canary := loadFlagger(t)
	var out []renderedQuery
	for _, c := range e2eCanaries {
		set := map[string]string{"stable-target": e2eStable, "canary-target": c, "scenario": e2eScenario, "window": e2eWindow, "prometheus-address": "http://prometheus:9090"}
		for k, v := range e2eTolerances {
			set[k] = strconv.FormatFloat(v, 'f', -1, 64)
		}
		var args []argov1.Argument
		for _, a := range at.Spec.Args {
			if v, ok := set[a.Name]; ok {
				a.Value = &v
			}
			args = append(args, a)
		}
		for _, m := range at.Spec.Metrics {
			q, err := argotemplate.ResolveArgs(m.Provider.Prometheus.Query, args)
			if err != nil {
				t.Fatalf("argo %s: %v", m.Name, err)
			}
			cond, err := argotemplate.ResolveArgs(m.SuccessCondition, args)
			if err != nil {
				t.Fatalf("argo %s successCondition: %v", m.Name, err)
			}
			r := renderedQuery{Engine: "argo", Check: m.Name, Canary: c, Query: q}
			r.Min, r.Max = argoRange(t, cond)
			out = append(out, r)
		}
		for _, m := range canary.Spec.Analysis.Metrics {
			model := flaggerModel(canary, m)
			model.Interval = e2eWindow
			model.Variables = map[string]string{"stable_target": e2eStable, "canary_target": c, "scenario": e2eScenario}
			q, err := observers.RenderQuery(templates[m.TemplateRef.Name].Spec.Query, model)
			if err != nil {
				t.Fatalf("flagger %s: %v", m.Name, err)
			}
			check := strings.TrimPrefix(m.TemplateRef.Name, "slaprobe-")
			lo, hi := m.ThresholdRange.Min, m.ThresholdRange.Max
			switch v, ok := e2eTolerances[flaggerTolerance[check]]; {
			case ok && lo != nil:
				lo = &[]float64{-v}[0]
			case ok && hi != nil:
				hi = &v
			}
			out = append(out, renderedQuery{Engine: "flagger", Check: check, Canary: c, Query: q, Min: lo, Max: hi})
		}
	}
	return out
}

// TestRolloutQueriesRendered keeps testdata/rollouts-rendered.json, the queries test/e2e runs on a
// real Prometheus, equal to what Argo Rollouts and Flagger render from the templates (-update
// rewrites it), and checks that both controllers send the same query for each check.
func TestRolloutQueriesRendered(t *testing.T) {
	got := renderAll(t)
	space := regexp.MustCompile(`\s+`)
	byKey := map[string]renderedQuery{}
	for _, r := range got {
		if strings.Contains(r.Query, "{{") {
			t.Errorf("%s %s: unrendered template left: %s", r.Engine, r.Check, r.Query)
		}
		k := r.Check + " " + r.Canary
		if o, ok := byKey[k]; ok {
			if space.ReplaceAllString(o.Query, " ") != space.ReplaceAllString(r.Query, " ") {
				t.Errorf("%s: argo and flagger render different queries:\n%s\n%s", k, o.Query, r.Query)
			}
			if !sameBound(o.Min, r.Min) || !sameBound(o.Max, r.Max) {
				t.Errorf("%s: argo passes [%v, %v], flagger's example Canary [%v, %v]", k, fmtBound(o.Min), fmtBound(o.Max), fmtBound(r.Min), fmtBound(r.Max))
			}
		}
		byKey[k] = r
	}
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile(renderedGolden, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want := readFile(t, renderedGolden); !bytes.Equal(want, b) {
		t.Errorf("%s is stale: run go test -run TestRolloutQueriesRendered -update in test/deploy", renderedGolden)
	}
}

func sameBound(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func fmtBound(b *float64) string {
	if b == nil {
		return "open"
	}
	return strconv.FormatFloat(*b, 'g', -1, 64)
}

// TestHelmValuesCanary renders the chart with the rollout values: slaprobe probes the stable and the
// canary Service as two targets running the Argo template's default scenario.
func TestHelmValuesCanary(t *testing.T) {
	r := mustRender(t, "slaprobe", string(readFile(t, rolloutsPath(t, canaryValues))))
	if r.slaprobeCfg == nil {
		t.Fatal("no slaprobe config rendered")
	}
	scenario := ""
	for _, a := range loadArgoTemplate(t).Spec.Args {
		if a.Name == "scenario" && a.Value != nil {
			scenario = *a.Value
		}
	}
	want := map[string]string{"vllm-stable": "http://vllm-stable:8000", "vllm-canary": "http://vllm-canary:8000"}
	if n := len(r.slaprobeCfg.TargetConfigs); n != len(want) {
		t.Errorf("%d targets, want %d", n, len(want))
	}
	for _, tc := range r.slaprobeCfg.TargetConfigs {
		if want[tc.Name] != tc.URL {
			t.Errorf("target %s at %s, want one of %v", tc.Name, tc.URL, want)
		}
		var names []string
		for _, s := range r.slaprobeCfg.Scenarios(tc.Name) {
			names = append(names, s.Name)
		}
		if !slices.Equal(names, []string{scenario}) {
			t.Errorf("target %s runs scenarios %v, want the template's default [%s]", tc.Name, names, scenario)
		}
	}
}
