package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/slaprobe/slaprobe/prober"
)

// Upper bounds of the counts a scenario asks for. They cover real models
// with room to spare, and stop a typo (an extra zero or three) from
// building a prompt of gigabytes or asking for an endless answer.
const (
	// MaxInputTokens bounds input_tokens and conversation.new_tokens: the
	// longest context windows served today are 10M tokens (Llama 4 Scout).
	// A prompt that long is about 40 MB of text.
	MaxInputTokens = 10_000_000
	// MaxOutputTokens bounds output_tokens: no served model generates more
	// than 1M tokens in one answer (the largest output limits are in the
	// hundreds of thousands).
	MaxOutputTokens = 1_000_000
	// MaxLineBytes bounds global.max_line_bytes: an SSE line carries one
	// chunk of a few tokens; 64 MiB is far beyond any real one.
	MaxLineBytes = 64 << 20
	// MaxConcurrency bounds each rung of a sweep ladder, sweep.max_concurrency
	// and global.max_in_flight_per_target: every unit is a request in flight
	// and a connection, and no single server batches more than a few thousand.
	MaxConcurrency = 10_000
	// MaxQueueDepthSamples bounds engine.live.queue_depth_samples, kept per
	// target, model and scenario.
	MaxQueueDepthSamples = 100_000
)

// floatHints say what a float field expects, by its path with list indices
// and map keys written as []; a field not listed gets "a finite number".
var floatHints = map[string]string{
	"global.jitter":                                       "a finite value from 0 to below 1, e.g. 0.2",
	"sweep.drain.max_running":                             "a finite value >= 0",
	"sweep.early_stop.factor":                             "0 (off) or a finite factor >= 1, e.g. 3",
	"sweep.early_stop.min_success_ratio":                  "a finite ratio from 0 to 1",
	"sweep.capacity.min_success_ratio":                    "a finite ratio from 0 to 1",
	"sweep.capacity.conversation_hit_share":               "a finite share in (0, 1], e.g. 0.9",
	"sweep.pause.max_waiting":                             "a finite value >= 0",
	"sweep.pause.max_kv_cache_usage":                      "a finite ratio in (0, 1], e.g. 0.8",
	"power.price_per_kwh":                                 "a finite price in dollars >= 0, e.g. 0.10",
	"tracing.sweep_export_ratio":                          "a finite ratio from 0 to 1, e.g. 0.01",
	"scenarios[].thresholds.min_decode_tokens_per_second": "a finite speed >= 0, e.g. 20",
}

// checkFinite reports the first float field of the config, wherever it is,
// that holds NaN or an infinity: NaN passes every comparison a range check
// makes (global.jitter: .nan would probe back to back), and an infinity
// turns durations and ratios computed from it into nonsense. The walk
// follows the types, so a float field added later is checked too.
func (c *Config) checkFinite() error {
	return finiteIn(reflect.ValueOf(c).Elem(), "", "")
}

// finiteIn walks v; path names it as the file does (scenarios[2].thresholds)
// and hintPath the same with every index written as [].
func finiteIn(v reflect.Value, path, hintPath string) error {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			return nil
		}
		what := "NaN is not a number"
		if math.IsInf(f, 0) {
			what = strconv.FormatFloat(f, 'g', -1, 64) + " is not finite"
		}
		expected, ok := floatHints[hintPath]
		if !ok {
			expected = "a finite number"
		}
		return fmt.Errorf("%s: %s; expected %s", path, what, expected)
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return finiteIn(v.Elem(), path, hintPath)
	case reflect.Struct:
		t := v.Type()
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
			sub, subHint := path, hintPath
			if !(len(tag) > 1 && tag[1] == "inline") && !f.Anonymous {
				if name == "" {
					name = strings.ToLower(f.Name)
				}
				sub, subHint = joinPath(path, name), joinPath(hintPath, name)
			}
			if err := finiteIn(v.Field(i), sub, subHint); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := finiteIn(v.Index(i), fmt.Sprintf("%s[%d]", path, i), hintPath+"[]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if err := finiteIn(iter.Value(), fmt.Sprintf("%s[%q]", path, fmt.Sprint(iter.Key().Interface())), hintPath+"[]"); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// checkTokenBounds bounds the token counts of a resolved scenario; the
// lower bounds are prober.Scenario.Validate's.
func checkTokenBounds(s prober.Scenario) error {
	switch {
	case s.InputTokens > MaxInputTokens:
		return fmt.Errorf("scenario %q: input_tokens=%d; expected at most %d (the longest context windows served are 10M tokens)", s.Name, s.InputTokens, MaxInputTokens)
	case s.OutputTokens > MaxOutputTokens:
		return fmt.Errorf("scenario %q: output_tokens=%d; expected at most %d", s.Name, s.OutputTokens, MaxOutputTokens)
	case s.Conversation.NewTokens > MaxInputTokens || s.Conversation.NewTokensMax > MaxInputTokens:
		n := max(s.Conversation.NewTokens, s.Conversation.NewTokensMax)
		return fmt.Errorf("scenario %q: conversation.new_tokens=%d; expected at most %d per follow-up turn", s.Name, n, MaxInputTokens)
	case s.IsConversation():
		last := s.InputTokens + (s.Conversation.Turns-1)*(s.OutputTokens+max(s.Conversation.NewTokens, s.Conversation.NewTokensMax))
		if last > MaxInputTokens {
			return fmt.Errorf("scenario %q: the last turn of the conversation would send %d tokens (input_tokens + (turns-1) × (output_tokens + new_tokens)); expected at most %d",
				s.Name, last, MaxInputTokens)
		}
	}
	return nil
}

// ParseScrapeTimeout reads the X-Prometheus-Scrape-Timeout-Seconds header
// Prometheus sends with /probe: a finite number of seconds, more than 0 and
// at most a day (Prometheus itself refuses a scrape timeout over its
// interval; a day covers any real one). Empty means none was sent (0).
func ParseScrapeTimeout(v string) (float64, error) {
	const header, maxSeconds = "X-Prometheus-Scrape-Timeout-Seconds", 86400
	if v == "" {
		return 0, nil
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	switch {
	case err != nil || math.IsNaN(secs):
		return 0, fmt.Errorf("header %s=%q is not a number; expected a positive number of seconds, e.g. 10", header, truncate(v, 64))
	case math.IsInf(secs, 0) || secs <= 0 || secs > maxSeconds:
		return 0, fmt.Errorf("header %s=%q; expected a finite number of seconds above 0 and at most %d", header, truncate(v, 64), maxSeconds)
	}
	return secs, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
