// Package config holds slaprobe's YAML configuration: its types and
// defaults, validation, quick command-line flags and reloading.
//
// Defaults are set in UnmarshalYAML through the `type plain X` trick, so a
// field that is absent keeps its default while a field that is present, even
// as a zero, is taken as written. Unknown fields are rejected with their line
// number.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/prober"
)

// Config is the whole configuration file.
type Config struct {
	Global          GlobalConfig     `yaml:"global"`
	TargetConfigs   []TargetConfig   `yaml:"targets"`
	ScenarioConfigs []ScenarioConfig `yaml:"scenarios,omitempty"`
	Sweep           SweepConfig      `yaml:"sweep,omitempty"`
	Power           PowerConfig      `yaml:"power,omitempty"`
	Engine          EngineConfig     `yaml:"engine,omitempty"`
	Tracing         TracingConfig    `yaml:"tracing,omitempty"`
	// FileSDConfigs add targets read from files (filesd.go).
	FileSDConfigs []FileSDConfig `yaml:"file_sd_configs,omitempty"`
	// Probe sets up the /probe endpoint (probe.go).
	Probe ProbeConfig `yaml:"probe,omitempty"`

	// resolved holds every scenario the config knows (built-ins with their
	// overrides, then custom ones in file order); filled by finish.
	resolved []prober.Scenario
	// enabled holds, per target name, the names of its enabled scenarios.
	enabled map[string][]string
	// scenariosFlag is set when --scenarios replaced global.scenarios.
	scenariosFlag bool
	// sdDir and sdSum are the directory file_sd paths are relative to and
	// the checksum of the files they matched at load (filesd.go).
	sdDir string
	sdSum [32]byte
	// scrubber hides the config's secrets in text from elsewhere (Scrub).
	scrubber *strings.Replacer
	// deprecations name the deprecated keys the file used (Deprecations).
	deprecations []string
}

// Deprecations lists the deprecated keys the config used, each with the
// key that replaces it: the config loads, but a later release will refuse
// them. check-config prints them and the daemon logs them at load.
func (c *Config) Deprecations() []string { return append([]string(nil), c.deprecations...) }

// GlobalConfig holds settings that apply to every target.
type GlobalConfig struct {
	// StallTimeout fails a probe whose stream goes silent for this long
	// after the first token. 0 disables the check (the scenario timeout
	// still applies).
	StallTimeout model.Duration `yaml:"stall_timeout"`
	// Jitter spreads each probe uniformly over interval·(1±jitter), so that
	// probes of many slaprobe replicas do not line up. 0 ≤ jitter < 1.
	Jitter float64 `yaml:"jitter"`
	// MaxInFlightPerTarget caps concurrent probes per target. The default,
	// 1, means probes never queue behind each other on the server.
	MaxInFlightPerTarget int `yaml:"max_in_flight_per_target"`
	// Scenarios are enabled on every target that does not list its own.
	Scenarios []string `yaml:"scenarios"`
	// MaxLineBytes is the longest SSE line the stream reader accepts.
	MaxLineBytes int `yaml:"max_line_bytes"`
	// MaxAnswerBytes is the most text a conversation keeps of its answers
	// to replay them in the next turns; past it the probe fails with reason
	// answer_too_large and the conversation stops.
	MaxAnswerBytes int `yaml:"max_answer_bytes"`
	// ModelRefreshInterval is how often /v1/models is read again to follow
	// model changes and max_model_len.
	ModelRefreshInterval model.Duration `yaml:"model_refresh_interval"`
	// ClassicHistogramBuckets trims the probe histograms' classic buckets:
	// full (default), reduced (threshold edges only) or none (native
	// histograms only). Read at start; a reload does not change it.
	ClassicHistogramBuckets string `yaml:"classic_histogram_buckets"`
}

