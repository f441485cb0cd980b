package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestHeadersNeverPrintValues(t *testing.T) {
	h := Headers{"X-Api-Key": "sk-live-123456", "X-Team": "ml-platform"}
	j, _ := json.Marshal(struct{ H Headers }{h})
	var sb strings.Builder
	slog.New(slog.NewJSONHandler(&sb, nil)).Info("x", "headers", h)
	slog.New(slog.NewTextHandler(&sb, nil)).Info("x", "headers", h)
	for name, out := range map[string]string{
		"json": string(j), "%v": fmt.Sprintf("%v", h), "%+v": fmt.Sprintf("%+v", h), "%#v": fmt.Sprintf("%#v", h),
		"%s": fmt.Sprintf("%s", h), "slog": sb.String(),
	} {
		if strings.Contains(out, "sk-live") || strings.Contains(out, "ml-platform") {
			t.Errorf("%s prints a header value: %s", name, out)
		}
		if !strings.Contains(out, "X-Api-Key") {
			t.Errorf("%s hides the header name: %s", name, out)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://vllm:8000":             "http://vllm:8000",
		"http://u:p@vllm:8000/v1":      "http://<secret>@vllm:8000/v1",
		"https://token@vllm":           "https://<secret>@vllm",
		"http://u:p@[::1":              "http://<secret>@[::1",
		"u:p@10.0.0.1:8000":            "<secret>@10.0.0.1:8000",
		"http://vllm:8000/a@b":         "http://vllm:8000/a@b",
		"http://a@b:c@vllm:8000?x=y@z": "http://<secret>@vllm:8000?x=y@z",
		"":                             "",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScrubHidesEverySecretTheConfigHolds(t *testing.T) {
	c, err := LoadBytes([]byte(`
targets:
  - url: http://127.0.0.1:8000
    headers: {Authorization: "Bearer tok-header-aaaa", X-Short: abc}
    http_client_config:
      basic_auth: {username: probe, password: pw-basic-bbbb}
      proxy_url: http://pu:pw-proxy-cccc@127.0.0.1:3128
      http_headers: {X-V: {values: [val-hdr-dddd], secrets: [sec-hdr-eeee]}}
probe:
  headers: {X-Probe: probe-hdr-ffff}
`))
	if err != nil {
		t.Fatal(err)
	}
	text := "echo: Bearer tok-header-aaaa tok-header-aaaa pw-basic-bbbb cHJvYmU6cHctYmFzaWMtYmJiYg== pw-proxy-cccc val-hdr-dddd sec-hdr-eeee probe-hdr-ffff &#43;abc"
	got := c.Scrub(text)
	for _, s := range []string{"tok-header", "pw-basic", "cHJvYmU6", "pw-proxy", "val-hdr", "sec-hdr", "probe-hdr"} {
		if strings.Contains(got, s) {
			t.Errorf("Scrub leaves %s: %s", s, got)
		}
	}
	if !strings.Contains(got, "abc") {
		t.Errorf("Scrub hid a value shorter than %d characters, which garbles text: %s", minScrubbed, got)
	}
}

func TestScrubURLs(t *testing.T) {
	for in, want := range map[string]string{
		`target=http://u:pw-123456@127.0.0.1:1/x err="a"`: `target=http://<secret>@127.0.0.1:1/x err="a"`,
		`url="https://tok@host" and ftp://a:b@c`:          `url="https://<secret>@host" and ftp://<secret>@c`,
		"mail me: someone@example.com":                    "mail me: someone@example.com",
		"http://host/path@v1":                             "http://host/path@v1",
	} {
		if got := ScrubURLs(in); got != want {
			t.Errorf("ScrubURLs(%q) = %q, want %q", in, got, want)
		}
	}
	var c *Config
	if got := c.Scrub("http://u:p@h"); got != "http://<secret>@h" {
		t.Errorf("a nil config's Scrub = %q", got)
	}
}
