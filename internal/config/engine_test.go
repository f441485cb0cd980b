package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

func TestEngineConfigDefaults(t *testing.T) {
	c, err := LoadBytes([]byte(powerEngineTarget))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Engine
	if !reflect.DeepEqual(e, DefaultEngineConfig()) || !e.Enabled {
		t.Errorf("defaults %+v", e)
	}
	o := e.WatcherOptions()
	if o.Interval != 15*time.Second || o.Timeout != 5*time.Second || o.ProbeTimeout != time.Second || o.History != 15*time.Minute {
		t.Errorf("watcher options %+v", o)
	}
	c, err = LoadBytes([]byte(powerEngineTarget + "engine:\n  scrape_interval: 30s\n  live:\n    queue_depth_samples: 50\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultEngineConfig()
	want.ScrapeInterval = model.Duration(30 * time.Second)
	want.Live.QueueDepthSamples = 50
	if !reflect.DeepEqual(c.Engine, want) {
		t.Errorf("engine = %+v\nwant %+v", c.Engine, want)
	}
	if err := CheckLiveSignals(DefaultEngineConfig(), DefaultPowerConfig()); err != nil {
		t.Error(err)
	}
	p := DefaultPowerConfig()
	p.Window = model.Duration(time.Hour)
	if err := CheckLiveSignals(DefaultEngineConfig(), p); err == nil || !strings.Contains(err.Error(), "power.window=1h; expected at most engine.history (15m)") {
		t.Errorf("CheckLiveSignals: %v", err)
	}
}

func TestEngineConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"scrape_interval: 500ms", "engine.scrape_interval=500ms; expected at least 1s"},
		{"scrape_timeout: 20s", "engine.scrape_timeout=20s; expected a positive duration no longer than engine.scrape_interval (15s)"},
		{"probe_scrape_timeout: 0s", "engine.probe_scrape_timeout=0s; expected a positive duration up to 10s"},
		{"history: 20s", "engine.history=20s; expected at least twice engine.scrape_interval (15s)"},
		{"live: {queue_depth_samples: 1}", "engine.live.queue_depth_samples=1; expected from 2 to 100000"},
		{"live: {efficiency_window: 5s}", "engine.live.efficiency_window=5s; expected at least engine.scrape_interval (15s)"},
		{"live: {efficiency_window: 1h}", "engine.live.efficiency_window=1h; expected at most engine.history (15m)"},
		{"live: {efficiency_smoothing: 0s}", "engine.live.efficiency_smoothing=0s; expected a positive duration"},
		{"live: {bogus: 1}", `unknown field "bogus" in engine.live`},
		{"bogus: 1", `unknown field "bogus" in engine`},
	} {
		_, err := LoadBytes([]byte(powerEngineTarget + "engine:\n  " + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v; want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}
