package e2e

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestGrafanaProvisioning decodes deploy/grafana/provisioning strictly, with the fields Grafana's
// provisioning format (apiVersion 1) defines, and checks what the dashboards need from them: a Prometheus
// data source and a file provider.
func TestGrafanaProvisioning(t *testing.T) {
	root := repoRoot(t)
	dir := filepath.Join(root, "deploy", "grafana", "provisioning")

	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name      string         `yaml:"name"`
			UID       string         `yaml:"uid"`
			Type      string         `yaml:"type"`
			Access    string         `yaml:"access"`
			URL       string         `yaml:"url"`
			IsDefault bool           `yaml:"isDefault"`
			Editable  bool           `yaml:"editable"`
			OrgID     int            `yaml:"orgId"`
			JSONData  map[string]any `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	decodeStrict(t, filepath.Join(dir, "datasources", "slaprobe-prometheus.yml"), &ds)
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 {
		t.Fatalf("datasources: apiVersion %d, %d data sources; want 1 and 1", ds.APIVersion, len(ds.Datasources))
	}
	d := ds.Datasources[0]
	if d.Type != "prometheus" || d.UID == "" || d.Name == "" || d.Access != "proxy" {
		t.Errorf("data source %+v: want a named prometheus data source with a uid, access proxy", d)
	}
	if u, err := url.Parse(d.URL); err != nil || u.Scheme == "" || u.Host == "" {
		t.Errorf("data source url %q: want an absolute URL (%v)", d.URL, err)
	}
	// Exemplars (the probe's trace_id) link to the trace data source.
	var traces struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name     string `yaml:"name"`
			UID      string `yaml:"uid"`
			Type     string `yaml:"type"`
			Access   string `yaml:"access"`
			URL      string `yaml:"url"`
			Editable bool   `yaml:"editable"`
		} `yaml:"datasources"`
	}
	decodeStrict(t, filepath.Join(dir, "datasources", "slaprobe-traces.yml"), &traces)
	if len(traces.Datasources) != 1 || (traces.Datasources[0].Type != "tempo" && traces.Datasources[0].Type != "jaeger") {
		t.Fatalf("slaprobe-traces.yml: %+v; want one tempo or jaeger data source", traces.Datasources)
	}
	dest, _ := d.JSONData["exemplarTraceIdDestinations"].([]any)
	if len(dest) != 1 {
		t.Fatalf("exemplarTraceIdDestinations = %v; want one, for the trace_id exemplar label", d.JSONData["exemplarTraceIdDestinations"])
	}
	if m, _ := dest[0].(map[string]any); m["name"] != "trace_id" || m["datasourceUid"] != traces.Datasources[0].UID {
		t.Errorf("exemplarTraceIdDestinations[0] = %v; want name trace_id and datasourceUid %q", dest[0], traces.Datasources[0].UID)
	}

	var prov struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name                  string `yaml:"name"`
			OrgID                 int    `yaml:"orgId"`
			Folder                string `yaml:"folder"`
			FolderUID             string `yaml:"folderUid"`
			Type                  string `yaml:"type"`
			DisableDeletion       bool   `yaml:"disableDeletion"`
			AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
			UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
			Options               struct {
				Path                      string `yaml:"path"`
				FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	decodeStrict(t, filepath.Join(dir, "dashboards", "slaprobe.yml"), &prov)
	if prov.APIVersion != 1 || len(prov.Providers) != 1 {
		t.Fatalf("dashboards: apiVersion %d, %d providers; want 1 and 1", prov.APIVersion, len(prov.Providers))
	}
	p := prov.Providers[0]
	if p.Type != "file" || !filepath.IsAbs(p.Options.Path) || p.Folder == "" {
		t.Errorf("provider %+v: want type file, an absolute options.path and a folder", p)
	}

	// Every dashboard picks its data source through a variable of type prometheus, which the
	// provisioned data source satisfies.
	for _, db := range loadDashboards(t, root) {
		raw, err := os.ReadFile(filepath.Join(root, "dashboards", db.file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(raw, []byte(`"query": "prometheus"`)) {
			t.Errorf("%s: no data source variable of type prometheus", db.file)
		}
	}
}

func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
