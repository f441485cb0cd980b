package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/prober"
)

// HeadroomRun is one replay sweep of a target: slaprobe headroom.
type HeadroomRun struct {
	Target   prober.Target
	Model    string
	Spec     Spec
	Requests int    // the trace's first Requests requests are replayed; 0 means all
	Workload string // the workload label; default the trace file's base name
	Timeout  time.Duration
	// Thresholds and TTFT judge each request: good when it met both.
	Thresholds prober.Thresholds
	TTFT       ClassTTFT
	Options    ReplayOptions
	Prober     *prober.Prober
}

// HeadroomReport is what slaprobe headroom writes (--report) and reads back
// (--baseline).
type HeadroomReport struct {
	Target   string    `json:"target"`
	Model    string    `json:"model,omitempty"`
	Workload string    `json:"workload"`
	Trace    string    `json:"trace"`
	Format   Format    `json:"format"`
	Requests int       `json:"requests"`
	Time     time.Time `json:"time"`
	Headroom
}

// RunHeadroom reads the trace and replays it against the target.
func RunHeadroom(ctx context.Context, hr HeadroomRun) (HeadroomReport, error) {
	r, err := Open(hr.Spec)
	if err != nil {
		return HeadroomReport{}, err
	}
	var reqs []Request
	for hr.Requests <= 0 || len(reqs) < hr.Requests {
		var req Request
		err := r.Next(&req)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.Close()
			return HeadroomReport{}, err
		}
		if req.Input < DefaultMinInput || req.Output == 0 {
			continue // a probe cannot send it (docs/workloads.md)
		}
		req.Output = max(req.Output, 2)
		req.HashIDs = append([]uint64(nil), req.HashIDs...)
		reqs = append(reqs, req)
	}
	r.Close()
	name := hr.Workload
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(hr.Spec.Path), filepath.Ext(hr.Spec.Path))
	}
	rep := HeadroomReport{Target: hr.Target.Name, Model: hr.Model, Workload: name, Trace: hr.Spec.Path, Format: hr.Spec.Format,
		Requests: len(reqs), Time: time.Now().UTC()}
	rp := &Replayer{Prompts: prober.NewPrefixPrompts(hr.Prober), Prober: hr.Prober, Target: hr.Target, Model: hr.Model,
		Scenario:    prober.Scenario{Name: "headroom_" + name, Family: prober.FamilyCustom, Timeout: hr.Timeout},
		BlockTokens: hr.Spec.Block(), Reqs: reqs}
	o := hr.Options
	o.Prepare = rp.Prepare
	rep.Headroom, err = Replay(ctx, reqs, rp.Send, Judge(hr.Thresholds, hr.TTFT), o)
	return rep, err
}

// WriteReport writes rep as JSON.
func (rep HeadroomReport) WriteReport(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadHeadroomReport reads a report WriteReport wrote.
func ReadHeadroomReport(path string) (HeadroomReport, error) {
	var rep HeadroomReport
	b, err := os.ReadFile(path)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, fmt.Errorf("%s: not a headroom report: %w", path, err)
	}
	if rep.Bound == "" || rep.Workload == "" {
		return rep, fmt.Errorf("%s: not a headroom report (no bound or workload)", path)
	}
	return rep, nil
}

// WriteMetrics writes slaprobe_capacity_traffic_multiple{target, workload}
// in the Prometheus text format, atomically, for a textfile collector
// (node_exporter's --collector.textfile.directory). A headroom below the
// smallest speed-up tested is written as 0; one at least the largest tested
// as that speed-up, with slaprobe_capacity_traffic_multiple_lower_bound 1.
func (rep HeadroomReport) WriteMetrics(path string) error {
	reg := prometheus.NewRegistry()
	labels := []string{"target", "workload"}
	m := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slaprobe_capacity_traffic_multiple",
		Help: "Largest multiple of the workload trace's traffic (replayed open-loop at speed-ups) at which the target still met the goodput rule."}, labels)
	lb := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slaprobe_capacity_traffic_multiple_lower_bound",
		Help: "1 when every speed-up tested held, so slaprobe_capacity_traffic_multiple is a lower bound."}, labels)
	ts := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slaprobe_capacity_traffic_multiple_timestamp_seconds",
		Help: "When the replay sweep that measured slaprobe_capacity_traffic_multiple ended."}, labels)
	reg.MustRegister(m, lb, ts)
	m.WithLabelValues(rep.Target, rep.Workload).Set(rep.Multiple)
	bound := 0.0
	if rep.Bound == "at_least" {
		bound = 1
	}
	lb.WithLabelValues(rep.Target, rep.Workload).Set(bound)
	ts.WithLabelValues(rep.Target, rep.Workload).Set(float64(rep.Time.UnixNano()) / 1e9)
	return prometheus.WriteToTextfile(path, reg)
}

// CompareHeadroom says how now's headroom moved against base's: the
// relative change (−0.17 for 17 % less) and a line saying it.
func CompareHeadroom(now, base HeadroomReport) (change float64, text string) {
	if base.Multiple <= 0 || now.Bound == "unknown" || base.Bound == "unknown" {
		return 0, fmt.Sprintf("headroom %s against baseline %s: not comparable", now.Headroom, base.Headroom)
	}
	change = now.Multiple/base.Multiple - 1
	word := "more"
	if change < 0 {
		word = "less"
	}
	return change, fmt.Sprintf("headroom %s against baseline %s (%s): %.0f %% %s", now.Headroom, base.Headroom, base.Time.Format(time.DateOnly),
		100*abs(change), word)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
