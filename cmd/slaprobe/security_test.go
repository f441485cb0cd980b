package main

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
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc/credentials"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// Secrets the security test plants; none may show up in any output.
const (
	secBearer   = "sk-slaprobe-BEARER-7f3a9c2e51d84b06"
	secHeader   = "hdr-slaprobe-APIKEY-0c4e8a1f77b2d9e3"
	secWebPass  = "web-slaprobe-PASSWORD-5d2b"
	secWebUser  = "admin"
	secHostname = "127.0.0.1"
)

// writeSelfSigned writes a certificate and key for 127.0.0.1 into dir and
// returns their paths and a pool that trusts the certificate.
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "slaprobe test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP(secHostname)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "web.crt"), filepath.Join(dir, "web.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// authEngine is the simulated engine behind a check of the target's
// credentials: a request to the API that does not send both keys gets 401.
func authEngine(t *testing.T) *httptest.Server {
	t.Helper()
	eng, err := vllmsim.New(vllmsim.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := eng.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// As vLLM's --api-key: /metrics and /health stay open.
		if r.URL.Path != "/metrics" && r.URL.Path != "/health" &&
			(r.Header.Get("Authorization") != "Bearer "+secBearer || r.Header.Get("X-Api-Key") != secHeader) {
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(eng.Close)
	return srv
}

// TestSecurityEndToEnd runs `slaprobe run` with TLS and basic auth from
// --web.config.file and a target whose API keys are in the config, then
// checks every endpoint over TLS with and without credentials, that
// state-changing endpoints refuse GET, and that neither key appears in the
// debug log, /metrics, /config, /-/sweep, /probe?debug=true or check-config.
func TestSecurityEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs slaprobe")
	}
	t.Parallel() // mostly waits on its own slaprobe: beside the package's other waiting tests
	bin := binary(t)
	engine := authEngine(t)
	dir := t.TempDir()
	certFile, keyFile, pool := writeSelfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte(secWebPass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(webCfg, []byte(fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  %s: %s\n",
		certFile, keyFile, secWebUser, hash)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "slaprobe.yml")
	cfg := `global: {scenarios: [chatbot]}
targets:
  - name: sim
    url: ` + engine.URL + `
    headers: {X-Api-Key: ` + secHeader + `}
    http_client_config:
      authorization: {credentials: ` + secBearer + `}
engine: {enabled: true}
power: {nvml: false}
scenarios:
  - name: chatbot
    interval: 1s
sweep:
  enabled: true
  scenarios: [chatbot]
  closed_loop: {concurrency: [1], warmup: 200ms, duration: 500ms}
  burst: {concurrency: [1], repeat: 1}
  state_file: ` + filepath.Join(dir, "state.json") + `
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	addr := testproc.FreeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config.file="+cfgPath, "--web.listen-address="+addr,
		"--web.config.file="+webCfg, "--log.level=debug")
	logs, exited := startProcess(t, cmd)

	base := "https://" + addr
	tlsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	do := func(method, path, user, pass string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := tlsClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v\nlogs:\n%s", method, path, err, logs.String())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	auth := func(method, path string) (int, string) { return do(method, path, secWebUser, secWebPass) }

	// Ready, and some probes done with the keys.
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest("GET", base+"/metrics", nil)
		req.SetBasicAuth(secWebUser, secWebPass)
		if resp, err := tlsClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && regexp.MustCompile(`slaprobe_probes_total\{[^}]*result="success"[^}]*\} [1-9]`).Match(b) {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("slaprobe exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful probe within 60 s (do the keys reach the engine?)\n%s", logs.String())
		}
		time.Sleep(300 * time.Millisecond)
	}

	endpoints := []struct {
		method, path string
		want         int  // with credentials
		open         bool // answers without credentials too (Kubernetes probes)
	}{
		{"GET", "/", 200, false},
		{"GET", "/metrics", 200, false},
		{"GET", "/config", 200, false},
		{"GET", "/-/healthy", 200, true},
		{"GET", "/-/ready", 200, true},
		{"POST", "/-/reload", 200, false},
		{"GET", "/-/sweep", 200, false},
		// Before the sweep starts: /probe is refused (503) while a sweep holds its target.
		{"GET", "/probe?target=sim&scenario=chatbot", 200, false},
		{"POST", "/-/sweep", 202, false},
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	for _, ep := range endpoints {
		// Plain HTTP gets no answer from the endpoint.
		req, _ := http.NewRequest(ep.method, "http://"+addr+ep.path, nil)
		req.SetBasicAuth(secWebUser, secWebPass)
		if resp, err := plain.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("plain HTTP %s %s = %d %q; want it refused (400)", ep.method, ep.path, resp.StatusCode, b)
			}
		}
		noAuth := http.StatusUnauthorized
		if ep.open {
			noAuth = ep.want
		}
		if code, _ := do(ep.method, ep.path, "", ""); code != noAuth {
			t.Errorf("TLS, no credentials: %s %s = %d, want %d", ep.method, ep.path, code, noAuth)
		}
		if code, _ := do(ep.method, ep.path, secWebUser, "wrong"); code != noAuth {
			t.Errorf("TLS, wrong password: %s %s = %d, want %d", ep.method, ep.path, code, noAuth)
		}
		if code, body := auth(ep.method, ep.path); code != ep.want {
			t.Errorf("TLS, credentials: %s %s = %d, want %d: %s", ep.method, ep.path, code, ep.want, body)
		}
	}
	// State changes need POST (or PUT/DELETE, which a browser will not
	// send cross-site): a GET changes nothing.
	for _, path := range []string{"/-/reload"} {
		if code, _ := auth("GET", path); code != http.StatusMethodNotAllowed {
			t.Errorf("GET %s = %d, want 405", path, code)
		}
	}
	if code, body := auth("GET", "/-/sweep?target=sim"); code != 200 || strings.Contains(body, `"status": "started"`) {
		t.Errorf("GET /-/sweep = %d %s; want the state, no sweep started", code, body)
	}

	// Let the sweep write its state, so /-/sweep carries results too.
	deadline = time.Now().Add(60 * time.Second)
	for {
		_, body := auth("GET", "/-/sweep")
		if strings.Contains(body, `"complete": true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sweep did not complete within 60 s: %s", body)
		}
		time.Sleep(300 * time.Millisecond)
	}

	// Collect everything an operator or a scraper can see, then stop.
	outputs := map[string]string{}
	_, outputs["/metrics"] = auth("GET", "/metrics")
	_, outputs["/config"] = auth("GET", "/config")
	_, outputs["/-/sweep"] = auth("GET", "/-/sweep")
	_, outputs["/"] = auth("GET", "/")
	_, outputs["/probe?debug=true"] = auth("GET", "/probe?target=sim&scenario=chatbot&debug=true")
	if !strings.Contains(outputs["/probe?debug=true"], "Logs for the probe") {
		t.Errorf("/probe?debug=true shows no probe log:\n%s", outputs["/probe?debug=true"])
	}
	cc := exec.Command(bin, "check-config", "--config.file="+cfgPath, "--log.level=debug")
	ccOut, err := cc.CombinedOutput()
	if err != nil {
		t.Fatalf("check-config: %v\n%s", err, ccOut)
	}
	outputs["check-config"] = string(ccOut)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30 s of SIGTERM")
	}
	outputs["debug log"] = logs.String()
	if state, err := os.ReadFile(filepath.Join(dir, "state.json")); err == nil {
		outputs["sweep state file"] = string(state)
	}

	if !strings.Contains(outputs["/config"], "<secret>") {
		t.Errorf("/config shows no <secret> placeholder:\n%s", outputs["/config"])
	}
	if !strings.Contains(outputs["debug log"], "level=DEBUG") {
		t.Errorf("the log has no debug lines; the test would prove nothing:\n%s", outputs["debug log"])
	}
	for name, out := range outputs {
		for _, secret := range []string{secBearer, secHeader, secWebPass, string(hash)} {
			if strings.Contains(out, secret) {
				i := strings.Index(out, secret)
				t.Errorf("%s contains a secret (%.12s…): …%s…", name, secret, out[max(0, i-200):min(len(out), i+len(secret)+50)])
			}
		}
	}
}

