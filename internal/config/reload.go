package config

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"gopkg.in/yaml.v3"
)

// SafeConfig holds the current config for concurrent readers and reloads it.
type SafeConfig struct {
	flags Flags

	mu     sync.RWMutex
	c      *Config
	sum    [sha256.Size]byte
	loaded bool
}

// NewSafeConfig returns an empty holder; the quick flags are applied on
// every load.
func NewSafeConfig(f Flags) *SafeConfig {
	return &SafeConfig{flags: f}
}

// Get returns the current config; nil before the first successful Reload.
// Treat it as read-only.
func (s *SafeConfig) Get() *Config {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.c
}

// Reload reads path (none when empty) and, when its content differs from the
// last successful load, validates it and makes it current. A file that
// fails keeps the old config and returns the error; changed reports whether
// a new config took effect.
func (s *SafeConfig) Reload(path string) (changed bool, err error) {
	var data []byte
	if path != "" {
		data, err = os.ReadFile(path)
		if err != nil {
			return false, fmt.Errorf("read config: %w", err)
		}
	}
	sum := sha256.Sum256(data)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded && sum == s.sum && !s.c.TargetFilesChanged() {
		return false, nil
	}
	c, err := build(data, filepath.Dir(path), s.flags)
	if err != nil {
		if path != "" {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return false, err
	}
	s.c, s.sum, s.loaded = c, sum, true
	return true, nil
}

// Redacted returns the effective config as YAML: defaults filled in, every
// scenario with all its fields, each target with the scenarios it probes,
// and secrets shown as <secret>: every value of every headers map (the
// Headers type), prometheus/common's secrets, the values of http_headers
// and oauth2.endpoint_params, and the password of a proxy_url.
func (c *Config) Redacted() string {
	out := *c
	out.TargetConfigs = make([]TargetConfig, len(c.TargetConfigs))
	for i, t := range c.TargetConfigs {
		t.Scenarios = c.enabled[t.Name]
		out.TargetConfigs[i] = t
	}
	out.ScenarioConfigs = make([]ScenarioConfig, len(c.resolved))
	for i, s := range c.resolved {
		out.ScenarioConfigs[i] = scenarioConfigOf(s)
	}
	var doc yaml.Node
	if err := doc.Encode((*plainConfig)(&out)); err != nil {
		return fmt.Sprintf("# cannot print the config: %v\n", err)
	}
	flowScalarLists(&doc)
	redactClientSecrets(&doc)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Sprintf("# cannot print the config: %v\n", err)
	}
	return buf.String()
}

// flowScalarLists prints lists of scalars on one line: [chatbot, rag].
func flowScalarLists(n *yaml.Node) {
	if n.Kind == yaml.SequenceNode && len(n.Content) > 0 {
		flow := true
		for _, c := range n.Content {
			flow = flow && c.Kind == yaml.ScalarNode
		}
		if flow {
			n.Style = yaml.FlowStyle
		}
	}
	for _, c := range n.Content {
		flowScalarLists(c)
	}
}
