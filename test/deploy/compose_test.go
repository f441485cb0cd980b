package deploy

import (
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/test/testproc"
)

const composeDir = "deploy/compose"

// loadCompose loads deploy/compose/compose.yaml with compose-go as `docker compose --profile p`
// would (schema validation, interpolation with an empty environment, paths resolved).
func loadCompose(t *testing.T, profile string) *types.Project {
	t.Helper()
	dir := filepath.Join(repoRoot(t), composeDir)
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "compose.yaml")},
		cli.WithWorkingDirectory(dir), cli.WithProfiles([]string{profile}), cli.WithEnv(nil), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose --profile %s: %v", profile, err)
	}
	return p
}

func serviceNames(p *types.Project) []string {
	var out []string
	for name := range p.Services {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// hostService returns the service a hostname resolves to on the default network (its name or alias).
func hostService(t *testing.T, p *types.Project, host string) types.ServiceConfig {
	t.Helper()
	var found []types.ServiceConfig
	for name, s := range p.Services {
		aliases := []string{name}
		if n := s.Networks["default"]; n != nil {
			aliases = append(aliases, n.Aliases...)
		}
		if slices.Contains(aliases, host) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("host %q: %d services answer to it, want 1", host, len(found))
	}
	return found[0]
}

// hostPath maps a path inside a service's container to the bind-mounted file on the host.
func hostPath(t *testing.T, s types.ServiceConfig, inContainer string) string {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		if rel, err := filepath.Rel(v.Target, inContainer); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(v.Source, rel)
		}
	}
	t.Fatalf("service %s: %s is not under any bind mount", s.Name, inContainer)
	return ""
}

// exposes reports whether some container of s listens on port (slaprobe's and the engines' defaults).
func exposes(s types.ServiceConfig, port string) bool {
	for _, p := range s.Ports {
		if p.Target > 0 && port == strings.TrimSpace(strings.Split(p.Published, "-")[0]) {
			return true
		}
	}
	return false
}

func TestCompose(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range []struct {
		profile, engine string
		services        []string
	}{
		{"cpu", "vllm-sim", []string{"alertmanager", "grafana", "prometheus", "slaprobe", "vllm-sim"}},
		{"gpu", "vllm", []string{"alertmanager", "grafana", "prometheus", "slaprobe", "vllm"}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			p := loadCompose(t, tc.profile)
			if got := serviceNames(p); !slices.Equal(got, tc.services) {
				t.Fatalf("services %v, want %v", got, tc.services)
			}
			// Every bind mount's source exists: compose would otherwise create an empty directory.
			for _, s := range p.Services {
				for _, v := range s.Volumes {
					if v.Type == types.VolumeTypeBind {
						if _, err := os.Stat(v.Source); err != nil {
							t.Errorf("service %s mounts %s: %v", s.Name, v.Source, err)
						}
						if !v.ReadOnly {
							t.Errorf("service %s mounts %s writable", s.Name, v.Source)
						}
					}
				}
				if s.Build != nil {
					if _, err := os.Stat(filepath.Join(s.Build.Context, "Dockerfile")); err != nil || s.Build.Context != root {
						t.Errorf("service %s builds %s; want the repository's Dockerfile", s.Name, s.Build.Context)
					}
				}
			}

			// The engine answers as vllm:8000 in both profiles.
			engine := hostService(t, p, "vllm")
			if engine.Name != tc.engine {
				t.Errorf("vllm resolves to %s, want %s", engine.Name, tc.engine)
			}
			if tc.profile == "gpu" {
				if !strings.HasPrefix(engine.Image, "vllm/vllm-openai:") {
					t.Errorf("gpu engine image %s, want vllm/vllm-openai", engine.Image)
				}
				gpu := false
				if engine.Deploy != nil && engine.Deploy.Resources.Reservations != nil {
					for _, d := range engine.Deploy.Resources.Reservations.Devices {
						gpu = gpu || (d.Driver == "nvidia" && slices.Contains(d.Capabilities, "gpu"))
					}
				}
				if !gpu {
					t.Error("the vllm service reserves no NVIDIA GPU")
				}
			} else if !slices.Equal([]string(engine.Command), []string{"sim", "--sim.listen-address=:8000"}) {
				t.Errorf("cpu engine command %v, want slaprobe sim on :8000", engine.Command)
			}

			// slaprobe's config loads and probes the engine.
			sp := p.Services["slaprobe"]
			cfgPath := ""
			for _, a := range sp.Command {
				if v, ok := strings.CutPrefix(a, "--config.file="); ok {
					cfgPath = hostPath(t, sp, v)
				}
			}
			c, err := config.Load(cfgPath)
			if err != nil {
				t.Fatalf("slaprobe config: %v", err)
			}
			for _, tg := range c.TargetConfigs {
				u, _ := url.Parse(tg.URL)
				if hostService(t, p, u.Hostname()).Name != tc.engine || u.Port() != "8000" {
					t.Errorf("slaprobe target %s is not the engine", tg.URL)
				}
			}
			if !sp.ReadOnly || !slices.Contains(sp.CapDrop, "ALL") {
				t.Error("slaprobe: want read_only and cap_drop ALL")
			}
			// Nothing here asks for credentials: every port on loopback only.
			for _, s := range p.Services {
				for _, port := range s.Ports {
					if port.Published != "" && port.HostIP != "127.0.0.1" {
						t.Errorf("service %s publishes %s on %q; want 127.0.0.1 only", s.Name, port.Published, port.HostIP)
					}
				}
			}

			checkComposePrometheus(t, p)
			checkComposeGrafana(t, p)
		})
	}
}

