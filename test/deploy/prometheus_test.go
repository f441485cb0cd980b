package deploy

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// TestPrometheusConfigs runs promtool check config on the example Prometheus configs in deploy/
// (the single-instance one and the fleet one with /probe and hashmod sharding).
func TestPrometheusConfigs(t *testing.T) {
	promtool := requireTool(t, "promtool", "prometheus")
	root := repoRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, "deploy", "prometheus*.yml"))
	if len(files) < 2 {
		t.Fatalf("deploy/prometheus*.yml: %v, want prometheus.yml and prometheus-fleet.yml", files)
	}
	for _, f := range files {
		testproc.SeesTree()
		out, err := exec.Command(promtool, "check", "config", f).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "is valid prometheus config file syntax") {
			t.Errorf("promtool check config %s: %v\n%s", f, err, out)
		}
	}
}
