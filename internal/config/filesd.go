package config

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/prober"
)

// FileSDConfig discovers targets from files in Prometheus's file_sd format:
// a YAML or JSON list of groups, each with `targets` (host:port or a base
// URL) and optional `labels`. Every discovered target takes the settings of
// the template fields below; three labels refine it:
//
//   - __scheme__: http (default) or https, for host:port entries;
//   - target: the `target` label of its series (default host:port);
//   - model: the model to probe (default the template's, else auto-detect).
//
// Other labels are ignored, so files written for Prometheus work as they
// are. The files are read again every RefreshInterval and the config is
// reloaded when their content changed.
type FileSDConfig struct {
	// Files are paths or globs (filepath.Match syntax, in the last path
	// element only, as Prometheus has it), relative to the config file.
	Files []string `yaml:"files"`
	// RefreshInterval is how often the files are checked (default 10s).
	RefreshInterval model.Duration `yaml:"refresh_interval"`

	TargetTemplate `yaml:",inline"`
}

// TargetTemplate holds the target settings that discovered targets and the
// targets of /probe take: a TargetConfig without name and url.
type TargetTemplate struct {
	Model            string                   `yaml:"model,omitempty"`
	API              prober.API               `yaml:"api"`
	Scenarios        []string                 `yaml:"scenarios,omitempty"`
	Headers          Headers                  `yaml:"headers,omitempty"`
	HTTPClientConfig promcfg.HTTPClientConfig `yaml:"http_client_config"`
}

// DefaultFileSDRefresh is the default refresh_interval of file_sd_configs.
const DefaultFileSDRefresh = 10 * time.Second

func defaultTemplate() TargetTemplate {
	return TargetTemplate{API: prober.APIChat, HTTPClientConfig: defaultHTTPClientConfig()}
}

type plainFileSD FileSDConfig

// UnmarshalYAML sets the defaults of a file_sd_configs entry.
func (f *FileSDConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*f = FileSDConfig{RefreshInterval: model.Duration(DefaultFileSDRefresh), TargetTemplate: defaultTemplate()}
	return unmarshal((*plainFileSD)(f))
}

// targetGroup is one entry of a file_sd file.
type targetGroup struct {
	Targets []string          `yaml:"targets"`
	Labels  map[string]string `yaml:"labels"`
}

// sdFile is one file a file_sd_configs entry matched, as last read.
type sdFile struct {
	path string
	data []byte
}

// sdPaths expands the globs of every file_sd_configs entry, relative to dir.
func (c *Config) sdPaths(dir string) ([][]string, error) {
	out := make([][]string, len(c.FileSDConfigs))
	for i, sd := range c.FileSDConfigs {
		for _, pat := range sd.Files {
			if !filepath.IsAbs(pat) && dir != "" {
				pat = filepath.Join(dir, pat)
			}
			m, err := filepath.Glob(pat)
			if err != nil {
				return nil, fmt.Errorf("file_sd_configs[%d].files: %q: %w", i, pat, err)
			}
			out[i] = append(out[i], m...)
		}
		sort.Strings(out[i])
	}
	return out, nil
}

// sdDigest is a checksum of the discovered files' names and contents: a
// change means the targets may have changed.
func sdDigest(files []sdFile) [sha256.Size]byte {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.path, len(f.data))
		h.Write(f.data)
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// readSD reads the files every file_sd_configs entry matches now.
func (c *Config) readSD() ([][]sdFile, [sha256.Size]byte, error) {
	paths, err := c.sdPaths(c.sdDir)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	out := make([][]sdFile, len(paths))
	var all []sdFile
	for i, ps := range paths {
		for _, p := range ps {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, [sha256.Size]byte{}, fmt.Errorf("file_sd_configs[%d]: %w", i, err)
			}
			out[i] = append(out[i], sdFile{path: p, data: b})
			all = append(all, sdFile{path: p, data: b})
		}
	}
	return out, sdDigest(all), nil
}

// discover validates file_sd_configs and appends the targets of their
// files to TargetConfigs. dir is the config file's directory.
func (c *Config) discover(dir string) error {
	c.sdDir = dir
	for i, sd := range c.FileSDConfigs {
		if len(sd.Files) == 0 {
			return fmt.Errorf("file_sd_configs[%d].files is empty; expected at least one path or glob, e.g. targets/*.yml", i)
		}
		for _, f := range sd.Files {
			if f == "" {
				return fmt.Errorf("file_sd_configs[%d].files has an empty entry; expected a path or glob", i)
			}
			if _, err := filepath.Match(filepath.Base(f), ""); err != nil {
				return fmt.Errorf("file_sd_configs[%d].files: %q is not a valid glob: %v", i, f, err)
			}
		}
		if sd.RefreshInterval < model.Duration(time.Second) {
			return fmt.Errorf("file_sd_configs[%d].refresh_interval=%s; expected at least 1s", i, sd.RefreshInterval)
		}
	}
	if len(c.FileSDConfigs) == 0 {
		return nil
	}
	files, sum, err := c.readSD()
	if err != nil {
		return err
	}
	c.sdSum = sum
	for i, sd := range c.FileSDConfigs {
		if dir != "" {
			c.FileSDConfigs[i].HTTPClientConfig.SetDirectory(dir)
			sd = c.FileSDConfigs[i]
		}
		for _, f := range files[i] {
			ts, err := parseSDFile(f, sd.TargetTemplate)
			if err != nil {
				return fmt.Errorf("file_sd_configs[%d]: %w", i, err)
			}
			c.TargetConfigs = append(c.TargetConfigs, ts...)
		}
	}
	return nil
}