// checkComposePrometheus: the Prometheus config is valid (promtool), loads the rules from alerts/,
// and scrapes slaprobe as job "slaprobe" and the engine, both by their compose hostnames.
func checkComposePrometheus(t *testing.T, p *types.Project) {
	t.Helper()
	prom := p.Services["prometheus"]
	var cfgFile string
	for _, a := range prom.Command {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			cfgFile = hostPath(t, prom, v)
		}
	}
	var cfg struct {
		RuleFiles     []string `json:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
		Alerting struct {
			Alertmanagers []struct {
				StaticConfigs []struct {
					Targets []string `json:"targets"`
				} `json:"static_configs"`
			} `json:"alertmanagers"`
		} `json:"alerting"`
	}
	if err := yaml.Unmarshal(readFile(t, cfgFile), &cfg); err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(repoRoot(t), "alerts", "slaprobe.rules.yml")
	if len(cfg.RuleFiles) != 1 || hostPath(t, prom, cfg.RuleFiles[0]) != rules {
		t.Errorf("rule_files %v: want alerts/slaprobe.rules.yml through the mount", cfg.RuleFiles)
	}
	jobs := map[string]string{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				host, port, err := net.SplitHostPort(tg)
				if err != nil {
					t.Fatalf("job %s target %s: %v", sc.JobName, tg, err)
				}
				if host == "localhost" {
					continue
				}
				s := hostService(t, p, host)
				if !exposes(s, port) {
					t.Errorf("job %s scrapes %s, but service %s does not serve port %s", sc.JobName, tg, s.Name, port)
				}
				jobs[sc.JobName] = s.Name
			}
		}
	}
	if jobs["slaprobe"] != "slaprobe" || jobs["vllm"] == "" {
		t.Errorf("scrape jobs %v: want job slaprobe on the slaprobe service and the engine", jobs)
	}
	am := cfg.Alerting.Alertmanagers
	if len(am) != 1 || len(am[0].StaticConfigs) != 1 {
		t.Fatalf("alerting: want one Alertmanager")
	}
	host, _, _ := net.SplitHostPort(am[0].StaticConfigs[0].Targets[0])
	if hostService(t, p, host).Name != "alertmanager" {
		t.Errorf("alerts go to %s", am[0].StaticConfigs[0].Targets)
	}

	// promtool on a copy whose rule file is the host path the container sees.
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv(envRequire) == "1" {
			t.Fatalf("promtool not found (%s=1)", envRequire)
		}
		t.Log("promtool not found: run `make test-deps`; prometheus.yml not checked by promtool")
		return
	}
	b := strings.ReplaceAll(string(readFile(t, cfgFile)), cfg.RuleFiles[0], rules)
	tmp := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(tmp, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	testproc.SeesTree()
	if out, err := exec.Command(promtool, "check", "config", tmp).CombinedOutput(); err != nil {
		t.Errorf("promtool check config %s: %v\n%s", cfgFile, err, out)
	}
}

// checkComposeGrafana: the datasource points at the prometheus service and the dashboard provider
// reads the mounted dashboards/.
func checkComposeGrafana(t *testing.T, p *types.Project) {
	t.Helper()
	g := p.Services["grafana"]
	var ds struct {
		Datasources []struct {
			Type      string `json:"type"`
			URL       string `json:"url"`
			IsDefault bool   `json:"isDefault"`
		} `json:"datasources"`
	}
	if err := yaml.Unmarshal(readFile(t, hostPath(t, g, "/etc/grafana/provisioning/datasources/prometheus.yml")), &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || !ds.Datasources[0].IsDefault {
		t.Fatalf("datasources %+v", ds.Datasources)
	}
	u, err := url.Parse(ds.Datasources[0].URL)
	if err != nil || hostService(t, p, u.Hostname()).Name != "prometheus" {
		t.Errorf("datasource url %s is not the prometheus service", ds.Datasources[0].URL)
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	if err := yaml.Unmarshal(readFile(t, hostPath(t, g, "/etc/grafana/provisioning/dashboards/slaprobe.yml")), &prov); err != nil {
		t.Fatal(err)
	}
	if len(prov.Providers) != 1 {
		t.Fatalf("dashboard providers %+v", prov.Providers)
	}
	dir := hostPath(t, g, prov.Providers[0].Options.Path)
	if want := filepath.Join(repoRoot(t), "dashboards"); dir != want {
		t.Errorf("dashboards come from %s, want %s", dir, want)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(m) == 0 {
		t.Errorf("no dashboards in %s", dir)
	}
}
