// Package report is the data of a benchmark report: report.json's
// versioned schema (documented in docs/report.md), the one mapping from a
// sweep's result (FromSweep), the comparison with a baseline, loading and
// JSON encoding. It draws nothing: internal/report/render turns a *Report
// into report.md and a self-contained report.html.
//
// The measurement side fills a *Report with plain values (float64 seconds,
// tokens/s, ratios 0..1) and calls render.Write. Optional measurements are
// pointers or omitempty fields: absent means "not measured", never zero.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/slaprobe/slaprobe/internal/sweep"
)

// SchemaVersion names the shape of report.json. Bump it on any change that
// is not a pure addition of an optional field.
//
// v2 added each step's raw per-request values (Step.Samples), the
// comparison with a baseline (Report.Comparison), and the rule that a
// reader compares on summaries only when samples are absent.
const SchemaVersion = "slaprobe.report/v2"

// SchemaVersionV1 is the previous shape: no samples, no comparison. Load
// still reads it; such a report compares on its summaries, without
// confidence intervals.
const SchemaVersionV1 = "slaprobe.report/v1"

// knownSchema reports whether this slaprobe reads version v.
func knownSchema(v string) bool { return v == SchemaVersion || v == SchemaVersionV1 }

// A step's mode is sweep.Mode: "closed_loop" keeps exactly N requests in
// flight (a new one starts as soon as one finishes, so nothing queues in
// the client); "burst" sends N at the same instant and later ones queue in
// the engine.

// Scenario families, as in package prober.
const (
	FamilyReport  = "report"
	FamilyUseCase = "use_case"
	FamilyCustom  = "custom"
)

// Threshold kinds used by capacity limits.
const (
	LimitTTFT   = "ttft"   // TTFT must stay <= threshold (seconds)
	LimitE2E    = "e2e"    // end-to-end latency must stay <= threshold (seconds)
	LimitITL    = "itl"    // inter-token latency must stay <= threshold (seconds)
	LimitDecode = "decode" // per-user decode speed must stay >= threshold (tokens/s)
	// LimitCache: the share of a conversation step's follow-ups that hit
	// the prefix cache must stay >= threshold (a ratio).
	LimitCache = sweep.LimitCache
)

// Report is the whole benchmark: what ran, against what, and what came out.
type Report struct {
	SchemaVersion string     `json:"schema_version"`
	Meta          Meta       `json:"meta"`
	Config        Config     `json:"config"`
	Scenarios     []Scenario `json:"scenarios"`
	Capacity      Capacity   `json:"capacity"`
	// Headline is derived from the rest; Write computes it when it is empty
	// (see ComputeHeadline).
	Headline Headline `json:"headline"`
	// Notes are short free-text remarks shown at the top of the report, for
	// example "interrupted by the operator after 14 of 20 steps".
	Notes []string `json:"notes,omitempty"`
	// Comparison is set on a report drawn against a baseline (`slaprobe
	// compare`, `bench --baseline`, the daemon against its previous sweep).
	Comparison *Comparison `json:"comparison,omitempty"`
	// Headroom is set on the report of `slaprobe headroom`: a trace
	// replayed at speed-ups, the largest multiple of its traffic that met
	// the rule. Such a report has no scenarios.
	Headroom *sweep.Headroom `json:"headroom,omitempty"`
}

// Meta says what was measured, when and with what.
type Meta struct {
	Title       string    `json:"title,omitempty"` // optional report title; default "<model> benchmark"
	ToolVersion string    `json:"tool_version"`    // slaprobe version that produced the report
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	// Interrupted is true when the run was stopped (Ctrl-C, deadline) and the
	// report holds only what was measured until then.
	Interrupted bool `json:"interrupted,omitempty"`
	// TargetURL is the server's base URL without user info, query or
	// fragment; Write strips them again in case the caller forgot.
	TargetURL string `json:"target_url"`
	// API is the endpoint the run probed: chat, completions, responses or
	// messages. Empty in reports made before it was recorded: chat.
	API           string `json:"api,omitempty"`
	Model         string `json:"model"`
	MaxModelLen   int    `json:"max_model_len,omitempty"`  // from /v1/models, when reported
	Engine        string `json:"engine,omitempty"`         // engine flavor: "vllm", "sglang", "" unknown
	EngineVersion string `json:"engine_version,omitempty"` // when the engine reports one
	Host          Host   `json:"host"`
	// GPU describes the target's accelerators when NVML was available on the
	// target host; nil otherwise.
	GPU *GPU `json:"gpu,omitempty"`
}

