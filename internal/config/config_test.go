package config

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/prober"
)

const allScenarios = "agentic, chatbot, code_completion, coding_agent, coding_assistant, general_chat, general_chat_followup, long_document, long_document_followup, rag, short_chat, tool_calling, tool_calling_agent"

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"unknown_field.yml", `parse config: line 5: unknown field "intervl" in scenarios[]`},
		{"unknown_top.yml", `parse config: line 3: unknown field "target" in the top level (valid: global, targets, scenarios, sweep, power, engine, file_sd_configs, probe)`},
		{"unknown_http_field.yml", `parse config: line 4: unknown field "bearer_tokn" in http_client_config`},
		{"bad_duration.yml", `parse config: line 5: interval: "5 minutes" is not a valid duration; expected a number with a unit (ms, s, m, h, d), e.g. 30s or 1m30s`},
		{"bad_threshold_duration.yml", `parse config: line 6: ttft: "fast" is not a valid duration; expected a number with a unit (ms, s, m, h, d), e.g. 30s or 1m30s`},
		{"bad_int.yml", `parse config: line 5: input_tokens="lots"; expected a whole number`},
		{"bad_yaml.yml", `parse config: line 3: did not find expected '-' indicator (in the block that starts on line 1); check the indentation`},
		{"unknown_scenario.yml", `line 2: global.scenarios: unknown scenario "chatbott"; expected one of: ` + allScenarios},
		{"unknown_target_scenario.yml", `line 4: targets[0] (a): scenarios: unknown scenario "nope"; expected one of: ` + allScenarios},
		{"empty_target_scenarios.yml", `line 4: targets[0] (a): scenarios is empty; expected at least one of: ` + allScenarios},
		{"custom_missing_tokens.yml", `line 4: scenarios[0] (my_case): input_tokens and output_tokens are required for a custom scenario ("my_case" is not built in; built-in names: ` + allScenarios + `)`},
		{"zero_interval.yml", `line 5: scenarios[0]: scenario "chatbot": interval=0s; expected a positive duration`},
		{"one_output_token.yml", `line 6: scenarios[0]: scenario "my_case": output_tokens=1; expected at least 2 (decode speed needs two tokens)`},
		{"warm_one_turn.yml", `line 4: scenarios[0]: scenario "my_followup": conversation.turns=1; expected 2 to 64 (the priming turn and at least one follow-up) (read from warm:, the older name of conversation:)`},
		{"warm_no_new_tokens.yml", `line 4: scenarios[0] (my_followup): warm.new_tokens is missing; expected the tokens each follow-up turn adds, e.g. 1024`},
		{"warm_on_cold_builtin.yml", `line 5: scenarios[0] (chatbot): warm is set on the cold built-in scenario "chatbot"; expected a new name for a conversation variant (built-in conversation scenarios: general_chat_followup, long_document_followup, coding_agent, tool_calling_agent)`},
		{"warm_negative_new_tokens.yml", `line 4: scenarios[0]: scenario "general_chat_followup": conversation.new_tokens=-5; expected a positive token count per follow-up turn (read from warm:, the older name of conversation:)`},
		{"conversation_too_many_turns.yml", `line 4: scenarios[0]: scenario "agent": conversation.turns=65; expected 2 to 64 (the priming turn and at least one follow-up)`},
		{"conversation_no_new_tokens.yml", `line 4: scenarios[0] (agent): conversation.new_tokens is missing; expected the tokens each follow-up turn adds, e.g. 1024`},
		{"conversation_and_warm.yml", `line 4: scenarios[0] (agent): both warm and conversation are set; expected conversation only (warm is its older name)`},
		{"dup_scenario.yml", `line 6: scenarios[1] (chatbot): scenario "chatbot" is defined twice`},
		{"dup_target.yml", `line 3: targets[1]: name "vllm:8000" is used twice; expected unique target names`},
		{"bad_url.yml", `line 2: targets[0]: url="vllm:8000"; expected an absolute http:// or https:// URL, e.g. http://vllm:8000`},
		{"no_url.yml", `line 2: targets[0]: url is empty; expected the server's base URL, e.g. http://vllm:8000`},
		{"bad_api.yml", `line 3: targets[0]: api="grpc"; expected chat, completions, responses or messages`},
		{"bad_jitter.yml", `line 2: global.jitter=1.5; expected a fraction in [0, 1), e.g. 0.2 for ±20%`},
		{"bad_in_flight.yml", `line 2: global.max_in_flight_per_target=0; expected from 1 to 10000`},
		{"no_targets.yml", "no targets; expected at least one in `targets`, a file_sd_configs entry or a --target.url flag (or `targets: []` to probe only through /probe)"},
		{"bearer_conflict.yml", `line 4: parse config: at most one of bearer_token & bearer_token_file must be configured`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			_, err := Load(path)
			if err == nil {
				t.Fatal("no error")
			}
			if want := path + ": " + tc.want; err.Error() != want {
				t.Errorf("error:\n got: %s\nwant: %s", err, want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yml")
	if err == nil || !strings.Contains(err.Error(), "read config") || !strings.Contains(err.Error(), "does-not-exist.yml") {
		t.Errorf("error %v, want a read error naming the file", err)
	}
}

func TestDefaults(t *testing.T) {
	c, err := Load("testdata/minimal.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Global, DefaultGlobalConfig) {
		t.Errorf("global = %+v, want the defaults %+v", c.Global, DefaultGlobalConfig)
	}
	tg := c.TargetConfigs[0]
	if tg.Name != "vllm:8000" || tg.URL != "http://vllm:8000" || tg.MetricsURL != "http://vllm:8000/metrics" ||
		tg.API != prober.APIChat || tg.Model != "" {
		t.Errorf("target defaults wrong: %+v", tg)
	}
	if tg.HTTPClientConfig.FollowRedirects || !tg.HTTPClientConfig.EnableHTTP2 {
		t.Errorf("http_client_config lacks prometheus/common's defaults (follow_redirects off): %+v", tg.HTTPClientConfig)
	}
	if got := names(c.Scenarios("vllm:8000")); !reflect.DeepEqual(got, prober.DefaultScenarios) {
		t.Errorf("scenarios = %v, want the defaults %v", got, prober.DefaultScenarios)
	}
	if got, want := c.AllScenarios(), prober.Builtin(); !reflect.DeepEqual(got, want) {
		t.Errorf("catalog without overrides differs from the built-ins")
	}
	if c.Scenarios("nope") != nil {
		t.Error("Scenarios of an unknown target is not nil")
	}
	if _, err := Load("testdata/empty_sections.yml"); err != nil {
		t.Errorf("empty sweep/power/engine sections: %v", err)
	}
}

func names(ss []prober.Scenario) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

func TestGood(t *testing.T) {
	c, err := Load("testdata/good.yml")
	if err != nil {
		t.Fatal(err)
	}
	g := c.Global
	if g.StallTimeout != model.Duration(45*time.Second) || g.Jitter != 0.1 || g.MaxInFlightPerTarget != 2 ||
		g.MaxLineBytes != 1<<20 || !reflect.DeepEqual(g.Scenarios, []string{"chatbot", "rag"}) {
		t.Errorf("global = %+v", g)
	}

	a, b := c.TargetConfigs[0], c.TargetConfigs[1]
	if a.Name != "prod-a" || a.URL != "http://vllm-a:8000" || a.Model != "qwen" || a.MetricsURL != "http://vllm-a:8000/metrics" {
		t.Errorf("target a = %+v (a trailing /v1/ must be dropped)", a)
	}
	if b.Name != "vllm-b.example.com:8443" || b.API != prober.APICompletions || b.MetricsURL != "http://vllm-b.example.com:9000/metrics" {
		t.Errorf("target b = %+v", b)
	}

	// a: global list plus every custom scenario; b: its own list.
	if got, want := names(c.Scenarios("prod-a")), []string{"chatbot", "rag", "my_case", "big_custom"}; !reflect.DeepEqual(got, want) {
		t.Errorf("prod-a scenarios = %v, want %v", got, want)
	}
	bs := c.Scenarios("vllm-b.example.com:8443")
	if got, want := names(bs), []string{"chatbot", "long_document", "my_case"}; !reflect.DeepEqual(got, want) {
		t.Errorf("b scenarios = %v, want %v", got, want)
	}

	// An override changes only what it sets.
	chat := bs[0]
	if chat.Interval != time.Minute || chat.InputTokens != 1024 || chat.OutputTokens != 256 || chat.Timeout != time.Minute {
		t.Errorf("chatbot override: %+v", chat)
	}
	if want := (prober.Thresholds{TTFT: 3 * time.Second, E2E: 20 * time.Second}); chat.Thresholds != want {
		t.Errorf("chatbot thresholds = %+v, want %+v (itl removed, e2e added, ttft kept)", chat.Thresholds, want)
	}
	my := bs[2]
	want := prober.Scenario{
		Name: "my_case", Family: prober.FamilyCustom, Description: "support bot",
		InputTokens: 2000, OutputTokens: 300, Interval: 2 * time.Minute, Timeout: time.Minute,
		Thresholds: prober.Thresholds{TTFT: 2 * time.Second, E2E: 10 * time.Second, ITL: 50 * time.Millisecond, MinDecode: 20},
	}
	if my != want {
		t.Errorf("my_case = %+v\nwant %+v", my, want)
	}
	// A custom scenario without cadence gets the one of built-ins its size.
	big := c.Scenarios("prod-a")[3]
	if big.Interval != 10*time.Minute || big.Timeout != 5*time.Minute {
		t.Errorf("big_custom cadence %v/%v, want 10m/5m", big.Interval, big.Timeout)
	}
}

func TestDefaultCadence(t *testing.T) {
	for _, tc := range []struct {
		in                int
		interval, timeout time.Duration
	}{
		{1, 30 * time.Second, time.Minute},
		{2048, 30 * time.Second, time.Minute},
		{2049, time.Minute, 90 * time.Second},
		{16384, 2 * time.Minute, 2 * time.Minute},
		{32768, 5 * time.Minute, 3 * time.Minute},
		{65536, 10 * time.Minute, 5 * time.Minute},
		{1 << 20, 15 * time.Minute, 6 * time.Minute},
	} {
		if i, to := DefaultCadence(tc.in); i != tc.interval || to != tc.timeout {
			t.Errorf("DefaultCadence(%d) = %v/%v, want %v/%v", tc.in, i, to, tc.interval, tc.timeout)
		}
	}
	// The tiers agree with the built-in catalog.
	for _, s := range prober.Builtin() {
		if s.Family != prober.FamilyReport {
			continue
		}
		if i, to := DefaultCadence(s.InputTokens); i != s.Interval || to != s.Timeout {
			t.Errorf("%s: built-in %v/%v, custom default %v/%v", s.Name, s.Interval, s.Timeout, i, to)
		}
	}
}

func TestRedacted(t *testing.T) {
	c, err := Load("testdata/good.yml")
	if err != nil {
		t.Fatal(err)
	}
	out := c.Redacted()
	for _, secret := range []string{"s3cr3t", "pa55", "hunter2"} {
		if strings.Contains(out, secret) {
			t.Errorf("Redacted shows secret %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{
		"credentials: <secret>", "password: <secret>", "X-Api-Key: <secret>", "X-Team: <secret>", "username: probe",
		"stall_timeout: 45s", "max_line_bytes: 1048576", "model_refresh_interval: 5m",
		"name: coding_assistant", // the whole catalog, with its defaults
		"min_decode_tokens_per_second: 20",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Redacted lacks %q:\n%s", want, out)
		}
	}

	// The printout is itself a valid config with the same effect.
	back, err := LoadBytes([]byte(out))
	if err != nil {
		t.Fatalf("the effective config does not load: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(back.AllScenarios(), c.AllScenarios()) {
		t.Error("scenarios differ after a round trip through Redacted")
	}
	for _, tg := range c.TargetConfigs {
		if !reflect.DeepEqual(back.Scenarios(tg.Name), c.Scenarios(tg.Name)) {
			t.Errorf("target %s: enabled scenarios differ after a round trip", tg.Name)
		}
	}
}

func TestTargets(t *testing.T) {
	var gotAuth, gotTeam string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
	}))
	defer srv.Close()
	c, err := LoadBytes([]byte(`
global: {stall_timeout: 10s}
targets:
  - name: a
    url: ` + srv.URL + `
    headers: {X-Team: ml}
    http_client_config:
      authorization: {credentials: tok}
`))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := c.Targets()
	if err != nil {
		t.Fatal(err)
	}
	tg := ts[0]
	if tg.Name != "a" || tg.BaseURL != srv.URL || tg.MetricsURL != srv.URL+"/metrics" || tg.API != prober.APIChat ||
		tg.StallTimeout != 10*time.Second || tg.Model != "" {
		t.Errorf("target = %+v", tg)
	}
	gotTeam = tg.Headers["X-Team"]
	if gotTeam != "ml" {
		t.Errorf("headers = %v", tg.Headers)
	}
	resp, err := tg.Client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if gotAuth != "Bearer tok" {
		t.Errorf("the client sent Authorization %q, want the configured bearer token", gotAuth)
	}
}

func TestRelativeFilesResolveAgainstConfigDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.yml")
	os.WriteFile(path, []byte("targets:\n  - url: http://a:1\n    http_client_config:\n      authorization: {credentials_file: token}\n"), 0o644)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.TargetConfigs[0].HTTPClientConfig.Authorization.CredentialsFile; got != filepath.Join(dir, "token") {
		t.Errorf("credentials_file = %q, want it under the config's directory", got)
	}
}

func TestQuickFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		flags   Flags
		wantErr string
		check   func(t *testing.T, c *Config)
	}{
		{name: "no file: one target per url", flags: Flags{TargetURLs: []string{"http://a:8000", "http://b:8000"}, TargetModel: "m"},
			check: func(t *testing.T, c *Config) {
				if len(c.TargetConfigs) != 2 || c.TargetConfigs[1].Name != "b:8000" || c.TargetConfigs[1].Model != "m" {
					t.Errorf("targets = %+v", c.TargetConfigs)
				}
				if got := names(c.Scenarios("a:8000")); !reflect.DeepEqual(got, prober.DefaultScenarios) {
					t.Errorf("scenarios = %v", got)
				}
			}},
		{name: "scenarios, comma separated and repeated", flags: Flags{TargetURLs: []string{"http://a:8000"}, Scenarios: []string{"chatbot, rag", "short_chat"}},
			check: func(t *testing.T, c *Config) {
				if got, want := names(c.Scenarios("a:8000")), []string{"chatbot", "rag", "short_chat"}; !reflect.DeepEqual(got, want) {
					t.Errorf("scenarios = %v, want %v", got, want)
				}
			}},
		{name: "target name", flags: Flags{TargetURLs: []string{"http://a:8000"}, TargetName: "prod"},
			check: func(t *testing.T, c *Config) {
				if c.TargetConfigs[0].Name != "prod" {
					t.Errorf("name = %q", c.TargetConfigs[0].Name)
				}
			}},
		{name: "with a file: url appends, scenarios replace global", file: "good.yml",
			flags: Flags{TargetURLs: []string{"http://c:8000"}, TargetModel: "m", Scenarios: []string{"agentic"}},
			check: func(t *testing.T, c *Config) {
				if len(c.TargetConfigs) != 3 || c.TargetConfigs[2].Name != "c:8000" || c.TargetConfigs[2].Model != "m" {
					t.Fatalf("targets = %+v", c.TargetConfigs)
				}
				if c.TargetConfigs[0].Model != "qwen" {
					t.Errorf("--target.model changed a file target's model")
				}
				if got, want := names(c.Scenarios("prod-a")), []string{"agentic", "my_case", "big_custom"}; !reflect.DeepEqual(got, want) {
					t.Errorf("prod-a scenarios = %v, want %v", got, want)
				}
				if got, want := names(c.Scenarios("vllm-b.example.com:8443")), []string{"chatbot", "long_document", "my_case"}; !reflect.DeepEqual(got, want) {
					t.Errorf("a target's own list must win over --scenarios: %v", got)
				}
			}},
		{name: "model without url", flags: Flags{TargetModel: "m"}, file: "minimal.yml",
			wantErr: "--target.model needs --target.url: it sets the model of the targets given on the command line"},
		{name: "name with two urls", flags: Flags{TargetURLs: []string{"http://a:1", "http://b:1"}, TargetName: "x"},
			wantErr: "--target.name needs exactly one --target.url, got 2"},
		{name: "unknown scenario", flags: Flags{TargetURLs: []string{"http://a:1"}, Scenarios: []string{"chatbot,nope"}},
			wantErr: `--scenarios: unknown scenario "nope"; expected one of: ` + allScenarios},
		{name: "bad url", flags: Flags{TargetURLs: []string{"a:1"}},
			wantErr: `--target.url="a:1": url="a:1"; expected an absolute http:// or https:// URL, e.g. http://vllm:8000`},
		{name: "clash with the file", file: "minimal.yml", flags: Flags{TargetURLs: []string{"http://vllm:8000"}},
			wantErr: `--target.url="http://vllm:8000": name "vllm:8000" is used twice; expected unique target names`},
		{name: "nothing", wantErr: "no targets; expected at least one in `targets`, a file_sd_configs entry or a --target.url flag (or `targets: []` to probe only through /probe)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = filepath.Join("testdata", tc.file)
			}
			c, err := LoadWithFlags(path, tc.flags)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("no error, want %q", tc.wantErr)
				}
				if !strings.HasSuffix(err.Error(), tc.wantErr) {
					t.Errorf("error:\n got: %v\nwant: …%s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
	if (Flags{}).IsZero() != true || (Flags{Scenarios: []string{" , "}}).IsZero() != true || (Flags{TargetName: "x"}).IsZero() {
		t.Error("IsZero")
	}
	if c, err := LoadWithFlags("", Flags{TargetURLs: []string{"http://a:1"}}); err != nil || c.TargetConfigs[0].Name != "a:1" {
		t.Errorf("LoadWithFlags without a file: %v", err)
	}
}

func TestSafeConfigReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc := NewSafeConfig(Flags{})
	if sc.Get() != nil {
		t.Fatal("Get before the first load is not nil")
	}
	write("targets: [{url: 'http://a:1'}]\n")
	if changed, err := sc.Reload(path); err != nil || !changed {
		t.Fatalf("first load: changed=%v err=%v", changed, err)
	}
	first := sc.Get()
	if changed, err := sc.Reload(path); err != nil || changed {
		t.Errorf("same file: changed=%v err=%v, want unchanged", changed, err)
	}
	if sc.Get() != first {
		t.Error("an unchanged file replaced the config")
	}
	write("targets: [{url: 'http://a:1', bogus: 1}]\n")
	if changed, err := sc.Reload(path); err == nil || changed {
		t.Errorf("bad file: changed=%v err=%v, want an error", changed, err)
	}
	if sc.Get() != first {
		t.Error("a bad file replaced the config")
	}
	// Back to the content that runs: unchanged, and no error.
	write("targets: [{url: 'http://a:1'}]\n")
	if changed, err := sc.Reload(path); err != nil || changed {
		t.Errorf("reverted file: changed=%v err=%v, want unchanged", changed, err)
	}
	write("targets: [{url: 'http://b:1'}]\n")
	if changed, err := sc.Reload(path); err != nil || !changed {
		t.Errorf("new file: changed=%v err=%v", changed, err)
	}
	if got := sc.Get().TargetConfigs[0].Name; got != "b:1" {
		t.Errorf("target = %q after the reload", got)
	}

	// Quick flags apply on every load; without a file they are the config.
	fl := NewSafeConfig(Flags{TargetURLs: []string{"http://q:1"}})
	if changed, err := fl.Reload(""); err != nil || !changed || fl.Get().TargetConfigs[0].Name != "q:1" {
		t.Errorf("flags only: changed=%v err=%v", changed, err)
	}
	if changed, err := fl.Reload(""); err != nil || changed {
		t.Errorf("flags only, again: changed=%v err=%v, want unchanged", changed, err)
	}
}

// TestPerRequestMetrics: per_request_metrics reaches the prober's target (and
// so the request body's include_metrics); it is off unless set.
func TestPerRequestMetrics(t *testing.T) {
	c, err := LoadBytes([]byte("targets:\n  - {name: on, url: http://a:8000, per_request_metrics: true}\n  - {name: off, url: http://b:8000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := c.Targets()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, tg := range ts {
		got[tg.Name] = tg.PerRequestMetrics
	}
	if !got["on"] || got["off"] || len(got) != 2 {
		t.Errorf("per_request_metrics by target: %v; want on: true, off: false", got)
	}
	if _, err := LoadBytes([]byte("targets:\n  - {name: x, url: http://a:8000, per_request_metrics: maybe}\n")); err == nil || !strings.Contains(err.Error(), `per_request_metrics="maybe"`) {
		t.Errorf("per_request_metrics: maybe: error %v; want one naming the field and the value", err)
	}
}