// TargetConfig is one inference server.
type TargetConfig struct {
	// Name is the `target` label. Default: host:port of URL.
	Name string `yaml:"name"`
	// URL is the server's base URL, e.g. http://vllm:8000. A trailing /v1
	// is removed: request paths are added by the prober.
	URL string `yaml:"url"`
	// Model to probe; empty means auto-detect from /v1/models.
	Model string `yaml:"model"`
	// MetricsURL is the engine's own /metrics. Default: URL + /metrics.
	MetricsURL string `yaml:"metrics_url"`
	// API is "chat" (/v1/chat/completions) or "completions" (/v1/completions).
	API prober.API `yaml:"api"`
	// Scenarios replaces global.scenarios (and the custom ones) for this
	// target when set.
	Scenarios []string `yaml:"scenarios,omitempty"`
	// Headers are sent with every request. Their values are never printed
	// (/config, check-config and logs show <secret>), so an API key may go
	// here or in http_client_config (authorization, http_headers).
	Headers Headers `yaml:"headers,omitempty"`
	// PerRequestMetrics sets "include_metrics": true on chat and completions probes, so that vLLM >=
	// 0.25 run with --enable-per-request-metrics returns its per-request `metrics` object (the
	// engine's queue, prefill and decode time, and speculative decoding). Off by default: a strict
	// server may refuse a request with a field it does not know.
	PerRequestMetrics bool `yaml:"per_request_metrics,omitempty"`
	// HTTPClientConfig sets authentication, TLS and proxy.
	HTTPClientConfig promcfg.HTTPClientConfig `yaml:"http_client_config"`

	fromFlag bool   // added by --target.url, for error messages
	origin   string // where file_sd found it, for error messages
}

// DefaultGlobalConfig is used for absent fields of `global`.
var DefaultGlobalConfig = GlobalConfig{
	StallTimeout:            model.Duration(30 * time.Second),
	Jitter:                  0.2,
	MaxInFlightPerTarget:    1,
	Scenarios:               append([]string(nil), prober.DefaultScenarios...),
	MaxLineBytes:            1 << 20,
	MaxAnswerBytes:          prober.DefaultMaxAnswerBytes,
	ModelRefreshInterval:    model.Duration(5 * time.Minute),
	ClassicHistogramBuckets: "full",
}

// DefaultTargetConfig is used for absent fields of a target.
var DefaultTargetConfig = TargetConfig{
	API:              prober.APIChat,
	HTTPClientConfig: defaultHTTPClientConfig(),
}

// Each section decodes through its own "plain" type: it has the fields but
// not the UnmarshalYAML method, so decoding it does not recurse. Distinct
// names let error messages say which section a bad field is in.
type (
	plainConfig Config
	plainGlobal GlobalConfig
	plainTarget TargetConfig
)

// defaultConfig is a config with every section at its defaults: parsing
// starts from it, so an absent section is its defaults and no caller has to
// remember to fill them in.
func defaultConfig() Config {
	c := Config{
		Global:  DefaultGlobalConfig,
		Sweep:   DefaultSweepConfig(),
		Power:   DefaultPowerConfig(),
		Engine:  DefaultEngineConfig(),
		Tracing: DefaultTracingConfig(),
	}
	c.Global.Scenarios = append([]string(nil), DefaultGlobalConfig.Scenarios...)
	return c
}

// UnmarshalYAML sets the defaults of the top level.
func (c *Config) UnmarshalYAML(unmarshal func(any) error) error {
	*c = defaultConfig()
	return unmarshal((*plainConfig)(c))
}

// UnmarshalYAML sets the defaults of `global`.
func (g *GlobalConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*g = DefaultGlobalConfig
	g.Scenarios = append([]string(nil), DefaultGlobalConfig.Scenarios...)
	return unmarshal((*plainGlobal)(g))
}

// UnmarshalYAML sets the defaults of a target.
func (t *TargetConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*t = DefaultTargetConfig
	return unmarshal((*plainTarget)(t))
}

// Load reads and validates the config file at path. Relative file names in
// http_client_config are resolved against the file's directory.
func Load(path string) (*Config, error) {
	return LoadWithFlags(path, Flags{})
}

// LoadWithFlags reads the config file at path (none when path is empty)
// and applies the quick flags to it; see Flags for how they combine.
func LoadWithFlags(path string, f Flags) (*Config, error) {
	var data []byte
	if path != "" {
		var err error
		data, err = os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
	}
	c, err := build(data, filepath.Dir(path), f)
	if err != nil && path != "" {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, err
}

// LoadBytes parses and validates a config held in memory.
func LoadBytes(data []byte) (*Config, error) {
	return build(data, "", Flags{})
}

// build is the one path every loader takes: parse, apply flags, validate.
func build(data []byte, dir string, f Flags) (*Config, error) {
	c, err := parse(data)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		for i := range c.TargetConfigs {
			c.TargetConfigs[i].HTTPClientConfig.SetDirectory(dir)
		}
	}
	if err := c.discover(dir); err != nil {
		return nil, err
	}
	if err := c.applyFlags(f); err != nil {
		return nil, err
	}
	if err := c.finish(); err != nil {
		return nil, withLine(data, err)
	}
	if err := c.checkProbe(dir); err != nil {
		return nil, err
	}
	if err := c.checkTracingFiles(dir); err != nil {
		return nil, err
	}
	c.scrubber = newScrubber(c.secretValues())
	return c, nil
}