// Host is the machine slaprobe ran on (the client, not the server).
type Host struct {
	Hostname  string `json:"hostname,omitempty"`
	OS        string `json:"os"`   // runtime.GOOS
	Arch      string `json:"arch"` // runtime.GOARCH
	CPUs      int    `json:"cpus"` // runtime.NumCPU
	GoVersion string `json:"go_version,omitempty"`
}

// APIOrChat is the run's API, chat when the report did not record one.
func (m Meta) APIOrChat() string {
	if m.API == "" {
		return "chat"
	}
	return m.API
}

// GPU describes the accelerators behind the target.
type GPU struct {
	Name        string `json:"name"`                   // e.g. "NVIDIA H100 80GB HBM3"
	Count       int    `json:"count"`                  // GPUs serving the model
	MemoryBytes uint64 `json:"memory_bytes,omitempty"` // per GPU
	Driver      string `json:"driver,omitempty"`
}

// Config is the sweep's configuration, as run.
type Config struct {
	Scenarios        []string `json:"scenarios"`          // scenario names, in run order
	ClosedLoopLadder []int    `json:"closed_loop_ladder"` // N values for sweep.ModeClosedLoop
	BurstLadder      []int    `json:"burst_ladder"`       // N values for sweep.ModeBurst
	// StepDurationSeconds is how long each closed-loop step measured after
	// its warm-up; a burst step lasts until its N requests finish.
	StepDurationSeconds float64 `json:"step_duration_seconds"`
	WarmupSeconds       float64 `json:"warmup_seconds,omitempty"`
	// EarlyStop is true when a ladder stops once every threshold is far
	// exceeded; Scenario.StoppedEarly says where it did.
	EarlyStop  bool           `json:"early_stop"`
	Thresholds ReferenceLines `json:"thresholds"`
	// PricePerKWh (USD) turns measured power into Power.CostPerHourUSD;
	// 0 when no price was configured.
	PricePerKWh float64 `json:"price_per_kwh,omitempty"`
	// PromptCaching is false when every request carried a fresh context
	// (worst-case TTFT), as the reference reports run.
	PromptCaching bool `json:"prompt_caching"`
	// CapacityOn are the rules capacity was asked on (Capacity.On).
	CapacityOn []string `json:"capacity_on,omitempty"`
}

// ReferenceLines are the report-wide lines drawn on the charts (a
// scenario's own limits are its prober.Thresholds).
type ReferenceLines struct {
	// MaxSafeQueueTTFTSeconds is the TTFT limit of "max safe queue depth"
	// (3.0 s by default).
	MaxSafeQueueTTFTSeconds float64 `json:"max_safe_queue_ttft_seconds"`
	// MaxSafeQueueStat is the TTFT statistic judged: "mean", "p50", "p90",
	// "p95" or "p99".
	MaxSafeQueueStat sweep.Stat `json:"max_safe_queue_stat"`
	// ITLInstantSeconds is where streaming stops feeling instant (20 ms).
	ITLInstantSeconds float64 `json:"itl_instant_seconds"`
	// ITLCeilingSeconds is the memory-bandwidth ceiling line of large MoE
	// models drawn on ITL vs queue depth (70 ms).
	ITLCeilingSeconds float64 `json:"itl_ceiling_seconds"`
}

// DefaultThresholds are the reference benchmark reports' lines: max safe
// queue depth judged on mean TTFT <= 3 s, 20 ms "instant" ITL and the 70 ms
// memory-bandwidth ceiling of large MoE models.
func DefaultThresholds() ReferenceLines {
	return ReferenceLines{
		MaxSafeQueueTTFTSeconds: 3.0,
		MaxSafeQueueStat:        sweep.StatMean,
		ITLInstantSeconds:       0.020,
		ITLCeilingSeconds:       0.070,
	}
}

// Scenario is one workload shape and every step measured for it. Family
// is FamilyReport, FamilyUseCase or FamilyCustom. In a conversation
// scenario (Turns set) the steps' figures are the follow-ups'
// (Step.Conversation).
type Scenario struct {
	sweep.ScenarioSpec
	// ClosedLoop and Burst hold one Step per N measured, in ladder order.
	ClosedLoop []Step `json:"closed_loop,omitempty"`
	Burst      []Step `json:"burst,omitempty"`
	// StoppedEarly lists the ladders cut short because every threshold was
	// far exceeded.
	StoppedEarly []sweep.EarlyStop `json:"stopped_early,omitempty"`
}

