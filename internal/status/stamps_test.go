package status

import (
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/prober"
)

// TestProbesViewStamps: /probes says where each probe's arrival times came
// from.
func TestProbesViewStamps(t *testing.T) {
	f := newFixture(t)
	k := okResult("a", "rag", f.clock.t)
	k.Stamps = prober.StampKernel
	probe(f.rec, f.clock, k)
	u := okResult("a", "chatbot", f.clock.t)
	u.Stamps = prober.StampUser
	probe(f.rec, f.clock, u)
	_, body := get(t, f.srv.URL+"/probes?target=a")
	for _, want := range []string{`data-stamps="kernel">stamps: kernel`, `data-stamps="user">stamps: user`} {
		if !strings.Contains(body, want) {
			t.Errorf("probe view lacks %q", want)
		}
	}
}
