package config

import (
	"errors"
	"strings"
	"testing"
)

// TestProbeAllowList checks which /probe targets each kind of
// probe.allowed_targets entry lets through, and that nothing else goes.
func TestProbeAllowList(t *testing.T) {
	c, err := LoadBytes([]byte(`
targets:
  - {name: vllm, url: 'http://vllm.llm.svc:8000/v1'}
probe:
  allowed_targets:
    - 10.0.0.0/8
    - fd00::/8
    - 192.168.1.7
    - '*.pods.svc.cluster.local'
    - gateway.llm.svc:8000
    - https://api.example.test/team-a
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target string
		reason string // "" allowed
	}{
		{"vllm", ""},                         // a configured target's name
		{"http://vllm.llm.svc:8000", ""},     // its URL
		{"http://VLLM.llm.svc:8000/v1/", ""}, // its URL, written otherwise
		{"10.1.2.3:8000", ""},                // CIDR
		{"http://10.255.0.1:80/x", ""},       // CIDR, any path
		{"[fd00::1]:8000", ""},               // IPv6 CIDR
		{"192.168.1.7:8000", ""},             // one IP
		{"192.168.1.8:8000", RefusedNotAllowed},
		{"11.0.0.1:8000", RefusedNotAllowed},
		{"10.0.0.1.nip.io:8000", RefusedNotAllowed}, // a name is never taken for the IP it looks like
		{"vllm-0.pods.svc.cluster.local:8000", ""},  // host pattern
		{"a.b.pods.svc.cluster.local:8000", ""},
		{"pods.svc.cluster.local:8000", RefusedNotAllowed}, // *. needs a label before the suffix
		{"evilpods.svc.cluster.local:8000", RefusedNotAllowed},
		{"gateway.llm.svc:8000", ""},
		{"gateway.llm.svc:8001", RefusedNotAllowed}, // the pattern names its port
		{"https://api.example.test/team-a", ""},
		{"https://api.example.test:443/team-a/v1", ""},
		{"https://api.example.test/team-ab", RefusedNotAllowed}, // a prefix ends at a segment
		{"https://api.example.test/team-b", RefusedNotAllowed},
		{"http://api.example.test/team-a", RefusedNotAllowed}, // another scheme
		{"https://api.example.test:8443/team-a", RefusedNotAllowed},
		{"127.0.0.1:8000", RefusedNotAllowed},
		{"http://10.0.0.5:8080/admin#", RefusedFragment},
		{"http://10.0.0.5:8080/admin?x=1", RefusedQuery},
		{"http://10.0.0.5:8080/admin?", RefusedQuery},
		{"http://user:pw@10.0.0.5:8080", RefusedUserinfo},
		{"user@10.0.0.5:8080", RefusedUserinfo},
		{"ftp://10.0.0.5:21", RefusedScheme},
		{"file:///etc/passwd", RefusedScheme},
		{"10.0.0.5:99999", RefusedMalformed},
		{"10.0.0.5:abc", RefusedMalformed},
		{"http://", RefusedMalformed},
		{"http://10.0.0.5/\x7f", RefusedMalformed},
		{"10.0.0.5:8000/" + strings.Repeat("a", MaxProbeParamBytes), RefusedTooLong},
		{"", RefusedMissing},
	} {
		_, _, err := c.ProbeTarget(tc.target, "chatbot")
		var pr *ProbeRefusal
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("ProbeTarget(%.60q): %v; want it allowed", tc.target, err)
		case tc.reason != "" && (!errors.As(err, &pr) || pr.Reason != tc.reason):
			t.Errorf("ProbeTarget(%.60q): %v; want a refusal for %s", tc.target, err, tc.reason)
		case pr != nil && pr.Status != map[bool]int{true: 403, false: 400}[tc.reason == RefusedNotAllowed]:
			t.Errorf("ProbeTarget(%.60q): status %d", tc.target, pr.Status)
		}
	}
}

// TestProbeBaseURL checks that what reaches the prober is only ever a base
// URL to extend: the '#' and '?' tricks are refused, and an escaped one
// stays in the path.
func TestProbeBaseURL(t *testing.T) {
	c, err := LoadBytes([]byte("targets: []\nprobe: {allowed_targets: [10.0.0.0/8]}"))
	if err != nil {
		t.Fatal(err)
	}
	tg, _, err := c.ProbeTarget("http://10.0.0.5:8080/admin%23", "chatbot")
	if err != nil || tg.BaseURL != "http://10.0.0.5:8080/admin%23" {
		t.Errorf("an escaped '#': %q %v; want it kept in the path", tg.BaseURL, err)
	}
}

func TestProbeConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yml, want string }{
		{"probe: {allowed_targets: ['']}", "probe.allowed_targets[0]=\"\": empty"},
		{"probe: {allowed_targets: ['ftp://h/']}", "probe.allowed_targets[0]=\"ftp://h/\": expected a URL prefix"},
		{"probe: {allowed_targets: ['http://u:p@h/']}", "probe.allowed_targets[0]"},
		{"probe: {allowed_targets: ['h:0']}", "port \"0\"; expected 1 to 65535"},
		{"probe: {allowed_targets: ['a*.b']}", "expected a URL prefix (http://host:port/path), a host pattern"},
		{"probe: {allowed_targets: ['*']}", "a host pattern"},
		{"probe: {allowed_targets: ['10.0.0.0/33']}", "probe.allowed_targets[0]"},
		{"probe: {max_concurrent: 0}", "probe.max_concurrent=0; expected 1 to 10000"},
		{"probe: {scenarios: [nope]}", "probe.scenarios: unknown scenario \"nope\""},
	} {
		if _, err := LoadBytes([]byte("targets: []\n" + tc.yml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.yml, err, tc.want)
		}
	}
}