// Step is one (scenario, mode, N) measurement.
type Step struct {
	Concurrency     int     `json:"concurrency"`      // N
	DurationSeconds float64 `json:"duration_seconds"` // wall time of the measured window
	RequestsSent    int     `json:"requests_sent"`
	RequestsOK      int     `json:"requests_ok"`
	SuccessRate     float64 `json:"success_rate"` // RequestsOK / RequestsSent, 0..1
	// Errors counts failed requests by prober reason ("timeout", "http_5xx", ...).
	Errors map[string]int `json:"errors,omitempty"`
	// Good counts the requests that succeeded and met every threshold of
	// the scenario at once (prober.Thresholds.MetBy, as
	// slaprobe_probes_good_total counts probes); GoodShare is Good /
	// RequestsSent (nil in reports written before goodput was kept), and
	// GoodPerSecond is goodput: Good per second of DurationSeconds.
	Good          int      `json:"good,omitempty"`
	GoodShare     *float64 `json:"good_share,omitempty"`
	GoodPerSecond float64  `json:"good_requests_per_second,omitempty"`

	Decode sweep.Dist `json:"decode_tokens_per_second"` // per-user decode speed
	ITL    sweep.Dist `json:"itl_seconds"`              // mean inter-token latency per request
	TTFT   sweep.Dist `json:"ttft_seconds"`
	E2E    sweep.Dist `json:"e2e_seconds"`
	// PrefillTokensPerSecond is the mean per-user prefill speed: prompt
	// tokens / (TTFT - queue wait when known, else TTFT).
	PrefillTokensPerSecond float64 `json:"prefill_tokens_per_second"`
	// SystemTokensPerSecond is output tokens/s summed over all streams in
	// the steady window; prompt tokens are excluded.
	SystemTokensPerSecond float64 `json:"system_tokens_per_second"`
	TokensPerHour         float64 `json:"tokens_per_hour"` // SystemTokensPerSecond * 3600
	// ScalingEfficiency = system / (N=1 system * N), a ratio (1 = no per-user
	// loss). Closed loop only; noise can push it slightly above 1.
	ScalingEfficiency *float64 `json:"scaling_efficiency,omitempty"`
	// QueueWaitSeconds is the mean time requests waited in the engine's queue,
	// from vllm:request_queue_time_seconds; nil when the engine has no such
	// metric.
	QueueWaitSeconds *float64 `json:"queue_wait_seconds,omitempty"`
	// Power is nil unless GPU power was measured (NVML).
	Power *Power `json:"power,omitempty"`
	// Drain says how the step started: after waiting for the engine to
	// empty (method engine_metrics) or a fixed cooldown (method cooldown,
	// when the engine has no /metrics). A step with busy set started while
	// the engine still had requests running or waiting: it is shown marked
	// and left out of capacity and the headline.
	Drain *sweep.DrainResult `json:"drain,omitempty"`
	// Samples are the per-request values the distributions above describe
	// (at most MaxSamples per metric); nil in v1 reports.
	Samples *Samples `json:"samples,omitempty"`
	// NotMeasured says why the step has no figures: no request ended in it
	// (requests_sent 0; a closed-loop window shorter than a request). Its
	// distributions are zero because nothing was measured: tables show "–",
	// and charts, capacity, scaling efficiency, the headline and a
	// comparison leave it out.
	NotMeasured string `json:"not_measured,omitempty"`
	// Conversation is set on a step of a conversation scenario: N is then
	// conversations in flight, and the figures above describe its
	// follow-up turns (with its priming turns that failed); the priming
	// turns that succeeded and the follow-ups' cache are here.
	Conversation *sweep.ConversationStep `json:"conversation,omitempty"`
}

// MaxSamples is the most per-request values a step keeps per metric. A
// step with more keeps MaxSamples evenly spaced order statistics of them
// (see NewSamples), which preserve the distribution a comparison resamples.
const MaxSamples = 500

// Samples are one step's per-request values in base units, over its
// successful requests: what `slaprobe compare` resamples to put a
// confidence interval on a change.
type Samples struct {
	TTFT    []float64 `json:"ttft_seconds,omitempty"`
	ITL     []float64 `json:"itl_seconds,omitempty"`
	Decode  []float64 `json:"decode_tokens_per_second,omitempty"`
	E2E     []float64 `json:"e2e_seconds,omitempty"`
	Prefill []float64 `json:"prefill_tokens_per_second,omitempty"`
	// CachedShare is each follow-up's cached share, in the order they
	// ended and never subsampled, and PrimingTTFT each priming turn's TTFT,
	// in a conversation step (Step.Conversation); in RoundMedians, each
	// round's mean cached share.
	CachedShare []float64 `json:"cached_share,omitempty"`
	PrimingTTFT []float64 `json:"priming_ttft_seconds,omitempty"`
	// Good is 1 or 0 per request sent, failed ones included, in the order
	// they ended: whether it was good (see Step.Good); never subsampled.
	// In RoundMedians, each round's share of good requests.
	Good []float64 `json:"good,omitempty"`
	// Subsampled is true when some metric had more than MaxSamples values
	// and kept order statistics of them instead.
	Subsampled bool `json:"subsampled,omitempty"`
	// RoundMedians holds, for a burst step of two or more rounds, each
	// round's median of every metric (one value per round): the
	// independent samples a comparison of bursts resamples. Absent
	// otherwise.
	RoundMedians *Samples `json:"round_medians,omitempty"`
}

