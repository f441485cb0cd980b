package config

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/prober"
)

// ProbeConfig sets up the /probe?target=…&scenario=… endpoint, which a
// Prometheus drives the way it drives the blackbox exporter. A `target`
// that names a configured target (static or discovered) is probed with that
// target's settings; any other is an address (host:port or a base URL)
// probed with the template fields below.
type ProbeConfig struct {
	TargetTemplate `yaml:",inline"`
	// TimeoutOffset is taken off the scrape timeout Prometheus sends
	// (X-Prometheus-Scrape-Timeout-Seconds), so that the answer arrives in
	// time (default 500ms).
	TimeoutOffset model.Duration `yaml:"timeout_offset"`
}

// DefaultProbeTimeoutOffset is the default of probe.timeout_offset.
const DefaultProbeTimeoutOffset = 500 * time.Millisecond

// DefaultProbeConfig returns the defaults of the probe section.
func DefaultProbeConfig() ProbeConfig {
	return ProbeConfig{TargetTemplate: defaultTemplate(), TimeoutOffset: model.Duration(DefaultProbeTimeoutOffset)}
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
		return fmt.Errorf("probe.api=%q; expected chat, completions, responses or messages", p.API)
	}
	if err := p.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("probe.http_client_config: %w", err)
	}
	if p.Scenarios != nil {
		if err := c.checkList("probe.scenarios", p.Scenarios, c.scenarioNames()); err != nil {
			return err
		}
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

// ProbeTarget resolves the target parameter of /probe and the scenario
// named by the scenario parameter. A configured target's name gives that
// target and accepts its enabled scenarios; anything else is parsed as
// host:port or a base URL, takes the probe section's settings and accepts
// probe.scenarios (default: every known scenario). The target's HTTP
// client is new: close its idle connections when done.
func (c *Config) ProbeTarget(target, scenario string) (prober.Target, prober.Scenario, error) {
	if target == "" {
		return prober.Target{}, prober.Scenario{}, fmt.Errorf("target parameter is missing; expected a configured target's name, host:port or a base URL")
	}
	var tc TargetConfig
	allowed := c.Probe.Scenarios
	found := false
	for _, t := range c.TargetConfigs {
		if t.Name == target {
			tc, found = t, true
			allowed = c.enabled[t.Name]
			break
		}
	}
	if !found {
		u := target
		if !strings.Contains(u, "://") {
			u = "http://" + u
		}
		if p, err := url.Parse(u); err != nil || p.Host == "" {
			return prober.Target{}, prober.Scenario{}, fmt.Errorf("target=%q is neither a configured target nor host:port or a base URL", target)
		}
		tc = TargetConfig{
			Name: target, URL: u, Model: c.Probe.Model, API: c.Probe.API,
			Headers: c.Probe.Headers, HTTPClientConfig: c.Probe.HTTPClientConfig,
		}
		if err := tc.finish(); err != nil {
			return prober.Target{}, prober.Scenario{}, fmt.Errorf("target=%q: %w", target, err)
		}
		tc.Name = target
	}
	if allowed == nil {
		allowed = c.scenarioNames()
	}
	if scenario == "" {
		return prober.Target{}, prober.Scenario{}, fmt.Errorf("scenario parameter is missing; expected one of: %s", strings.Join(allowed, ", "))
	}
	s := c.lookup(scenario)
	if s == nil || !contains(allowed, scenario) {
		return prober.Target{}, prober.Scenario{}, fmt.Errorf("scenario=%q is not available for target %q; expected one of: %s", scenario, target, strings.Join(allowed, ", "))
	}
	client, err := promcfg.NewClientFromConfig(tc.HTTPClientConfig, "slaprobe_probe", promcfg.WithDialContextFunc(prober.DialKernelStamps))
	if err != nil {
		return prober.Target{}, prober.Scenario{}, fmt.Errorf("target %s: http_client_config: %w", target, err)
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
