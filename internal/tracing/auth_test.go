package tracing

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/crypto/bcrypt"

	"github.com/slaprobe/slaprobe/internal/tracing/webconfig"
	"github.com/slaprobe/slaprobe/internal/webguard"
)

const (
	authUser = "vllm"
	authPass = "otlp-PASSWORD-3c9e"
)

// testPKI is a CA, a server certificate for 127.0.0.1 and a client
// certificate it signed, and a client certificate of another CA, as PEM
// files in one directory.
type testPKI struct {
	dir                             string
	caFile, serverCert, serverKey   string
	clientCert, clientKey           string
	rogueClientCert, rogueClientKey string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	p := testPKI{dir: dir}
	ca, caKey := makeCert(t, nil, nil, "slaprobe test CA", true, 0)
	p.caFile = writePEM(t, dir, "ca.crt", "CERTIFICATE", ca.Raw)
	srv, srvKey := makeCert(t, ca, caKey, "slaprobe", false, x509.ExtKeyUsageServerAuth)
	p.serverCert = writePEM(t, dir, "server.crt", "CERTIFICATE", srv.Raw)
	p.serverKey = writeKey(t, dir, "server.key", srvKey)
	cl, clKey := makeCert(t, ca, caKey, "vllm", false, x509.ExtKeyUsageClientAuth)
	p.clientCert = writePEM(t, dir, "client.crt", "CERTIFICATE", cl.Raw)
	p.clientKey = writeKey(t, dir, "client.key", clKey)
	rogueCA, rogueCAKey := makeCert(t, nil, nil, "another CA", true, 0)
	rogue, rogueKey := makeCert(t, rogueCA, rogueCAKey, "vllm", false, x509.ExtKeyUsageClientAuth)
	p.rogueClientCert = writePEM(t, dir, "rogue.crt", "CERTIFICATE", rogue.Raw)
	p.rogueClientKey = writeKey(t, dir, "rogue.key", rogueKey)
	return p
}

// makeCert makes a certificate for 127.0.0.1 signed by parent (self-signed
// when nil).
func makeCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool, usage x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func writePEM(t *testing.T, dir, name, typ string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeKey(t *testing.T, dir, name string, k *ecdsa.PrivateKey) string {
	t.Helper()
	b, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name, "EC PRIVATE KEY", b)
}

// webConfig writes an exporter-toolkit web configuration with TLS (plain
// server, or with required client certificates) and basic auth as asked.
func (p testPKI) webConfig(t *testing.T, tlsOn, mTLS, basic bool) string {
	t.Helper()
	var b strings.Builder
	if tlsOn {
		// Relative names: the file's directory, as exporter-toolkit reads them.
		b.WriteString("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
		if mTLS {
			b.WriteString("  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n")
		}
	}
	if basic {
		hash, err := bcrypt.GenerateFromPassword([]byte(authPass), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "basic_auth_users:\n  %s: %s\n", authUser, hash)
	}
	path := filepath.Join(p.dir, fmt.Sprintf("web-%t-%t-%t.yml", tlsOn, mTLS, basic))
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// basicHeader is OTEL_EXPORTER_OTLP_TRACES_HEADERS for user:pass: the
// value percent-encoded, as the OpenTelemetry specification asks of that
// variable (the space as %20).
func basicHeader(user, pass string) string {
	return "Authorization=Basic%20" + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// exportWithEnv exports one span the way vLLM's tracing does: the
// exporter picked by OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (grpc by default),
// everything else from the standard OTEL_EXPORTER_OTLP_TRACES_* variables
// in env, no option in code. The test process's environment holds only
// env's variables of that family while it runs.
func exportWithEnv(t *testing.T, env map[string]string, timeout time.Duration) error {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] {
	case "", "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		t.Fatalf("protocol %q", env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"])
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(context.Background()) }()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, span := tp.Tracer("vllm.llm_engine").Start(context.Background(), SpanLLMRequest)
	span.End()
	_ = tp.Shutdown(context.Background())
	return exp.ExportSpans(ctx, rec.Ended())
}

// authReceiver serves a receiver with the web configuration at path
// ("" for none) on two loopback ports.
func authReceiver(t *testing.T, path string) (r *Receiver, j *Joiner, grpcAddr, httpAddr string) {
	t.Helper()
	var auth *ReceiverAuth
	if path != "" {
		var err error
		if auth, err = LoadReceiverAuth(path); err != nil {
			t.Fatal(err)
		}
	}
	j = NewJoiner(time.Minute)
	r = NewReceiver(j, nil, auth)
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.ServeGRPC(gl) }()
	go func() { _ = r.ServeHTTP(hl) }()
	t.Cleanup(r.Close)
	return r, j, gl.Addr().String(), hl.Addr().String()
}

