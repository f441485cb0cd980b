package daemon

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestConcurrentReloads: while probes run, the config file is rewritten
// (sometimes half-written, so some reloads fail) and reloaded at once from
// several goroutines through Reload, POST /-/reload and SIGHUP, while
// others read /metrics and /config. Nothing races (run with -race), every
// reload either takes a whole good file or keeps the running config, and
// once the file settles the daemon runs exactly that config.
func TestConcurrentReloads(t *testing.T) {
	td := startDaemon(t, configA, true)
	td.waitMetrics(t, `target="a"`)

	configs := []string{configA, configB, strings.Replace(configB, "name: b", "name: c", 1)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var okReloads, failed int
	count := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed++
		} else {
			okReloads++
		}
	}
	// The writer: whole files, and now and then a torn one.
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c := configs[i%len(configs)]
			if i%5 == 4 {
				c = c[:len(c)/2] + "\n  - {{{"
			}
			_ = os.WriteFile(td.file, []byte(c), 0o644)
			time.Sleep(3 * time.Millisecond)
		}
	})
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := td.Reload()
				count(err)
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := http.Post(td.srv.URL+"/-/reload", "", nil)
			if err == nil {
				resp.Body.Close()
			}
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGHUP) // the daemon reloads on SIGHUP
		}
	})
	for _, path := range []string{"/metrics", "/config", "/-/ready"} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if resp, err := http.Get(td.srv.URL + path); err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d reloads took a good file or found it unchanged, %d failed on a torn or stale one", okReloads, failed)
	if okReloads == 0 || failed == 0 {
		t.Errorf("reloads: %d ok, %d failed; the test wants both to happen", okReloads, failed)
	}

	// The file settles on config c: one more reload, and c is what runs.
	final := configs[2]
	writeConfig(t, td.file, final)
	if _, err := td.Reload(); err != nil {
		t.Fatalf("final reload: %v", err)
	}
	if tc := td.Config().TargetConfigs; len(tc) != 1 || tc[0].Name != "c" {
		t.Fatalf("running config targets %v, want [c]", td.Config().TargetConfigs)
	}
	if !td.Ready() {
		t.Error("not ready after the reloads")
	}
	body := td.waitMetrics(t, `slaprobe_probes_total{api="chat",model="fake-model",result="success",scenario="chatbot",target="c"}`)
	for _, gone := range []string{`target="a"`, `target="b"`} {
		if strings.Contains(body, gone) {
			t.Errorf("/metrics still has series of %s after the reloads settled on c", gone)
		}
	}
	if code, cfg := td.get(t, http.MethodGet, "/config"); code != 200 || !strings.Contains(cfg, "name: c") {
		t.Errorf("/config = %d, does not show target c:\n%s", code, cfg)
	}
	if _, m := td.get(t, http.MethodGet, "/metrics"); !strings.Contains(m, "slaprobe_config_last_reload_successful 1") {
		t.Error("slaprobe_config_last_reload_successful is not 1 after a good reload")
	}
}
