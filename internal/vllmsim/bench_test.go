package vllmsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkStreams64 runs 64 concurrent streams at ~5 ms ITL and reports how long after the server's
// recorded write time (Trace.Chunks[].At) a plain client reads each output chunk: the floor of any
// prober's timing error against this simulator.
//
//	go test -run '^$' -bench Streams64 ./internal/vllmsim/
func BenchmarkStreams64(b *testing.B) {
	cfg := DefaultConfig()
	cfg.EOSMeanTokens = 0
	cfg.MaxNumBatchedTokens = 0
	cfg.PrefillOverhead = 10 * time.Millisecond
	cfg.DecodeBase, cfg.DecodePerSeq, cfg.DecodePerKVToken = 4*time.Millisecond, 15*time.Microsecond, 0
	e, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	body, _ := json.Marshal(chatBody("benchmark "+words(200), 100, nil))

	var (
		mu    sync.Mutex
		delay time.Duration
		n     int
	)
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				defer resp.Body.Close()
				var recv []time.Time
				id := ""
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					at := time.Now()
					line := sc.Text()
					if !strings.Contains(line, `"content":"`) || strings.Contains(line, `"content":""`) {
						if id == "" && strings.Contains(line, `"id":"`) {
							id = strings.SplitN(strings.SplitN(line, `"id":"`, 2)[1], `"`, 2)[0]
						}
						continue
					}
					recv = append(recv, at)
				}
				tr, ok := e.Trace(id)
				if !ok || len(tr.Chunks) != len(recv) {
					b.Errorf("trace %v chunks %d, received %d", ok, len(tr.Chunks), len(recv))
					return
				}
				mu.Lock()
				for i, c := range tr.Chunks {
					delay += recv[i].Sub(c.At)
					n++
				}
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(delay.Microseconds())/float64(max(n, 1)), "µs-read-after-write")
}
