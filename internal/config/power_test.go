package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

const powerEngineTarget = "targets: [{name: a, url: 'http://127.0.0.1:8000'}]\n"

func TestPowerConfigDefaults(t *testing.T) {
	c, err := LoadBytes([]byte(powerEngineTarget))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Power
	if !p.NVML || p.PricePerKWh != 0.10 || p.PollInterval != model.Duration(5*time.Second) || p.Window != model.Duration(5*time.Minute) || len(p.Devices) != 0 {
		t.Errorf("defaults %+v", p)
	}
	// A section with some fields keeps the defaults of the others.
	c, err = LoadBytes([]byte(powerEngineTarget + "power:\n  price_per_kwh: 0.25\n  devices: ['0', 'GPU-5f3b0c1e-aaaa']\n  target_devices: {a: ['1']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultPowerConfig()
	want.PricePerKWh = 0.25
	want.Devices = []string{"0", "GPU-5f3b0c1e-aaaa"}
	want.TargetDevices = map[string][]string{"a": {"1"}}
	if !reflect.DeepEqual(c.Power, want) {
		t.Errorf("power = %+v\nwant %+v", c.Power, want)
	}
	if err := c.Power.CheckTargets([]string{"a"}); err != nil {
		t.Error(err)
	}
	if err := c.Power.CheckTargets([]string{"b"}); err == nil || !strings.Contains(err.Error(), `power.target_devices["a"]: no target has that name`) {
		t.Errorf("CheckTargets: %v", err)
	}
	// nvml: false is kept, not overwritten by the default.
	c, _ = LoadBytes([]byte(powerEngineTarget + "power:\n  nvml: false\n"))
	if c.Power.NVML {
		t.Error("nvml: false ignored")
	}
	if o := c.Power.ReaderOptions(); o.PollInterval != 5*time.Second {
		t.Errorf("reader options %+v", o)
	}
}

func TestPowerConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"poll_interval: 200ms", "power.poll_interval=200ms; expected at least 1s"},
		{"price_per_kwh: -1", "power.price_per_kwh=-1; expected a price in dollars >= 0"},
		{"window: 6s", "power.window=6s; expected at least twice power.poll_interval (5s)"},
		{"devices: ['gpu0']", `power.devices[0]="gpu0": GPU selector "gpu0": expected a device index such as "0" or a UUID`},
		{"devices: ['MIG-1234']", "MIG devices are not supported"},
		{"target_devices: {a: []}", `power.target_devices["a"] is empty; expected at least one GPU index or UUID`},
		{"target_devices: {a: ['-2']}", `power.target_devices["a"][0]="-2"`},
		{"bogus: 1", `unknown field "bogus"`},
	} {
		_, err := LoadBytes([]byte(powerEngineTarget + "power:\n  " + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v; want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}
