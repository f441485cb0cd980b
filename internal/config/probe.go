package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/prober"
)

// ProbeConfig sets up the /probe?target=…&scenario=… endpoint, which a
// Prometheus drives the way it drives the blackbox exporter. A `target`
// that names a configured target (static or discovered) is probed with that
// target's settings. Any other is an address (host:port or a base URL)
// probed with the template fields below, and only when allowed_targets
// lists it: by default /probe goes nowhere the config does not name, as
// it carries the probe section's credentials and loads the server it
// reaches.
type ProbeConfig struct {
	TargetTemplate `yaml:",inline"`
	// TimeoutOffset is taken off the scrape timeout Prometheus sends
	// (X-Prometheus-Scrape-Timeout-Seconds), so that the answer arrives in
	// time (default 500ms).
	TimeoutOffset model.Duration `yaml:"timeout_offset"`
	// AllowedTargets lists where /probe may go besides the configured
	// targets: URL prefixes (http://gateway:8000/v1), host patterns
	// (vllm.llm.svc, *.pods.svc.cluster.local, optionally with :port) and
	// CIDRs (10.0.0.0/8), which match a literal IP in the target only
	// (names are never resolved to be matched). Empty: configured targets
	// only.
	AllowedTargets []string `yaml:"allowed_targets,omitempty"`
	// MaxConcurrent caps the /probe requests running at once; beyond it
	// /probe answers 429 with Retry-After (default 8).
	MaxConcurrent int `yaml:"max_concurrent"`

	allow []targetRule // AllowedTargets, parsed by checkProbe
}

// Defaults of the probe section.
const (
	DefaultProbeTimeoutOffset = 500 * time.Millisecond
	DefaultProbeMaxConcurrent = 8
	// MaxProbeParamBytes is the longest target or scenario parameter
	// /probe accepts.
	MaxProbeParamBytes = 2048
	maxProbeConcurrent = 10000
)

// DefaultProbeScenarios is the default of probe.scenarios: what /probe may
// run on a target that is not a configured one. Short and cheap (a 1K-token
// prompt, 256 tokens out); list more to widen it.
var DefaultProbeScenarios = []string{"chatbot"}

// DefaultProbeConfig returns the defaults of the probe section.
func DefaultProbeConfig() ProbeConfig {
	p := ProbeConfig{TargetTemplate: defaultTemplate(), TimeoutOffset: model.Duration(DefaultProbeTimeoutOffset),
		MaxConcurrent: DefaultProbeMaxConcurrent}
	p.Scenarios = append([]string(nil), DefaultProbeScenarios...)
	return p
}

type plainProbe ProbeConfig

// UnmarshalYAML sets the defaults of the probe section.
func (p *ProbeConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*p = DefaultProbeConfig()
	return unmarshal((*plainProbe)(p))
}

// OrDefault returns p, or the defaults when the section was absent.
func (p ProbeConfig) OrDefault() ProbeConfig {
	if reflect.DeepEqual(p, ProbeConfig{}) {
		return DefaultProbeConfig()
	}
	return p
}

// checkProbe validates the probe section; dir is the config file's
// directory, for relative file names in http_client_config.
func (c *Config) checkProbe(dir string) error {
	c.Probe = c.Probe.OrDefault()
	p := &c.Probe
	if dir != "" {
		p.HTTPClientConfig.SetDirectory(dir)
	}
	if p.TimeoutOffset < 0 {
		return fmt.Errorf("probe.timeout_offset=%s; expected a duration >= 0", p.TimeoutOffset)
	}
	if !p.API.Valid() {
		return fmt.Errorf("probe.api=%q; expected %s", p.API, prober.APIList())
	}
	if err := p.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("probe.http_client_config: %w", err)
	}
	if p.MaxConcurrent < 1 || p.MaxConcurrent > maxProbeConcurrent {
		return fmt.Errorf("probe.max_concurrent=%d; expected 1 to %d", p.MaxConcurrent, maxProbeConcurrent)
	}
	noFollow(&p.HTTPClientConfig)
	if p.Scenarios != nil {
		if err := c.checkList("probe.scenarios", p.Scenarios, c.scenarioNames()); err != nil {
			return err
		}
	}
	p.allow = p.allow[:0:0]
	for i, s := range p.AllowedTargets {
		r, err := parseTargetRule(s)
		if err != nil {
			return fmt.Errorf("probe.allowed_targets[%d]=%q: %w", i, s, err)
		}
		p.allow = append(p.allow, r)
	}
	return nil
}

