package config

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"reflect"
	"regexp"
	"sort"
	"strings"

	promcfg "github.com/prometheus/common/config"
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

// minScrubbed is the shortest secret Scrub hides: a shorter value cannot be
// told from ordinary text, and hiding it would garble every message.
const minScrubbed = 6

var (
	secretType    = reflect.TypeOf(promcfg.Secret(""))
	headersType   = reflect.TypeOf(Headers(nil))
	promURLType   = reflect.TypeOf(promcfg.URL{})
	basicAuthType = reflect.TypeOf(promcfg.BasicAuth{})
	promHdrType   = reflect.TypeOf(promcfg.Header{})
	oauth2Type    = reflect.TypeOf(promcfg.OAuth2{})
)

// secretValues collects every secret the config holds, found by walking its
// types: header values (and the token after an auth scheme such as
// "Bearer "), prometheus/common secrets, http_headers values,
// oauth2.endpoint_params, a proxy_url's password and the base64 form of
// basic auth. A server that echoes a credential into an error (a gateway's
// "invalid key sk-…") would otherwise put it in the probe's error text.
func (c *Config) secretValues() []string {
	seen := map[string]bool{}
	add := func(s string) {
		if len(s) >= minScrubbed {
			seen[s] = true
		}
	}
	var walk func(v reflect.Value, depth int)
	walk = func(v reflect.Value, depth int) {
		if depth > 16 || !v.IsValid() {
			return
		}
		switch v.Type() {
		case secretType:
			add(v.String())
			return
		case headersType:
			for _, k := range v.MapKeys() {
				val := v.MapIndex(k).String()
				add(val)
				if _, token, ok := strings.Cut(val, " "); ok {
					add(strings.TrimSpace(token))
				}
			}
			return
		case promURLType:
			if u := v.Interface().(promcfg.URL); u.URL != nil && u.User != nil {
				p, _ := u.User.Password()
				add(p)
				add(u.User.Username())
			}
			return
		case basicAuthType:
			b := v.Interface().(promcfg.BasicAuth)
			if b.Password != "" {
				add(base64.StdEncoding.EncodeToString([]byte(b.Username + ":" + string(b.Password))))
			}
		case promHdrType:
			for _, s := range v.Interface().(promcfg.Header).Values {
				add(s)
			}
		case oauth2Type:
			for _, s := range v.Interface().(promcfg.OAuth2).EndpointParams {
				add(s)
			}
		}
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem(), depth+1)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i), depth+1)
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), depth+1)
			}
		case reflect.Map:
			iter := v.MapRange()
			for iter.Next() {
				walk(iter.Value(), depth+1)
			}
		}
	}
	walk(reflect.ValueOf(c).Elem(), 0)
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	// Longest first, so that a secret containing another is hidden whole.
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

var htmlEscapes = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "+", "&#43;", "\x00", "\uFFFD")

// newScrubber replaces every secret of a config, as written and as HTML
// escapes it, with <secret>.
func newScrubber(secrets []string) *strings.Replacer {
	if len(secrets) == 0 {
		return nil
	}
	var pairs []string
	for _, s := range secrets {
		pairs = append(pairs, s, SecretPlaceholder)
		// html/template escapes text as htmlEscapes does.
		if e := htmlEscapes.Replace(s); e != s {
			pairs = append(pairs, e, SecretPlaceholder)
		}
		if e := html.EscapeString(s); e != s {
			pairs = append(pairs, e, SecretPlaceholder)
		}
	}
	return strings.NewReplacer(pairs...)
}

// Scrub replaces, in text meant for a page or a log, every secret of the
// config with <secret>. The config's own printouts never hold one; this is
// for text that comes from elsewhere, such as an error a server answered.
func (c *Config) Scrub(text string) string {
	if c != nil && c.scrubber != nil {
		text = c.scrubber.Replace(text)
	}
	return ScrubURLs(text)
}

// userinfoRE matches the user information of a URL in running text:
// scheme://user:password@ or scheme://token@.
var userinfoRE = regexp.MustCompile(`\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s"'<>]+@`)

// ScrubURLs hides the user information of every URL in text as <secret>@:
// the config refuses URLs with it, but a caller may put one in a /probe
// target and it would be logged.
func ScrubURLs(text string) string {
	if !strings.Contains(text, "@") {
		return text
	}
	return userinfoRE.ReplaceAllString(text, "${1}"+SecretPlaceholder+"@")
}