// StartedBusy reports whether the step started on an engine that had not
// drained.
func (s Step) StartedBusy() bool { return s.Drain != nil && s.Drain.Busy }

// Measured reports whether at least one request ended in the step, so that
// its figures exist (see NotMeasured).
func (s Step) Measured() bool { return s.RequestsSent > 0 }

// Power is the GPU draw during a step, summed over the target's GPUs.
type Power struct {
	AvgWatts       float64 `json:"avg_watts"`
	PeakWatts      float64 `json:"peak_watts"`
	JoulesPerToken float64 `json:"joules_per_output_token,omitempty"`
	// CostPerHourUSD = AvgWatts/1000 * Config.PricePerKWh; 0 (omitted) when
	// no price was configured.
	CostPerHourUSD float64 `json:"cost_per_hour_usd,omitempty"`
}

// Capacity answers "how many?" for every scenario that has thresholds.
type Capacity struct {
	// MaxSafeQueue has one entry per scenario with burst data: the largest
	// burst N whose TTFT stays within Config.Thresholds.MaxSafeQueueTTFTSeconds.
	MaxSafeQueue []QueueCapacity `json:"max_safe_queue,omitempty"`
	// UseCases has one entry per scenario judged against its own thresholds
	// (family use_case, and any custom scenario with thresholds).
	UseCases []UseCaseCapacity `json:"use_cases,omitempty"`
	// On has one entry per scenario and rule of Config.CapacityOn
	// (sweep.capacity_on): the largest closed-loop N that meets the rule.
	On []sweep.RuleCapacity `json:"on,omitempty"`
	// Conversations has one entry per conversation scenario: how many
	// concurrent conversations the server carries.
	Conversations []ConversationCapacity `json:"conversations,omitempty"`
}

// ConversationCapacity is a conversation scenario's capacity in concurrent
// conversations: the largest closed-loop N of conversations in flight whose
// follow-ups keep their TTFT within the scenario's threshold and keep
// hitting the prefix cache (sweep.ConversationCapacityOf).
type ConversationCapacity struct {
	Scenario string     `json:"scenario"`
	Mode     sweep.Mode `json:"mode"`
	sweep.Bound
	// LimitedBy names the binding limit: "ttft", "cache" or "success";
	// empty when AtLeast.
	LimitedBy string `json:"limited_by,omitempty"`
	// HitShare is the share of follow-ups that had to hit the cache.
	HitShare float64 `json:"hit_share"`
	// Estimate and Between are as in sweep.RuleCapacity.
	Estimate  float64 `json:"estimate,omitempty"`
	Between   []int   `json:"between,omitempty"`
	MaxTested int     `json:"max_tested"`
	// Limits holds the capacity against each limit on its own.
	Limits []Limit `json:"limits"`
}

// QueueCapacity is one scenario's max safe queue depth.
type QueueCapacity struct {
	Scenario string `json:"scenario"`
	sweep.Bound
	ThresholdSeconds float64    `json:"threshold_seconds"` // TTFT limit judged
	Stat             sweep.Stat `json:"stat"`              // TTFT statistic judged ("mean", "p90", ...)
	MaxTested        int        `json:"max_tested"`        // largest burst N measured
}

// UseCaseCapacity is one scenario's capacity against its own thresholds.
type UseCaseCapacity struct {
	Scenario string     `json:"scenario"`
	Mode     sweep.Mode `json:"mode"` // which ladder the limits were read from
	// Bound is the binding result: the smallest of Limits.
	sweep.Bound
	LimitedBy string  `json:"limited_by,omitempty"` // Kind of the binding limit; "" when AtLeast
	MaxTested int     `json:"max_tested"`
	Limits    []Limit `json:"limits"` // one per threshold kind set on the scenario
}

