package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// This file holds what `slaprobe check-config --trace` and `slaprobe
// headroom` do once their flags are read; cmd/slaprobe keeps the flags.

// PrintSummary writes the summary of the trace spec names to stdout, with a
// progress line on stderr every ProgressEvery bytes of a large trace.
func PrintSummary(spec Spec, stdout, stderr io.Writer) error {
	s, err := Summarize(spec, func(p Progress) {
		if p.Size > ProgressEvery { // a small trace needs no progress line
			fmt.Fprintf(stderr, "trace: %s\n", p)
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, s.String())
	return nil
}

// DescribeScenarios writes, for each trace-shaped scenario, its trace's
// summary (read when the config was loaded) and its TTFT thresholds per
// length class.
func DescribeScenarios(w io.Writer, scenarios []prober.Scenario) {
	for _, s := range scenarios {
		sh, ok := s.Shape.(*Shape)
		if !ok {
			continue
		}
		fmt.Fprintf(w, "scenario %s: ", s.Name)
		if sh.IsLive() {
			fmt.Fprintf(w, "live length mix of each target's engine (%s and %s, or SGLang's with --collect-tokens-histogram, over the last %s)\n",
				VLLMPromptTokens, VLLMGenerationTokens, sh.LiveWindow())
		} else {
			fmt.Fprint(w, sh.Summary().String())
		}
		fmt.Fprintf(w, "  probes: %d prompt + %d answer tokens on average (the token budget counts these); TTFT by length class: %s\n", s.InputTokens, s.OutputTokens, sh.TTFT())
	}
}

// HeadroomCommand is `slaprobe headroom` as its flags set it.
type HeadroomCommand struct {
	TargetURL, Model string
	API              prober.API
	Spec             Spec
	Requests         int
	Workload         string
	Speedups         string
	Refine           int
	Rule             string
	TTFT, E2E        time.Duration // 0: the length class's threshold; no E2E limit
	Timeout          time.Duration
	Metrics          string // the textfile to write; "" for none
	Prober           *prober.Prober
}

// HeadroomOutcome is how a headroom run ended, for the command's exit code.
type HeadroomOutcome int

const (
	HeadroomOK          HeadroomOutcome = iota
	HeadroomFailed                      // bad input or a failed run; the error says which
	HeadroomInterrupted                 // the context was cancelled
)

// Run replays the trace and writes the metrics file; progress goes to
// stderr, the result to stdout. The report it returns (nil when the run
// could not start) is the caller's to write and judge (internal/bench).
func (c HeadroomCommand) Run(ctx context.Context, stdout, stderr io.Writer) (*report.Report, HeadroomOutcome, error) {
	if c.Spec.Path == "" {
		return nil, HeadroomFailed, errors.New("--trace is required")
	}
	speeds, err := ParseSpeedups(c.Speedups)
	if err != nil {
		return nil, HeadroomFailed, fmt.Errorf("--speedups: %w", err)
	}
	u, err := url.Parse(c.TargetURL)
	if err != nil || u.Host == "" {
		return nil, HeadroomFailed, fmt.Errorf("--target.url=%q: expected a URL such as http://vllm:8000", c.TargetURL)
	}
	classes := DefaultClassTTFT
	if c.TTFT > 0 {
		classes = nil
	}
	refine := max(c.Refine, -1)
	if c.Refine == 0 {
		refine = -1
	}
	hr := HeadroomRun{
		Target:   prober.Target{Name: u.Host, BaseURL: c.TargetURL, Model: c.Model, API: c.API},
		Model:    c.Model,
		Spec:     c.Spec,
		Requests: c.Requests, Workload: c.Workload, Timeout: c.Timeout,
		Thresholds: prober.Thresholds{TTFT: c.TTFT, E2E: c.E2E}, TTFT: classes,
		Options: ReplayOptions{Speedups: speeds, Refine: refine, Rule: c.Rule,
			Step: func(s sweep.ReplayStep) {
				fmt.Fprintf(stderr, "×%-5g %7.2f req/s  good %5.1f %% (%d/%d)  TTFT p50 %s p99 %s  sent late p99 %s\n",
					s.Speedup, s.OfferedRate, 100*s.GoodShare, s.Good, s.Requests, secs(s.TTFT.P50), secs(s.TTFT.P99), s.Late.Round(time.Millisecond))
			}},
		Prober: c.Prober,
	}
	rep, err := RunHeadroom(ctx, hr)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return rep, HeadroomInterrupted, err
		}
		return rep, HeadroomFailed, err
	}
	h := rep.Headroom
	fmt.Fprintf(stdout, "headroom of %s on %s (%d requests, %.3g req/s at ×1, %s): %s\n",
		u.Host, h.Workload, h.Requests, h.BaseRate, h.Rule, h)
	if c.Metrics != "" {
		if err := WriteHeadroomMetrics(c.Metrics, u.Host, rep); err != nil {
			return rep, HeadroomFailed, fmt.Errorf("--metrics.file: %w", err)
		}
	}
	return rep, HeadroomOK, nil
}

func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}