// parse decodes YAML strictly. An empty document is an empty config.
func parse(data []byte) (*Config, error) {
	dc := defaultConfig()
	c := &dc
	if len(bytes.TrimSpace(data)) == 0 {
		return c, nil
	}
	// Durations are checked on the node tree first: model.Duration's own
	// error carries neither the line nor the field name.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, syntaxError(data, err)
	}
	if err := checkDurations(&root); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return c, nil
		}
		return nil, withLine(data, yamlError(&root, err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, syntaxError(data, err) // junk after the document
		}
		return nil, fmt.Errorf("line %d: a second YAML document; expected exactly one", extra.Line)
	}
	return c, nil
}

var (
	unknownFieldRE = regexp.MustCompile(`field (\S+) not found in type (\S+)`)
	sectionNames   = map[string]string{
		"config.plainConfig":           "the top level (valid: global, targets, scenarios, sweep, power, engine, file_sd_configs, probe)",
		"config.plainGlobal":           "global",
		"config.plainTarget":           "targets[]",
		"config.ScenarioConfig":        "scenarios[]",
		"config.ThresholdsConfig":      "thresholds",
		"config.plain":                 "http_client_config",
		"config.plainSweep":            "sweep",
		"config.SweepClosedLoopConfig": "sweep.closed_loop",
		"config.SweepBurstConfig":      "sweep.burst",
		"config.SweepEarlyStopConfig":  "sweep.early_stop",
		"config.SweepCapacityConfig":   "sweep.capacity",
		"config.SweepScheduleConfig":   "sweep.schedule",
		"config.SweepPauseConfig":      "sweep.pause",
		"config.SweepDrainConfig":      "sweep.drain",
		"config.plainPower":            "power",
		"config.plainEngine":           "engine",
		"config.plainTracing":          "tracing",
		"config.plainEngineLive":       "engine.live",
		"config.plainFileSD":           "file_sd_configs[]",
		"config.plainProbe":            "probe",
		"config.targetGroup":           "a file_sd group (valid: targets, labels)",
	}
)

// yamlError turns yaml.v3's errors into one line per problem, each with its
// line number, and names sections the way the file does.
func yamlError(root *yaml.Node, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("parse config: %w", err)
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		m = typeError(root, m)
		msgs[i] = unknownFieldRE.ReplaceAllStringFunc(m, func(s string) string {
			sub := unknownFieldRE.FindStringSubmatch(s)
			section, ok := sectionNames[sub[2]]
			if !ok {
				section = sub[2]
			}
			return fmt.Sprintf("unknown field %q in %s", sub[1], section)
		})
	}
	return fmt.Errorf("parse config: %s", strings.Join(msgs, "; "))
}

// durationFields lists, per section path ("global", "scenarios[].thresholds"),
// the keys holding a model.Duration. It is read off the types, so sections
// added later are covered too.
var durationFields = durationPaths(reflect.TypeOf(plainConfig{}), "", map[string][]string{}, 0)

var durationType = reflect.TypeOf(model.Duration(0))

func durationPaths(t reflect.Type, path string, out map[string][]string, depth int) map[string][]string {
	if depth > 8 || t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("yaml"), ",")
		name := tag[0]
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if len(tag) > 1 && tag[1] == "inline" {
			durationPaths(ft, path, out, depth+1)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		sub := name
		if path != "" {
			sub = path + "." + name
		}
		switch {
		case ft == durationType:
			out[path] = append(out[path], name)
		case ft.Kind() == reflect.Struct:
			durationPaths(ft, sub, out, depth+1)
		case ft.Kind() == reflect.Slice:
			et := ft.Elem()
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			durationPaths(et, sub+"[]", out, depth+1)
		}
	}
	return out
}