func refusedCount(t *testing.T, r *Receiver, protocol, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := r.refused.WithLabelValues(protocol, reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestReceiverAuthModes runs the OpenTelemetry SDK's own exporters,
// configured only by the OTEL_EXPORTER_OTLP_TRACES_* variables that
// docs/tracing.md gives for vLLM, against a receiver in each mode (plain
// text, TLS, mTLS, basic auth, TLS with basic auth) on both protocols.
// The right settings get the span in (counted by the joiner as `other`:
// no probe expects it); each wrong one gets nothing in, and a refusal by
// basic auth is counted in slaprobe_otlp_exports_refused_total.
func TestReceiverAuthModes(t *testing.T) {
	pki := newTestPKI(t)
	type attempt struct {
		name    string
		env     map[string]string // beside the endpoint and the protocol
		ok      bool
		refused string // the reason counted, when refused by basic auth
	}
	right := basicHeader(authUser, authPass)
	modes := []struct {
		name             string
		tls, mTLS, basic bool
		attempts         []attempt
	}{
		{name: "plain text", attempts: []attempt{
			{name: "plain text", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true"}, ok: true},
		}},
		{name: "TLS", tls: true, attempts: []attempt{
			{name: "CA", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": pki.caFile}, ok: true},
			{name: "plain-text client", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true"}},
			{name: "server certificate not trusted", env: map[string]string{}},
		}},
		{name: "mTLS", tls: true, mTLS: true, attempts: []attempt{
			{name: "client certificate", env: map[string]string{
				"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE":        pki.caFile,
				"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": pki.clientCert,
				"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY":         pki.clientKey,
			}, ok: true},
			{name: "no client certificate", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": pki.caFile}},
			// A Go client keeps back a certificate the server's CAs did not
			// sign (TestReceiverTLSHandshake sends one anyway).
			{name: "client certificate of another CA", env: map[string]string{
				"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE":        pki.caFile,
				"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": pki.rogueClientCert,
				"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY":         pki.rogueClientKey,
			}},
		}},
		{name: "basic auth", basic: true, attempts: []attempt{
			{name: "password", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": right}, ok: true},
			{name: "no credentials", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true"}, refused: RefusedUnauthenticated},
			{name: "wrong password", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true",
				"OTEL_EXPORTER_OTLP_TRACES_HEADERS": basicHeader(authUser, "wrong")}, refused: RefusedUnauthenticated},
			{name: "unknown user", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true",
				"OTEL_EXPORTER_OTLP_TRACES_HEADERS": basicHeader("mallory", authPass)}, refused: RefusedUnauthenticated},
		}},
		{name: "TLS and basic auth", tls: true, basic: true, attempts: []attempt{
			{name: "CA and password", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": pki.caFile, "OTEL_EXPORTER_OTLP_TRACES_HEADERS": right}, ok: true},
			{name: "CA, no credentials", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": pki.caFile}, refused: RefusedUnauthenticated},
			{name: "CA, wrong password", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": pki.caFile,
				"OTEL_EXPORTER_OTLP_TRACES_HEADERS": basicHeader(authUser, authPass+"x")}, refused: RefusedUnauthenticated},
			{name: "password over plain text", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": right}},
		}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			path := ""
			if m.tls || m.basic {
				path = pki.webConfig(t, m.tls, m.mTLS, m.basic)
			}
			r, j, grpcAddr, httpAddr := authReceiver(t, path)
			// The endpoints of docs/tracing.md: http:// or https://, and
			// /v1/traces for HTTP.
			grpcScheme, httpScheme := "http", "http"
			if m.tls {
				grpcScheme, httpScheme = "https", "https"
			}
			for _, proto := range []string{"grpc", "http/protobuf"} {
				protocol := map[string]string{"grpc": "grpc", "http/protobuf": "http"}[proto]
				for _, a := range m.attempts {
					t.Run(protocol+"/"+a.name, func(t *testing.T) {
						env := map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": proto}
						if proto == "grpc" {
							env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = grpcScheme + "://" + grpcAddr
						} else {
							env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = httpScheme + "://" + httpAddr + "/v1/traces"
						}
						for k, v := range a.env {
							env[k] = v
						}
						before := spanCounts(t, j)[SpanOther]
						refusedBefore := map[string]float64{}
						for _, reason := range []string{RefusedUnauthenticated, RefusedThrottled} {
							refusedBefore[reason] = refusedCount(t, r, protocol, reason)
						}
						timeout := 10 * time.Second
						if !a.ok {
							// A failed handshake is retried (gRPC Unavailable) until the deadline.
							timeout = 2 * time.Second
						}
						err := exportWithEnv(t, env, timeout)
						got := spanCounts(t, j)[SpanOther] - before
						switch {
						case a.ok && (err != nil || got != 1):
							t.Fatalf("export: %v, spans received %g; want it accepted", err, got)
						case !a.ok && (err == nil || got != 0):
							t.Fatalf("export: %v, spans received %g; want it refused", err, got)
						}
						for _, reason := range []string{RefusedUnauthenticated, RefusedThrottled} {
							want := refusedBefore[reason]
							if reason == a.refused {
								want++
							}
							if n := refusedCount(t, r, protocol, reason); n != want {
								t.Errorf("slaprobe_otlp_exports_refused_total{protocol=%q,reason=%q} = %g, want %g (export error: %v)", protocol, reason, n, want, err)
							}
						}
						if a.refused != "" {
							want := map[string]string{"grpc": "Unauthenticated", "http": "401"}[protocol]
							if !strings.Contains(err.Error(), want) {
								t.Errorf("export error %q; want it to say %s", err, want)
							}
						}
					})
				}
			}
		})
	}
}

// TestReceiverTLSHandshake checks the handshake itself under mTLS, with a
// TLS client that does nothing else: no client certificate and one of
// another CA fail, the right one passes.
func TestReceiverTLSHandshake(t *testing.T) {
	pki := newTestPKI(t)
	_, _, grpcAddr, httpAddr := authReceiver(t, pki.webConfig(t, true, true, false))
	ca, err := os.ReadFile(pki.caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	good, err := tls.LoadX509KeyPair(pki.clientCert, pki.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := tls.LoadX509KeyPair(pki.rogueClientCert, pki.rogueClientKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{grpcAddr, httpAddr} {
		for _, tc := range []struct {
			name  string
			cert  *tls.Certificate
			alert string // the server's alert; "" for a handshake that passes
		}{
			{"client certificate", &good, ""},
			{"no client certificate", nil, "certificate required"},
			// Sent whatever CAs the server names (a Go client would
			// otherwise keep it back, which is the case above).
			{"client certificate of another CA", &rogue, "unknown certificate authority"},
		} {
			cfg := &tls.Config{RootCAs: roots, NextProtos: []string{"h2"}}
			if tc.cert != nil {
				cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return tc.cert, nil }
			}
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
			if err == nil {
				// TLS 1.3 lets the client finish before the server has
				// checked its certificate: a refusal comes with the first
				// read. Else the server speaks first in HTTP/2 (SETTINGS).
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			switch {
			case tc.alert == "" && err != nil:
				t.Errorf("%s, %s: %v; want the handshake to pass", addr, tc.name, err)
			case tc.alert != "" && (err == nil || !strings.Contains(err.Error(), "remote error: tls: "+tc.alert)):
				t.Errorf("%s, %s: %v; want the server's alert %q", addr, tc.name, err, tc.alert)
			}
		}
	}
	// A plain-text HTTP client gets no export in.
	resp, err := http.Post("http://"+httpAddr+"/v1/traces", "application/x-protobuf", nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain-text POST = %d; want 400 from the TLS server", resp.StatusCode)
		}
	}
}

func TestListensOnEveryInterface(t *testing.T) {
	for addr, want := range map[string]bool{
		":4317": true, "0.0.0.0:4317": true, "[::]:4317": true, "[::0]:4317": true,
		"127.0.0.1:4317": false, "[::1]:4317": false, "localhost:4317": false,
		"10.0.0.5:4318": false, "slaprobe:4317": false, "4317": false,
	} {
		if got := ListensOnEveryInterface(addr); got != want {
			t.Errorf("ListensOnEveryInterface(%q) = %t, want %t", addr, got, want)
		}
	}
}

// TestReadWebConfig: a bad file is refused at load, saying what is wrong
// and never a hash.
func TestReadWebConfig(t *testing.T) {
	pki := newTestPKI(t)
	dir := pki.dir
	hash, _ := bcrypt.GenerateFromPassword([]byte(authPass), bcrypt.MinCost)
	// A cost-15 hash of authPass, made once: generating it here took 20 s
	// under -race, and the check reads only its cost.
	const costly = "$2a$15$Y0OYCamzqm6.QjUCDfRypOM3FSO7VZpXC5LCD9aaxPj3P8tVIJt/u"
	for _, tc := range []struct {
		name, body, want string
	}{
		{"TLS", "tls_server_config: {cert_file: server.crt, key_file: server.key}\n", ""},
		{"mTLS", "tls_server_config: {cert_file: server.crt, key_file: server.key, client_ca_file: ca.crt, client_auth_type: RequireAndVerifyClientCert}\n", ""},
		{"users", "basic_auth_users: {vllm: " + string(hash) + "}\n", ""},
		{"empty", "", "neither tls_server_config nor basic_auth_users"},
		{"only headers", "http_server_config: {headers: {X-Frame-Options: deny}}\n", "neither tls_server_config nor basic_auth_users"},
		{"unknown field", "tls_server_config: {cert: x, key: y, colour: blue}\n", "colour"},
		{"no key", "tls_server_config: {cert_file: server.crt}\n", "key"},
		{"missing cert", "tls_server_config: {cert_file: nope.crt, key_file: server.key}\n", "nope.crt"},
		{"CA without client_auth_type", "tls_server_config: {cert_file: server.crt, key_file: server.key, client_ca_file: ca.crt}\n", "Client Auth"},
		{"not a hash", "basic_auth_users: {vllm: secret-in-clear}\n", "hashedSecret too short"},
		{"cost", "basic_auth_users: {vllm: " + costly + "}\n", `user "vllm": bcrypt cost 15; expected at most 14 (a check would take over a second)`},
	} {
		path := filepath.Join(dir, "web.yml")
		if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := webconfig.Read(path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		case err != nil && (strings.Contains(err.Error(), string(hash)) || strings.Contains(err.Error(), costly)):
			t.Errorf("%s: the error shows a hash: %v", tc.name, err)
		}
	}
	if _, err := webconfig.Read(filepath.Join(dir, "absent.yml")); err == nil {
		t.Error("a missing file: no error")
	}
}

// TestRefusedCounterLint: slaprobe_otlp_exports_refused_total is promlint
// clean and exports every protocol and reason from zero.
func TestRefusedCounterLint(t *testing.T) {
	c := NewReceiver(NewJoiner(time.Minute), nil, nil).Collector()
	problems, err := testutil.CollectAndLint(c)
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", err, problems)
	}
	if n := testutil.CollectAndCount(c, "slaprobe_otlp_exports_refused_total"); n != 12 {
		t.Errorf("%d series, want 12 (grpc, http × unauthenticated, throttled, decode_budget, too_many, too_large, bad_request)", n)
	}
}

// BenchmarkWrongPasswordFlood floods the OTLP/HTTP receiver (basic auth,
// a bcrypt hash of cost 10) with wrong passwords from 8 × GOMAXPROCS
// parallel clients and reports, per second of wall time, the bcrypt time
// spent (bcrypt-cores), the process's CPU (cores, the HTTP clients and
// server included) and comparisons (bcrypt/s), and the share of requests
// refused as throttled. "budget" is the receiver as it is, from an empty
// budget (the steady state of a long flood, without the 2 s burst); "no
// budget" the same with a budget that never runs out, which leaves
// comparisons one at a time only (exporter-toolkit's own bound). No
// assertion: figures for docs/tracing.md.
func BenchmarkWrongPasswordFlood(b *testing.B) {
	hash, err := bcrypt.GenerateFromPassword([]byte(authPass), 10)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "web.yml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("basic_auth_users: {%s: %s}\n", authUser, hash)), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, unbounded := range []bool{false, true} {
		name := map[bool]string{false: "budget", true: "no budget"}[unbounded]
		b.Run(name, func(b *testing.B) {
			auth, err := LoadReceiverAuth(path)
			if err != nil {
				b.Fatal(err)
			}
			if unbounded {
				// A clock that stands still: no comparison draws on the budget.
				frozen := time.Now()
				auth.basic.SetHooks(webguard.Hooks{Now: func() time.Time { return frozen }})
			} else {
				auth.basic.Drain() // the steady state, without the burst
			}
			var compares, spent atomic.Int64
			auth.basic.SetHooks(webguard.Hooks{Compare: func(h, p []byte) error {
				t0 := time.Now()
				err := bcrypt.CompareHashAndPassword(h, p)
				spent.Add(int64(time.Since(t0)))
				compares.Add(1)
				return err
			}})
			r := NewReceiver(NewJoiner(time.Minute), nil, auth)
			srv := httptest.NewServer(r.http.Handler)
			defer srv.Close()
			var n atomic.Int64
			b.SetParallelism(8)
			cpu0, start := cpuTime(b), time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/traces", strings.NewReader("x"))
					req.SetBasicAuth(authUser, fmt.Sprint("wrong-", n.Add(1)))
					resp, err := srv.Client().Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			b.StopTimer()
			wall := time.Since(start).Seconds()
			b.ReportMetric(time.Duration(spent.Load()).Seconds()/wall, "bcrypt-cores")
			b.ReportMetric((cpuTime(b)-cpu0).Seconds()/wall, "cores")
			b.ReportMetric(float64(compares.Load())/wall, "bcrypt/s")
			b.ReportMetric(refusedCountB(b, r, RefusedThrottled)/float64(n.Load()), "throttled/op")
		})
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func refusedCountB(b *testing.B, r *Receiver, reason string) float64 {
	var m dto.Metric
	if err := r.refused.WithLabelValues("http", reason).Write(&m); err != nil {
		b.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
