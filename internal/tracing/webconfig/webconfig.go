// Package webconfig reads the web configuration file of the OTLP trace
// receivers (tracing.receiver_web_config_file): exporter-toolkit's format,
// the one --web.config.file takes. It is apart from package tracing so that
// the config package validates the file at load without depending on gRPC
// and OpenTelemetry.
package webconfig

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"
)

// MaxBcryptCost is the highest bcrypt cost of a basic_auth_users hash: about
// a second a check. More would make the first export after a restart time
// out, and hold the one password check that runs at a time.
const MaxBcryptCost = 14

// Read parses and validates the file at path with exporter-toolkit's own
// rules (web.Validate) and the receivers' own: something must be set, and
// no bcrypt cost above MaxBcryptCost. Relative file names in it are made
// relative to its directory. An error names what is wrong, never a hash.
func Read(path string) (*web.Config, error) {
	c, err := Parse(path)
	if err != nil {
		return nil, err
	}
	if !HasTLS(&c.TLSConfig) && len(c.Users) == 0 {
		return nil, errors.New("sets neither tls_server_config nor basic_auth_users; expected at least one")
	}
	return c, nil
}

// Parse is Read without the rule that something must be set: the main web
// listener's --web.config.file may set only response headers.
func Parse(path string) (*web.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// exporter-toolkit's defaults; web.Validate below parses strictly.
	c := &web.Config{
		TLSConfig:  web.TLSConfig{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13, PreferServerCipherSuites: true},
		HTTPConfig: web.HTTPConfig{HTTP2: true},
	}
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	c.TLSConfig.SetDirectory(filepath.Dir(path))
	// The users first: exporter-toolkit's error would not name the user.
	for _, u := range slices.Sorted(maps.Keys(c.Users)) {
		cost, err := bcrypt.Cost([]byte(c.Users[u]))
		if err != nil {
			return nil, fmt.Errorf("basic_auth_users: user %q: not a bcrypt hash (%v)", u, err)
		}
		if cost > MaxBcryptCost {
			return nil, fmt.Errorf("basic_auth_users: user %q: bcrypt cost %d; expected at most %d (a check would take over a second)", u, cost, MaxBcryptCost)
		}
	}
	if err := web.Validate(path); err != nil {
		return nil, err
	}
	return c, nil
}

// HasTLS reports whether c configures TLS, by exporter-toolkit's test:
// anything set in tls_server_config.
func HasTLS(c *web.TLSConfig) bool {
	return c.TLSCertPath != "" || c.TLSCert != "" || c.TLSKeyPath != "" || c.TLSKey != "" ||
		c.ClientCAs != "" || c.ClientCAsText != "" || c.ClientAuth != ""
}
