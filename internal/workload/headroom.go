package workload

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
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

// RunHeadroom reads the trace and replays it against the target. The
// report holds the target in its Meta and the result in Headroom; it is
// partial (Meta.Interrupted) when the context ended the replay.
func RunHeadroom(ctx context.Context, hr HeadroomRun) (*report.Report, error) {
	r, err := Open(hr.Spec)
	if err != nil {
		return nil, err
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
			return nil, err
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
	rep := &report.Report{Meta: report.Meta{ToolVersion: version.Version, TargetURL: report.RedactURL(hr.Target.BaseURL),
		API: string(hr.Target.API), Model: hr.Model, StartedAt: time.Now().UTC(),
		Host: report.Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}}}
	rep.Meta.Host.Hostname, _ = os.Hostname()
	rp := &Replayer{Prompts: prober.NewPrefixPrompts(hr.Prober), Prober: hr.Prober, Target: hr.Target, Model: hr.Model,
		Scenario:    prober.Scenario{Name: "headroom_" + name, Family: prober.FamilyCustom, Timeout: hr.Timeout},
		BlockTokens: hr.Spec.Block(), Reqs: reqs}
	o := hr.Options
	o.Prepare = rp.Prepare
	h, err := Replay(ctx, reqs, rp.Send, Judge(hr.Thresholds, hr.TTFT), o)
	h.Workload, h.Trace, h.Format, h.Requests = name, hr.Spec.Path, string(hr.Spec.Format), len(reqs)
	rep.Headroom = &h
	rep.Meta.FinishedAt = time.Now().UTC()
	rep.Meta.Interrupted = err != nil
	return rep, err
}

// WriteHeadroomMetrics writes slaprobe_capacity_traffic_multiple{target,
// workload} of a headroom report in the Prometheus text format,
// atomically, for a textfile collector (node_exporter's
// --collector.textfile.directory). target is the label's value. A headroom
// below the smallest speed-up tested is written as 0; one at least the
// largest tested as that speed-up, with
// slaprobe_capacity_traffic_multiple_lower_bound 1.
func WriteHeadroomMetrics(path, target string, rep *report.Report) error {
	h := rep.Headroom
	if h == nil {
		return errors.New("no headroom in the report")
	}
	reg := prometheus.NewRegistry()
	labels := []string{"target", "workload"}
	m := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slaprobe_capacity_traffic_multiple",
		Help: "Largest multiple of the workload trace's traffic (replayed open-loop at speed-ups) at which the target still met the goodput rule."}, labels)
	lb := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slaprobe_capacity_traffic_multiple_lower_bound",
		Help: "1 when every speed-up tested held, so slaprobe_capacity_traffic_multiple is a lower bound."}, labels)
	ts := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slaprobe_capacity_traffic_multiple_timestamp_seconds",
		Help: "When the replay sweep that measured slaprobe_capacity_traffic_multiple ended."}, labels)
	reg.MustRegister(m, lb, ts)
	m.WithLabelValues(target, h.Workload).Set(h.Multiple)
	bound := 0.0
	if h.Bound == sweep.BoundAtLeast {
		bound = 1
	}
	lb.WithLabelValues(target, h.Workload).Set(bound)
	ts.WithLabelValues(target, h.Workload).Set(float64(rep.Meta.FinishedAt.UnixNano()) / 1e9)
	return prometheus.WriteToTextfile(path, reg)
}