// Limit is the capacity against a single threshold.
type Limit struct {
	Kind      string     `json:"kind"`      // LimitTTFT, LimitE2E, LimitITL, LimitDecode or LimitCache
	Threshold float64    `json:"threshold"` // seconds, or tokens/s for LimitDecode
	Stat      sweep.Stat `json:"stat"`      // statistic judged ("mean", "p50", ...)
	sweep.Bound
}

// Headline holds the numbers of the tiles at the top of the report.
type Headline struct {
	PeakDecode          *Figure `json:"peak_decode_tokens_per_second,omitempty"` // best per-user decode mean
	MaxSystemThroughput *Figure `json:"max_system_tokens_per_second,omitempty"`
	BestTTFT            *Figure `json:"best_ttft_seconds,omitempty"` // lowest TTFT mean
	// MaxSafeQueue mirrors Capacity.MaxSafeQueue, one tile per scenario.
	MaxSafeQueue []Figure `json:"max_safe_queue,omitempty"`
	// GoodputCapacity mirrors the first goodput rule of Capacity.On, one
	// figure per scenario.
	GoodputCapacity []Figure `json:"goodput_capacity,omitempty"`
	// Conversations mirrors Capacity.Conversations, one figure (unit
	// "conversations") per conversation scenario.
	Conversations []Figure `json:"conversations,omitempty"`
	// SuccessRate is RequestsOK / RequestsSent over every step of the run.
	SuccessRate  float64 `json:"success_rate"`
	RequestsSent int     `json:"requests_sent"`
	RequestsOK   int     `json:"requests_ok"`
	// UsersAt32K is the capacity of the 32K-context use case (general_chat
	// by default), or of a report scenario with 32K input when there is none.
	UsersAt32K *Figure `json:"concurrent_users_at_32k,omitempty"`
}

// Figure is one headline number and where it was measured.
type Figure struct {
	Value       float64    `json:"value"`
	Unit        string     `json:"unit"` // "tok/s", "s", "requests", "users"
	Scenario    string     `json:"scenario,omitempty"`
	Mode        sweep.Mode `json:"mode,omitempty"`
	Concurrency int        `json:"concurrency,omitempty"`
	Approximate bool       `json:"approximate,omitempty"`
	AtLeast     bool       `json:"at_least,omitempty"`
}

// Float returns a pointer to v, for the optional fields of Step.
func Float(v float64) *float64 { return &v }

// RedactURL drops user info, query and fragment from a URL so that no
// credential lands in a report. Unparseable input yields "(invalid URL)".
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User = nil
	u.RawQuery = ""
	u.ForceQuery = false
	u.Fragment = ""
	u.RawFragment = ""
	return u.String()
}

// Validate reports the first structural problem: things Write cannot draw
// sensibly. Partial data (an interrupted run, missing modes) is not a problem.
func (r *Report) Validate() error {
	if r == nil {
		return errors.New("report: nil")
	}
	if r.SchemaVersion != "" && !knownSchema(r.SchemaVersion) {
		return fmt.Errorf("report: schema_version=%q; expected %q or %q", r.SchemaVersion, SchemaVersion, SchemaVersionV1)
	}
	seen := map[string]bool{}
	for i, s := range r.Scenarios {
		if s.Name == "" {
			return fmt.Errorf("report: scenarios[%d]: name is empty", i)
		}
		if seen[s.Name] {
			return fmt.Errorf("report: scenario %q appears twice", s.Name)
		}
		seen[s.Name] = true
		for _, m := range s.Modes() {
			ns := map[int]bool{}
			for _, st := range m.Steps {
				if st.Concurrency < 1 {
					return fmt.Errorf("report: scenario %q %s: concurrency=%d; expected >= 1", s.Name, m.Mode, st.Concurrency)
				}
				if ns[st.Concurrency] {
					return fmt.Errorf("report: scenario %q %s: concurrency %d appears twice", s.Name, m.Mode, st.Concurrency)
				}
				ns[st.Concurrency] = true
				if st.SuccessRate < 0 || st.SuccessRate > 1 {
					return fmt.Errorf("report: scenario %q %s N=%d: success_rate=%g; expected a ratio 0..1", s.Name, m.Mode, st.Concurrency, st.SuccessRate)
				}
			}
		}
	}
	return nil
}

// Load reads a report.json written by Write (or by hand) and checks its
// schema version.
func Load(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("load report %s: %w", path, err)
	}
	if !knownSchema(r.SchemaVersion) {
		return nil, fmt.Errorf("load report %s: schema_version=%q; this slaprobe reads %q and %q", path, r.SchemaVersion, SchemaVersion, SchemaVersionV1)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("load report %s: %w", path, err)
	}
	return &r, nil
}
