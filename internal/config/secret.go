package config

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// SecretPlaceholder is what every printed secret is replaced with.
const SecretPlaceholder = "<secret>"

// Headers are HTTP headers slaprobe adds to every request of a target
// (targets[].headers, probe.headers, file_sd_configs[].headers). Any of
// them may carry an API key, whatever its name, so every way of printing
// them hides the values: YAML and JSON marshalling (/config, check-config),
// fmt's %v and %s, and slog. The names stay visible. Code that sends the
// headers reads the map itself.
type Headers map[string]string

// MarshalYAML prints every value as <secret>.
func (h Headers) MarshalYAML() (any, error) {
	if h == nil {
		return nil, nil
	}
	return h.redacted(), nil
}

// MarshalJSON prints every value as "<secret>".
func (h Headers) MarshalJSON() ([]byte, error) {
	if h == nil {
		return []byte("null"), nil
	}
	return json.Marshal(h.redacted())
}

// String lists the names, each with <secret> as its value.
func (h Headers) String() string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, k := range names {
		names[i] = k + ":" + SecretPlaceholder
	}
	return "map[" + strings.Join(names, " ") + "]"
}

// Format makes every fmt verb (%v, %+v, %#v, %q...) print String.
func (h Headers) Format(f fmt.State, _ rune) { fmt.Fprint(f, h.String()) }

func (h Headers) redacted() map[string]string {
	out := make(map[string]string, len(h))
	for k := range h {
		out[k] = SecretPlaceholder
	}
	return out
}

// RedactURL hides the user information of a URL, "user:pass@" or
// "token@", as <secret>@, for printing. It works on text that does not
// parse as a URL too, since error messages print such text.
func RedactURL(raw string) string {
	rest, scheme := raw, ""
	if i := strings.Index(raw, "://"); i >= 0 {
		scheme, rest = raw[:i+3], raw[i+3:]
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return raw
	}
	return scheme + SecretPlaceholder + rest[at:]
}

// hasUserinfo reports whether raw, parsed or not, carries "…@" before its
// host.
func hasUserinfo(raw string) bool { return RedactURL(raw) != raw }

// redactClientSecrets hides, in an encoded config, what
// prometheus/common's http_client_config prints in clear although it may
// carry a secret: the values of http_headers (its secrets are already
// hidden) and oauth2.endpoint_params.
func redactClientSecrets(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch {
			case k.Value == "http_headers" && v.Kind == yaml.MappingNode:
				for j := 1; j < len(v.Content); j += 2 {
					hdr := v.Content[j]
					for m := 0; m+1 < len(hdr.Content); m += 2 {
						if hdr.Content[m].Value == "values" {
							redactScalars(hdr.Content[m+1])
						}
					}
				}
			case k.Value == "endpoint_params" && v.Kind == yaml.MappingNode:
				for j := 1; j < len(v.Content); j += 2 {
					redactScalars(v.Content[j])
				}
			}
		}
	}
	for _, c := range n.Content {
		redactClientSecrets(c)
	}
}

func redactScalars(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode {
		if n.Value != "" {
			n.Value, n.Tag, n.Style = SecretPlaceholder, "!!str", 0
		}
		return
	}
	for _, c := range n.Content {
		redactScalars(c)
	}
}