// checkDurations reports the first duration that does not parse, with its
// line and field.
func checkDurations(root *yaml.Node) error {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	var walk func(n *yaml.Node, path string) error
	walk = func(n *yaml.Node, path string) error {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				for _, f := range durationFields[path] {
					if k.Value != f || v.Kind != yaml.ScalarNode {
						continue
					}
					if d, err := model.ParseDuration(strings.TrimPrefix(v.Value, "-")); err == nil && strings.HasPrefix(v.Value, "-") && d > 0 {
						return fmt.Errorf("parse config: line %d: %s: %q is negative; expected a positive duration, e.g. 30s", v.Line, f, v.Value)
					}
					if _, err := model.ParseDuration(v.Value); err != nil {
						return fmt.Errorf("parse config: line %d: %s: %q is not a valid duration; expected a number with a unit (ms, s, m, h, d), e.g. 30s or 1m30s", v.Line, f, v.Value)
					}
				}
				sub := k.Value
				if path != "" {
					sub = path + "." + k.Value
				}
				if err := walk(v, sub); err != nil {
					return err
				}
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				if err := walk(c, path+"[]"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(doc, "")
}

var scenarioNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// finish fills defaults that depend on other fields, validates everything
// and resolves the scenario catalog.
func (c *Config) finish() error {
	if err := c.checkFinite(); err != nil {
		return err
	}
	g := &c.Global
	switch {
	case g.Jitter < 0 || g.Jitter >= 1:
		return fmt.Errorf("global.jitter=%g; expected a fraction in [0, 1), e.g. 0.2 for ±20%%", g.Jitter)
	case g.MaxInFlightPerTarget < 1 || g.MaxInFlightPerTarget > MaxConcurrency:
		return fmt.Errorf("global.max_in_flight_per_target=%d; expected from 1 to %d", g.MaxInFlightPerTarget, MaxConcurrency)
	case g.StallTimeout < 0:
		return fmt.Errorf("global.stall_timeout=%s; expected a duration >= 0 (0 disables it)", g.StallTimeout)
	case g.MaxLineBytes < 4096 || g.MaxLineBytes > MaxLineBytes:
		return fmt.Errorf("global.max_line_bytes=%d; expected from 4096 to %d (64 MiB)", g.MaxLineBytes, MaxLineBytes)
	case g.ModelRefreshInterval < model.Duration(10*time.Second):
		return fmt.Errorf("global.model_refresh_interval=%s; expected at least 10s", g.ModelRefreshInterval)
	case !contains([]string{"full", "reduced", "none"}, g.ClassicHistogramBuckets):
		return fmt.Errorf("global.classic_histogram_buckets=%q; expected full, reduced or none", g.ClassicHistogramBuckets)
	}

	if err := checkMaxAnswerBytes(g.MaxAnswerBytes); err != nil {
		return err
	}

	if err := c.resolveScenarios(); err != nil {
		return err
	}
	valid := c.scenarioNames()
	field := "global.scenarios"
	if c.scenariosFlag {
		field = "--scenarios"
	}
	if len(g.Scenarios) == 0 {
		return fmt.Errorf("%s is empty; expected at least one of: %s", field, strings.Join(valid, ", "))
	}
	if err := c.checkList(field, g.Scenarios, valid); err != nil {
		return err
	}
	// An unknown scenario to sweep is an error for the daemon's sweeps as
	// for bench, caught here so check-config and reloads reject it too.
	if err := c.checkList("sweep.scenarios", c.Sweep.Scenarios, valid); err != nil {
		return err
	}

	// `targets: []` (present but empty) and file_sd_configs may leave no
	// targets: such a slaprobe probes what /probe is asked to.
	if len(c.TargetConfigs) == 0 && c.TargetConfigs == nil && len(c.FileSDConfigs) == 0 {
		return errors.New("no targets; expected at least one in `targets`, a file_sd_configs entry or a --target.url flag (or `targets: []` to probe only through /probe)")
	}
	c.enabled = make(map[string][]string, len(c.TargetConfigs))
	for i := range c.TargetConfigs {
		t := &c.TargetConfigs[i]
		where := fmt.Sprintf("targets[%d]", i)
		if t.fromFlag {
			where = fmt.Sprintf("--target.url=%q", RedactURL(t.URL))
		} else if t.origin != "" {
			where = t.origin
		}
		if err := t.finish(); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if _, dup := c.enabled[t.Name]; dup {
			return fmt.Errorf("%s: name %q is used twice; expected unique target names", where, t.Name)
		}
		if t.Scenarios != nil {
			if len(t.Scenarios) == 0 {
				return fmt.Errorf("targets[%d] (%s): scenarios is empty; expected at least one of: %s", i, t.Name, strings.Join(valid, ", "))
			}
			if err := c.checkList(fmt.Sprintf("targets[%d] (%s): scenarios", i, t.Name), t.Scenarios, valid); err != nil {
				return err
			}
		}
		c.enabled[t.Name] = c.enabledFor(t)
	}
	names := make([]string, 0, len(c.TargetConfigs))
	for _, t := range c.TargetConfigs {
		names = append(names, t.Name)
	}
	if err := c.Power.CheckTargets(names); err != nil {
		return err
	}
	return CheckLiveSignals(c.Engine, c.Power)
}

func (t *TargetConfig) finish() error {
	if t.URL == "" {
		return errors.New("url is empty; expected the server's base URL, e.g. http://vllm:8000")
	}
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url=%q; expected an absolute http:// or https:// URL, e.g. http://vllm:8000", RedactURL(t.URL))
	}
	if u.User != nil || hasUserinfo(t.URL) {
		// It would be printed by /config and logged with every failure.
		return fmt.Errorf("url=%q carries credentials; expected them in http_client_config (basic_auth or authorization), where they stay secret", RedactURL(t.URL))
	}
	base := strings.TrimRight(t.URL, "/")
	base = strings.TrimSuffix(base, "/v1")
	t.URL = strings.TrimRight(base, "/")
	if t.Name == "" {
		t.Name = u.Host
	}
	if t.MetricsURL == "" {
		t.MetricsURL = t.URL + "/metrics"
	} else if m, err := url.Parse(t.MetricsURL); err != nil || (m.Scheme != "http" && m.Scheme != "https") || m.Host == "" {
		return fmt.Errorf("metrics_url=%q; expected an absolute http:// or https:// URL", RedactURL(t.MetricsURL))
	} else if m.User != nil || hasUserinfo(t.MetricsURL) {
		return fmt.Errorf("metrics_url=%q carries credentials; expected them in http_client_config, where they stay secret", RedactURL(t.MetricsURL))
	}
	if t.API == "" {
		t.API = prober.APIChat
	}
	if !t.API.Valid() {
		return fmt.Errorf("api=%q; expected %s", t.API, prober.APIList())
	}
	if err := t.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("http_client_config: %w", err)
	}
	noFollow(&t.HTTPClientConfig)
	// Building the client once catches unreadable TLS files at load time.
	if _, err := NewTargetClient(t.HTTPClientConfig, "slaprobe"); err != nil {
		return fmt.Errorf("http_client_config: %w", err)
	}
	return nil
}