// parseSDFile turns one file_sd file into targets.
func parseSDFile(f sdFile, tmpl TargetTemplate) ([]TargetConfig, error) {
	if len(bytes.TrimSpace(f.data)) == 0 {
		return nil, nil // a file being written, or no targets yet
	}
	var groups []targetGroup
	dec := yaml.NewDecoder(bytes.NewReader(f.data))
	dec.KnownFields(true)
	if err := dec.Decode(&groups); err != nil {
		return nil, fmt.Errorf("%s: %s; expected a list of {targets: [host:port, ...], labels: {...}} as Prometheus's file_sd reads",
			f.path, strings.TrimPrefix(yamlError(nil, err).Error(), "parse config: "))
	}
	var out []TargetConfig
	for gi, g := range groups {
		scheme := g.Labels[model.SchemeLabel]
		switch scheme {
		case "":
			scheme = "http"
		case "http", "https":
		default:
			return nil, fmt.Errorf("%s: group %d: label %s=%q; expected http or https", f.path, gi, model.SchemeLabel, scheme)
		}
		for ti, addr := range g.Targets {
			where := fmt.Sprintf("%s: group %d, targets[%d]", f.path, gi, ti)
			u, err := sdURL(addr, scheme)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			t := TargetConfig{
				Name:             g.Labels["target"],
				URL:              u,
				Model:            tmpl.Model,
				API:              tmpl.API,
				Scenarios:        cloneStrings(tmpl.Scenarios),
				Headers:          tmpl.Headers,
				HTTPClientConfig: tmpl.HTTPClientConfig,
				origin:           fmt.Sprintf("%s (%s)", where, RedactURL(addr)),
			}
			if len(g.Targets) > 1 && t.Name != "" {
				return nil, fmt.Errorf("%s: label target=%q is set on a group of %d targets; expected one target per group when it names the target",
					where, t.Name, len(g.Targets))
			}
			if m := g.Labels["model"]; m != "" {
				t.Model = m
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// sdURL makes a base URL of a file_sd target: host:port, or a URL as is.
func sdURL(addr, scheme string) (string, error) {
	if addr == "" {
		return "", fmt.Errorf("empty target; expected host:port or a base URL")
	}
	if strings.Contains(addr, "://") {
		return addr, nil // checked with the other targets
	}
	u, err := url.Parse(scheme + "://" + addr)
	if err != nil || u.Host == "" || u.Path != "" {
		return "", fmt.Errorf("target %q; expected host:port (e.g. 10.0.0.7:8000) or a base URL", RedactURL(addr))
	}
	return u.String(), nil
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string{}, s...)
}

// TargetFilesChanged reports whether the files of file_sd_configs now read
// differently from when c was loaded (content, or which files match). An
// unreadable file counts as a change, so that the reload reports it.
func (c *Config) TargetFilesChanged() bool {
	if c == nil || len(c.FileSDConfigs) == 0 {
		return false
	}
	_, sum, err := c.readSD()
	return err != nil || sum != c.sdSum
}

// TargetFilesRefresh is how often the files of file_sd_configs should be
// checked: the shortest refresh_interval; 0 when there are none.
func (c *Config) TargetFilesRefresh() time.Duration {
	var d time.Duration
	if c == nil {
		return 0
	}
	for _, sd := range c.FileSDConfigs {
		if r := time.Duration(sd.RefreshInterval); d == 0 || r < d {
			d = r
		}
	}
	return d
}

// WatchTargetFiles calls reload whenever the files of the current config's
// file_sd_configs change, checking them every refresh_interval, until ctx
// is done. get returns the current config; the interval follows it.
func WatchTargetFiles(ctx context.Context, get func() *Config, reload func(), logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	for {
		wait := get().TargetFilesRefresh()
		if wait == 0 {
			wait = DefaultFileSDRefresh // none now; a reload may add some
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if get().TargetFilesChanged() {
			logger.Info("file_sd target files changed; reloading the config")
			reload()
		}
	}
}