// Scenario returns the known scenario called name.
func (c *Config) Scenario(name string) (prober.Scenario, bool) {
	if s := c.lookup(name); s != nil {
		return *s, true
	}
	return prober.Scenario{}, false
}

// ScenarioNames lists every known scenario name, sorted.
func (c *Config) ScenarioNames() []string { return c.scenarioNames() }

// Reasons a /probe request is refused (ProbeRefusal.Reason): a fixed set,
// the reason label of slaprobe_probe_requests_refused_total.
const (
	RefusedMissing            = "missing"              // no target or no scenario parameter (400)
	RefusedTooLong            = "too_long"             // a parameter over MaxProbeParamBytes (400)
	RefusedMalformed          = "malformed"            // not host:port nor a URL (400)
	RefusedScheme             = "scheme"               // a scheme other than http and https (400)
	RefusedUserinfo           = "userinfo"             // user:password@ in the target (400)
	RefusedQuery              = "query"                // '?' in the target (400)
	RefusedFragment           = "fragment"             // '#' in the target (400)
	RefusedNotAllowed         = "not_allowed"          // neither configured nor in probe.allowed_targets (403)
	RefusedUnknownScenario    = "unknown_scenario"     // no such scenario (400)
	RefusedScenarioNotAllowed = "scenario_not_allowed" // not enabled for this target (403)
)

// ProbeRefusalReasons lists every reason ProbeTarget refuses with.
var ProbeRefusalReasons = []string{RefusedMissing, RefusedTooLong, RefusedMalformed, RefusedScheme, RefusedUserinfo,
	RefusedQuery, RefusedFragment, RefusedNotAllowed, RefusedUnknownScenario, RefusedScenarioNotAllowed}

// ProbeRefusal is why ProbeTarget refused a request: Status is the HTTP
// status to answer (400 for a malformed request, 403 for one not allowed),
// Reason one of ProbeRefusalReasons.
type ProbeRefusal struct {
	Status int
	Reason string
	Msg    string
}

func (e *ProbeRefusal) Error() string { return e.Msg }