// checkList rejects unknown and repeated scenario names.
func (c *Config) checkList(field string, names, valid []string) error {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if c.lookup(n) == nil {
			return fmt.Errorf("%s: unknown scenario %q; expected one of: %s", field, n, strings.Join(valid, ", "))
		}
		if seen[n] {
			return fmt.Errorf("%s: scenario %q is listed twice", field, n)
		}
		seen[n] = true
	}
	return nil
}

// enabledFor lists the scenarios a target probes: its own list when it has
// one, otherwise global.scenarios followed by every custom scenario.
func (c *Config) enabledFor(t *TargetConfig) []string {
	if t.Scenarios != nil {
		return append([]string(nil), t.Scenarios...)
	}
	out := append([]string(nil), c.Global.Scenarios...)
	for _, s := range c.resolved {
		if s.Family == prober.FamilyCustom && !contains(out, s.Name) {
			out = append(out, s.Name)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scenarioNames lists every known scenario name, sorted.
func (c *Config) scenarioNames() []string {
	names := make([]string, 0, len(c.resolved))
	for _, s := range c.resolved {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return names
}

func (c *Config) lookup(name string) *prober.Scenario {
	for i := range c.resolved {
		if c.resolved[i].Name == name {
			return &c.resolved[i]
		}
	}
	return nil
}

// AllScenarios returns every scenario the config knows, built-in ones (with
// their overrides) first, then custom ones in file order.
func (c *Config) AllScenarios() []prober.Scenario {
	return append([]prober.Scenario(nil), c.resolved...)
}

// Scenarios returns the scenarios enabled on the named target, or nil when
// there is no such target.
func (c *Config) Scenarios(target string) []prober.Scenario {
	names, ok := c.enabled[target]
	if !ok {
		return nil
	}
	out := make([]prober.Scenario, 0, len(names))
	for _, n := range names {
		out = append(out, *c.lookup(n))
	}
	return out
}

// Targets builds the prober's view of every target, each with an HTTP
// client made from its http_client_config.
func (c *Config) Targets() ([]prober.Target, error) {
	out := make([]prober.Target, 0, len(c.TargetConfigs))
	for _, t := range c.TargetConfigs {
		client, err := NewTargetClient(t.HTTPClientConfig, "slaprobe_"+t.Name)
		if err != nil {
			return nil, fmt.Errorf("target %s: http_client_config: %w", t.Name, err)
		}
		var headers map[string]string
		if len(t.Headers) > 0 {
			headers = make(map[string]string, len(t.Headers))
			for k, v := range t.Headers {
				headers[k] = v
			}
		}
		out = append(out, prober.Target{
			Name:         t.Name,
			BaseURL:      t.URL,
			Model:        t.Model,
			MetricsURL:   t.MetricsURL,
			API:          t.API,
			Client:       client,
			StallTimeout: time.Duration(c.Global.StallTimeout),
			Headers:      headers,

			PerRequestMetrics: t.PerRequestMetrics,
		})
	}
	return out, nil
}