// TestSecurityOTLPReceivers runs `slaprobe run` with both OTLP trace
// receivers behind TLS and basic auth from tracing.receiver_web_config_file
// (relative names, resolved against the config's and the web config's
// directories), then exports a span with the OpenTelemetry SDK's exporters:
// without credentials and with a wrong password each protocol refuses it
// and /metrics counts the refusal; the right password gets it in; a
// plain-text client gets nothing in. check-config refuses a bad file.
func TestSecurityOTLPReceivers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs slaprobe")
	}
	bin := binary(t)
	eng, err := vllmsim.New(vllmsim.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	engine := httptest.NewServer(eng.Handler())
	t.Cleanup(engine.Close)
	t.Cleanup(eng.Close)
	dir := t.TempDir()
	_, _, pool := writeSelfSigned(t, dir)
	const otlpPass = "otlp-slaprobe-PASSWORD-91c3"
	hash, err := bcrypt.GenerateFromPassword([]byte(otlpPass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "otlp-web.yml"), []byte(fmt.Sprintf(
		"tls_server_config: {cert_file: web.crt, key_file: web.key}\nbasic_auth_users:\n  vllm: %s\n", hash)), 0o600); err != nil {
		t.Fatal(err)
	}
	grpcAddr, httpAddr, webAddr := testproc.FreeAddr(t), testproc.FreeAddr(t), testproc.FreeAddr(t)
	writeConfig := func(webConfig string) string {
		path := filepath.Join(dir, "slaprobe.yml")
		cfg := "targets: [{name: sim, url: " + engine.URL + "}]\n" +
			"scenarios: [{name: chatbot, interval: 1m}]\nengine: {enabled: false}\npower: {nvml: false}\n" +
			"tracing:\n  otlp_grpc_listen_address: " + grpcAddr + "\n  otlp_http_listen_address: " + httpAddr +
			"\n  receiver_web_config_file: " + webConfig + "\n"
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// A bad file is refused at load, naming the field and the user.
	if err := os.WriteFile(filepath.Join(dir, "bad-web.yml"), []byte("basic_auth_users: {vllm: "+otlpPass+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "check-config", "--config.file="+writeConfig("bad-web.yml")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `tracing.receiver_web_config_file="`+filepath.Join(dir, "bad-web.yml")+`": basic_auth_users: user "vllm": not a bcrypt hash`) {
		t.Errorf("check-config with a bad receiver_web_config_file: %v\n%s", err, out)
	}
	if strings.Contains(string(out), otlpPass) {
		t.Errorf("check-config shows the bad file's secret:\n%s", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config.file="+writeConfig("otlp-web.yml"), "--web.listen-address="+webAddr, "--log.level=debug")
	logs, exited := startProcess(t, cmd)
	metrics := func() string {
		t.Helper()
		resp, err := http.Get("http://" + webAddr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(metrics(), "slaprobe_otlp_exports_refused_total") {
		select {
		case err := <-exited:
			t.Fatalf("slaprobe exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slaprobe_otlp_exports_refused_total on /metrics within 60 s\n%s", logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	export := func(protocol string, tlsOn bool, headers map[string]string) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var (
			exp sdktrace.SpanExporter
			err error
		)
		if protocol == "grpc" {
			opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(grpcAddr), otlptracegrpc.WithHeaders(headers),
				otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})}
			if tlsOn {
				opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewClientTLSFromCert(pool, "")))
			} else {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
			exp, err = otlptracegrpc.New(ctx, opts...)
		} else {
			opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(httpAddr), otlptracehttp.WithHeaders(headers),
				otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})}
			if tlsOn {
				opts = append(opts, otlptracehttp.WithTLSClientConfig(&tls.Config{RootCAs: pool}))
			} else {
				opts = append(opts, otlptracehttp.WithInsecure())
			}
			exp, err = otlptracehttp.New(ctx, opts...)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = exp.Shutdown(context.Background()) }()
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		_, span := tp.Tracer("vllm.llm_engine").Start(context.Background(), "llm_request")
		span.End()
		return exp.ExportSpans(ctx, rec.Ended())
	}
	basic := func(user, pass string) map[string]string {
		return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}
	}
	for _, protocol := range []string{"grpc", "http"} {
		if err := export(protocol, true, nil); err == nil {
			t.Errorf("%s, no credentials: accepted", protocol)
		}
		if err := export(protocol, true, basic("vllm", "wrong")); err == nil {
			t.Errorf("%s, wrong password: accepted", protocol)
		}
		if err := export(protocol, false, basic("vllm", otlpPass)); err == nil {
			t.Errorf("%s, plain text to the TLS receiver: accepted", protocol)
		}
		if err := export(protocol, true, basic("vllm", otlpPass)); err != nil {
			t.Errorf("%s, the password: %v", protocol, err)
		}
	}
	m := metrics()
	for _, want := range []string{
		`slaprobe_otlp_exports_refused_total{protocol="grpc",reason="unauthenticated"} 2`,
		`slaprobe_otlp_exports_refused_total{protocol="http",reason="unauthenticated"} 2`,
		`slaprobe_otlp_exports_refused_total{protocol="grpc",reason="throttled"} 0`,
		`slaprobe_otlp_exports_refused_total{protocol="http",reason="throttled"} 0`,
		`slaprobe_engine_spans_received_total{result="other"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if !strings.Contains(logs.String(), "OTLP receivers secured") || strings.Contains(logs.String(), "every interface") {
		t.Errorf("the log does not say the receivers are secured, or warns about them:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), otlpPass) || strings.Contains(logs.String(), string(hash)) {
		t.Error("the log shows the receivers' password or its hash")
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s\nlogs:\n%s", m, logs.String())
	}
}
