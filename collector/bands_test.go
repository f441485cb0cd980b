package collector

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBandCollectorGolden(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewBandCollector())
	golden(t, reg, "bands.prom")
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