func badProbe(reason, format string, args ...any) *ProbeRefusal {
	return &ProbeRefusal{Status: 400, Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

func forbiddenProbe(reason, format string, args ...any) *ProbeRefusal {
	return &ProbeRefusal{Status: 403, Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// quoteParam quotes a parameter for an error message, cut to 200 bytes.
func quoteParam(s string) string {
	if len(s) > 200 {
		return strconv.Quote(s[:200]) + "…"
	}
	return strconv.Quote(s)
}

// ProbeTarget resolves the target parameter of /probe and the scenario
// named by the scenario parameter. A configured target's name, or its URL,
// gives that target and accepts its enabled scenarios. Anything else is
// parsed as host:port or a base URL (http or https, without credentials,
// query or fragment), must match probe.allowed_targets, takes the probe
// section's settings and accepts probe.scenarios. A refusal is a
// *ProbeRefusal. The target's HTTP client is new: close its idle
// connections when done.
func (c *Config) ProbeTarget(target, scenario string) (prober.Target, prober.Scenario, error) {
	if target == "" {
		return prober.Target{}, prober.Scenario{}, badProbe(RefusedMissing, "target parameter is missing; expected a configured target's name, host:port or a base URL")
	}
	if len(target) > MaxProbeParamBytes || len(scenario) > MaxProbeParamBytes {
		return prober.Target{}, prober.Scenario{}, badProbe(RefusedTooLong, "target or scenario parameter is %d bytes; expected at most %d",
			max(len(target), len(scenario)), MaxProbeParamBytes)
	}
	var tc TargetConfig
	allowed := c.Probe.Scenarios
	found := false
	for _, t := range c.TargetConfigs {
		if t.Name == target {
			tc, found = t, true
			break
		}
	}
	if !found {
		base, err := probeBaseURL(target)
		if err != nil {
			return prober.Target{}, prober.Scenario{}, err
		}
		for _, t := range c.TargetConfigs {
			if u, err := url.Parse(t.URL); err == nil && canonicalBase(u) == base.String() {
				tc, found = t, true
				break
			}
		}
		if !found {
			if !c.Probe.allows(base) {
				return prober.Target{}, prober.Scenario{}, forbiddenProbe(RefusedNotAllowed,
					"target=%s is not a configured target and matches no entry of probe.allowed_targets", quoteParam(target))
			}
			tc = TargetConfig{
				Name: target, URL: base.String(), Model: c.Probe.Model, API: c.Probe.API,
				Headers: c.Probe.Headers, HTTPClientConfig: c.Probe.HTTPClientConfig,
			}
			if err := tc.finish(); err != nil {
				return prober.Target{}, prober.Scenario{}, badProbe(RefusedMalformed, "target=%s: %v", quoteParam(target), err)
			}
			tc.Name = target
		}
	}
	if found {
		allowed = c.enabled[tc.Name]
	}
	if allowed == nil && found {
		allowed = c.scenarioNames()
	}
	if scenario == "" {
		return prober.Target{}, prober.Scenario{}, badProbe(RefusedMissing, "scenario parameter is missing; expected one of: %s", strings.Join(allowed, ", "))
	}
	s := c.lookup(scenario)
	if s == nil {
		return prober.Target{}, prober.Scenario{}, badProbe(RefusedUnknownScenario, "scenario=%s is not a known scenario; expected one of: %s",
			quoteParam(scenario), strings.Join(allowed, ", "))
	}
	if !contains(allowed, scenario) {
		where := "probe.scenarios"
		if found {
			where = "its scenarios"
		}
		return prober.Target{}, prober.Scenario{}, forbiddenProbe(RefusedScenarioNotAllowed, "scenario=%s is not available for target %s; expected one of: %s (%s)",
			quoteParam(scenario), quoteParam(target), strings.Join(allowed, ", "), where)
	}
	client, err := NewTargetClient(tc.HTTPClientConfig, "slaprobe_probe")
	if err != nil {
		return prober.Target{}, prober.Scenario{}, fmt.Errorf("target %s: http_client_config: %w", quoteParam(target), err)
	}
	return prober.Target{
		Name:         tc.Name,
		BaseURL:      tc.URL,
		Model:        tc.Model,
		MetricsURL:   tc.MetricsURL,
		API:          tc.API,
		Client:       client,
		StallTimeout: time.Duration(c.Global.StallTimeout),
		Headers:      tc.Headers,

		PerRequestMetrics: tc.PerRequestMetrics,
	}, *s, nil
}

// probeBaseURL parses a /probe target that is not a configured target's
// name: host:port or an http(s) base URL, refusing credentials, a query, a
// fragment and other schemes. The URL returned is rebuilt from its parts
// (scheme, host, path; no trailing / or /v1), so what reaches the prober is
// only ever a base to extend.
func probeBaseURL(target string) (*url.URL, error) {
	q := quoteParam(target)
	switch {
	case strings.ContainsRune(target, '#'):
		return nil, badProbe(RefusedFragment, "target=%s has a fragment ('#'); expected host:port or a base URL", q)
	case strings.ContainsRune(target, '?'):
		return nil, badProbe(RefusedQuery, "target=%s has a query ('?'); expected host:port or a base URL", q)
	}
	raw := target
	if i := strings.Index(raw, "://"); i >= 0 {
		scheme := strings.ToLower(raw[:i])
		if scheme != "http" && scheme != "https" {
			return nil, badProbe(RefusedScheme, "target=%s: scheme %s; expected http or https", q, quoteParam(scheme))
		}
	} else {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, badProbe(RefusedMalformed, "target=%s is neither a configured target nor host:port or a base URL", q)
	case u.User != nil:
		return nil, badProbe(RefusedUserinfo, "target=%s carries user information ('@'); expected host:port or a base URL, with credentials in probe.http_client_config", q)
	case u.RawQuery != "" || u.ForceQuery:
		return nil, badProbe(RefusedQuery, "target=%s has a query; expected host:port or a base URL", q)
	case u.Fragment != "":
		return nil, badProbe(RefusedFragment, "target=%s has a fragment; expected host:port or a base URL", q)
	case u.Opaque != "" || u.Hostname() == "":
		return nil, badProbe(RefusedMalformed, "target=%s has no host; expected host:port or a base URL", q)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, badProbe(RefusedMalformed, "target=%s: port %s; expected 1 to 65535", q, quoteParam(p))
		}
	}
	b, err := url.Parse(canonicalBase(u))
	if err != nil {
		return nil, badProbe(RefusedMalformed, "target=%s is neither a configured target nor host:port or a base URL", q)
	}
	return b, nil
}

// canonicalBase is u as a base URL: lower-case scheme and host, the path
// without a trailing / or /v1, no credentials, query or fragment.
func canonicalBase(u *url.URL) string {
	p := strings.TrimRight(u.Path, "/")
	p = strings.TrimRight(strings.TrimSuffix(p, "/v1"), "/")
	b := url.URL{Scheme: strings.ToLower(u.Scheme), Host: strings.ToLower(u.Host), Path: p}
	return b.String()
}

// targetRule is one entry of probe.allowed_targets.
type targetRule struct {
	prefix *url.URL     // a URL prefix: scheme, host and port, path prefix
	cidr   netip.Prefix // a CIDR or one IP, matched on a literal IP only
	host   string       // a host name, or a suffix ".example" for "*.example"
	port   string       // the port a host pattern asks for; "" any
}

func parseTargetRule(s string) (targetRule, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return targetRule{}, fmt.Errorf("empty; expected a URL prefix, a host pattern or a CIDR")
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return targetRule{cidr: p.Masked()}, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return targetRule{cidr: netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())}, nil
	}
	if strings.Contains(s, "://") {
		u, err := probeBaseURL(s)
		if err != nil {
			return targetRule{}, fmt.Errorf("expected a URL prefix such as http://gateway:8000/v1: %v", err)
		}
		return targetRule{prefix: u}, nil
	}
	host, port := s, ""
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, port = s[:i], s[i+1:]
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return targetRule{}, fmt.Errorf("port %q; expected 1 to 65535", port)
		}
	}
	host = strings.ToLower(host)
	name := strings.TrimPrefix(host, "*.")
	if name == "" || strings.ContainsAny(name, "*/@?#[] ") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
		return targetRule{}, fmt.Errorf("expected a URL prefix (http://host:port/path), a host pattern (host, *.suffix, optionally :port) or a CIDR (10.0.0.0/8)")
	}
	if host != name {
		name = "." + name // "*.example": any name under example
	}
	return targetRule{host: name, port: port}, nil
}

// effectivePort is u's port, or its scheme's default.
func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

func (r targetRule) matches(u *url.URL) bool {
	host := strings.ToLower(u.Hostname())
	switch {
	case r.prefix != nil:
		if u.Scheme != r.prefix.Scheme || host != strings.ToLower(r.prefix.Hostname()) || effectivePort(u) != effectivePort(r.prefix) {
			return false
		}
		p, want := u.Path, r.prefix.Path
		return want == "" || p == want || strings.HasPrefix(p, want+"/")
	case r.cidr.IsValid():
		a, err := netip.ParseAddr(host)
		return err == nil && a.Zone() == "" && r.cidr.Contains(a.Unmap())
	default:
		if r.port != "" && effectivePort(u) != r.port {
			return false
		}
		if strings.HasPrefix(r.host, ".") {
			return strings.HasSuffix(host, r.host) && len(host) > len(r.host)
		}
		return host == r.host
	}
}

// allows reports whether base, a URL probeBaseURL gave, matches an entry
// of allowed_targets.
func (p *ProbeConfig) allows(base *url.URL) bool {
	for _, r := range p.allow {
		if r.matches(base) {
			return true
		}
	}
	return false
}
