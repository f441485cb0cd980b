package sweeper

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/gpu/gpumock"
)

// fakeServer lists a LoRA adapter before its base model and has no engine
// metrics.
func fakeServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"data":[{"id":"lora","max_model_len":null},{"id":"base","max_model_len":32768}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Bench and the daemon's sweeps set up through NewPlan, so both charge a
// target only the GPUs that power.target_devices gives it. The daemon's
// sweeps used to sample every selected GPU for every target.
func TestPlanPowerPerTarget(t *testing.T) {
	url := fakeServer(t)
	cfg, err := config.LoadBytes([]byte(`
targets:
  - {name: a, url: '` + url + `'}
  - {name: b, url: '` + url + `'}
power:
  target_devices: {a: ['1']}
sweep:
  scenarios: [chatbot]
`))
	if err != nil {
		t.Fatal(err)
	}
	gpus := gpumock.New(2)
	gpus.Devices[0].SetLoad(400, 90)
	gpus.Devices[1].SetLoad(600, 95)
	r, err := gpu.New(gpus, nil, gpu.Options{PollInterval: time.Millisecond})
	if err != nil || !r.Up() {
		t.Fatalf("reader: %v", err)
	}
	defer r.Close()
	env := Env{GPUs: r, PowerSampleInterval: 5 * time.Millisecond}

	plans, err := PlansFor(context.Background(), cfg, cfg.Sweep, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		watts float64
		gpus  int
	}{{600, 1}, {1000, 2}} {
		p := plans[i]
		if p.Model.ID != "base" || p.Model.MaxModelLen != 32768 {
			t.Errorf("%s: model %+v; want the base model, as probes choose", p.Target.Name, p.Model)
		}
		if len(p.Scenarios) != 1 || p.Scenarios[0].Name != "chatbot" {
			t.Errorf("%s: scenarios %+v", p.Target.Name, p.Scenarios)
		}
		if g := p.Meta().GPU; g == nil || g.Count != want.gpus {
			t.Errorf("%s: meta GPU %+v; want %d GPU(s)", p.Target.Name, g, want.gpus)
		}
		ps := p.Options.Power
		if ps == nil {
			t.Fatalf("%s: no power sampler", p.Target.Name)
		}
		if err := ps.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond)
		rd, err := ps.Stop()
		if err != nil {
			t.Fatal(err)
		}
		if rd.PeakWatts != want.watts { // the mock's energy counter stands still, so the average (from it) is 0
			t.Errorf("%s: peak power %.0f W; want %.0f W", p.Target.Name, rd.PeakWatts, want.watts)
		}
	}
}

func TestPlanUnknownScenario(t *testing.T) {
	url := fakeServer(t)
	cfg, err := config.LoadBytes([]byte("targets: [{name: a, url: '" + url + "'}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	targets, _ := cfg.Targets()
	_, err = NewPlan(context.Background(), cfg, cfg.Sweep, targets[0], []string{"chatbot", "nope"}, Env{})
	if err == nil || !strings.Contains(err.Error(), `unknown scenario "nope"; expected one of:`) {
		t.Fatalf("err = %v", err)
	}
}

// A sweep of named targets sets up those only: another target that is down (its /v1/models
// refused) does not stop it. Setting up every target used to fail a request for one while any other
// was down.
func TestPlansForNamedTargetsOnly(t *testing.T) {
	up := fakeServer(t)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	cfg, err := config.LoadBytes([]byte(`
targets:
  - {name: up, url: '` + up + `', model: base}
  - {name: down, url: '` + downURL + `'}
sweep:
  scenarios: [chatbot]
`))
	if err != nil {
		t.Fatal(err)
	}
	plans, err := PlansFor(context.Background(), cfg, cfg.Sweep, []string{"up"}, Env{})
	if err != nil || len(plans) != 1 || plans[0].Target.Name != "up" {
		t.Fatalf("plans for [up]: %v, %v; want up's alone", plans, err)
	}
	if _, err := PlansFor(context.Background(), cfg, cfg.Sweep, nil, Env{}); err == nil || !strings.Contains(err.Error(), "down") {
		t.Errorf("plans for every target: error %v, want one naming the target that is down", err)
	}
}
