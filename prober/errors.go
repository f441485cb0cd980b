package prober

// This file holds the errors of one probe and the Reason each one is counted under.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fastjson"
)

var (
	// ErrStall is the cancellation cause of a probe whose stream sent nothing
	// for Target.StallTimeout after the first token.
	ErrStall = errors.New("stream stalled")
	// ErrProbeTimeout is the cancellation cause of a probe that ran past its
	// scenario's Timeout.
	ErrProbeTimeout = errors.New("probe timeout")
)

// maxErrorBody is how much of an HTTP error body is read for its message.
const maxErrorBody = 64 << 10

// ReasonError is an error that already knows its Reason.
type ReasonError struct {
	Reason Reason
	Err    error
}

func (e *ReasonError) Error() string { return string(e.Reason) + ": " + e.Err.Error() }
func (e *ReasonError) Unwrap() error { return e.Err }

// HTTPError is a non-2xx answer; Message is the server's error.message when
// the body had one.
type HTTPError struct {
	StatusCode int
	Message    string
	// RetryAfter is the Retry-After header of a 429 or 503 answer; 0 when
	// absent or unreadable.
	RetryAfter time.Duration
	// Location is where a 3xx answer pointed (scheme, host and path; no
	// userinfo, query or fragment, which may carry secrets).
	Location string
	// cut is set when the body is a refusal of a prompt longer than the
	// server's context (llama.cpp server's exceed_context_size_error).
	cut *PromptCutError
}

// newHTTPError is the *HTTPError of a non-2xx answer with body b.
func newHTTPError(status int, b []byte) *HTTPError {
	return &HTTPError{StatusCode: status, Message: errorMessage(b), cut: contextRefusal(status, b)}
}

// Unwrap gives the *PromptCutError of a refused over-long prompt, so that
// errors.As finds it as it finds a cut prompt's.
func (e *HTTPError) Unwrap() error {
	if e.cut == nil {
		return nil
	}
	return e.cut
}

func (e *HTTPError) Error() string {
	if e.StatusCode >= 300 && e.StatusCode < 400 {
		to := e.Location
		if to == "" {
			to = "nowhere (no Location)"
		}
		return fmt.Sprintf("HTTP %d redirect to %s, not followed: a target's credentials never leave its origin; set the url to the address that answers", e.StatusCode, to)
	}
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.StatusCode)
	}
	return fmt.Sprintf("HTTP %d: %s", e.StatusCode, e.Message)
}

// Reason maps the status to http_5xx or http_4xx, and a 3xx (never
// followed) to redirect. Other statuses below 400 that are not 2xx count as
// http_4xx. A refused over-long prompt is prompt_truncated, like a cut one:
// the scenario does not fit.
func (e *HTTPError) Reason() Reason {
	if e.cut != nil {
		return ReasonPromptTruncated
	}
	if e.StatusCode >= 300 && e.StatusCode < 400 {
		return ReasonRedirect
	}
	if e.StatusCode >= 500 {
		return ReasonHTTP5xx
	}
	return ReasonHTTP4xx
}

// ClassifyError maps a transport or probe error to a Reason: ErrStall → stall;
// ErrProbeTimeout, context.DeadlineExceeded and network timeouts → timeout;
// ECONNREFUSED → connection_refused; a failed name lookup → dns_error; a
// failed TLS handshake or certificate check → tls_error; *ReasonError and
// *HTTPError → their own reason; anything else (reset, unreachable, a
// cancelled context) → connection_error.
func ClassifyError(err error) Reason {
	if err == nil {
		return ReasonNone
	}
	var pc *PromptCutError
	if errors.As(err, &pc) {
		return ReasonPromptTruncated
	}
	var re *ReasonError
	if errors.As(err, &re) {
		return re.Reason
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Reason()
	}
	switch {
	case errors.Is(err, ErrStall):
		return ReasonStall
	case errors.Is(err, ErrProbeTimeout), errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonConnectionRefused
	case isDNSError(err):
		return ReasonDNS
	case isTLSError(err):
		return ReasonTLS
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return ReasonConnection // a dial timeout means unreachable, not slow
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ReasonTimeout
	}
	return ReasonConnection
}

func isDNSError(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de)
}

func isTLSError(err error) bool {
	var (
		cve  *tls.CertificateVerificationError
		rhe  tls.RecordHeaderError
		ae   tls.AlertError
		uae  x509.UnknownAuthorityError
		he   x509.HostnameError
		cie  x509.CertificateInvalidError
		echo *tls.ECHRejectionError
	)
	if errors.As(err, &cve) || errors.As(err, &rhe) || errors.As(err, &ae) || errors.As(err, &uae) ||
		errors.As(err, &he) || errors.As(err, &cie) || errors.As(err, &echo) {
		return true
	}
	// The server's alerts (certificate required, handshake failure) come
	// as a net.OpError "remote error"; net/http turns a plain-HTTP answer
	// to a TLS hello into a string error.
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "remote error" {
		return true
	}
	return strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// ReadHTTPError is readHTTPError for the other readers of a target (the
// engine scrape).
func ReadHTTPError(status int, h http.Header, body io.Reader) *HTTPError {
	return readHTTPError(status, h, body)
}

// readHTTPError reads at most maxErrorBody bytes of a non-2xx body and returns
// an *HTTPError carrying the server's message and, on 429 and 503, its
// Retry-After.
func readHTTPError(status int, h http.Header, body io.Reader) *HTTPError {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	he := newHTTPError(status, b)
	if status >= 300 && status < 400 {
		he.Location = redactLocation(h.Get("Location"))
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		he.RetryAfter = parseRetryAfter(h.Get("Retry-After"), time.Now())
	}
	return he
}

// redactLocation is a redirect's Location as an error may show it: scheme,
// host and path only (userinfo, query and fragment may carry a token),
// shortened.
func redactLocation(loc string) string {
	if loc == "" {
		return ""
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "an unparsable Location"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return string(clipForErr([]byte(strconv.Quote(u.String()))))
}

// NoRedirect is the CheckRedirect of every client slaprobe sends a target's
// credentials with: a 3xx comes back as the answer (and fails the probe
// with reason redirect) instead of being followed to another origin with
// them.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// maxRetryAfter bounds what a server can ask for; the scheduler further
// bounds the wait by the scenario's interval.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 10.2.3);
// anything else, or a time in the past, is 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return min(time.Duration(min(n, int64(maxRetryAfter/time.Second)))*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxRetryAfter)
		}
	}
	return 0
}

// errorMessage extracts the message of an error body: vLLM's nested
// {"error":{"message":…}}, the older flat {"object":"error","message":…},
// {"error":"…"} and FastAPI's {"detail":…}. Anything else is returned as text,
// shortened.
func errorMessage(b []byte) string {
	var p fastjson.Parser
	v, err := p.ParseBytes(b)
	if err != nil || v.Type() != fastjson.TypeObject {
		return shortenMsg(string(bytes.TrimSpace(b)))
	}
	if m, ok := jsonErrorMessage(v.Get("error")); ok {
		return m
	}
	if m := v.GetStringBytes("message"); len(m) > 0 {
		return shortenMsg(string(m))
	}
	if d := v.Get("detail"); d != nil {
		if s, err := d.StringBytes(); err == nil {
			return shortenMsg(string(s))
		}
		return shortenMsg(d.String())
	}
	return shortenMsg(string(bytes.TrimSpace(b)))
}

// jsonErrorMessage reads the value of an "error" key: an object with a
// message, or a plain string.
func jsonErrorMessage(e *fastjson.Value) (string, bool) {
	if e == nil || e.Type() == fastjson.TypeNull {
		return "", false
	}
	switch e.Type() {
	case fastjson.TypeObject:
		if m := e.GetStringBytes("message"); len(m) > 0 {
			return shortenMsg(string(m)), true
		}
	case fastjson.TypeString:
		s, _ := e.StringBytes()
		return shortenMsg(string(s)), true
	}
	return shortenMsg(e.String()), true
}

func shortenMsg(s string) string {
	const max = 2048
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// PromptCutError means the server read fewer prompt tokens than it was
// sent: it cuts a prompt that is longer than its context window and answers
// anyway (Ollama's OpenAI endpoint, llama.cpp's server with context shift),
// instead of rejecting it with a 400 as vLLM does. A probe of such a prompt
// would measure the prefill of a shorter prompt.
type PromptCutError struct {
	// Read is the server's usage.prompt_tokens for the cut prompt: about its
	// context window.
	Read int
	// Want is the prompt length the scenario needs, and Needed the context
	// length (prompt plus output) it takes; 0 when not known here.
	Want, Needed int
	// Calibrated is set when the probe's prompt had been calibrated to Want
	// earlier and the server now reads less: cut, or a tokenizer that changed.
	Calibrated bool
	// Refused is set when the server did not cut the prompt but refused it
	// (llama.cpp server: HTTP 400 exceed_context_size_error); Sent is the
	// prompt's length and Context the server's context, as it counts them.
	Refused       bool
	Sent, Context int
}

// contextRefusal reads llama.cpp server's refusal of a prompt longer than
// its context: HTTP 400 {"error":{"type":"exceed_context_size_error",
// "n_prompt_tokens":N,"n_ctx":C,…}}; nil for any other answer.
func contextRefusal(status int, b []byte) *PromptCutError {
	if status != http.StatusBadRequest {
		return nil
	}
	var p fastjson.Parser
	v, err := p.ParseBytes(b)
	if err != nil {
		return nil
	}
	e := v.Get("error")
	if e == nil || string(e.GetStringBytes("type")) != "exceed_context_size_error" {
		return nil
	}
	c := &PromptCutError{Refused: true, Sent: e.GetInt("n_prompt_tokens"), Context: e.GetInt("n_ctx")}
	if c.Sent < 0 || c.Context < 0 {
		c.Sent, c.Context = 0, 0
	}
	return c
}

func (e *PromptCutError) Error() string {
	var b strings.Builder
	switch {
	case e.Refused && e.Sent > 0 && e.Context > 0:
		fmt.Fprintf(&b, "the server refused a %d-token prompt as longer than its context of %d tokens (exceed_context_size_error)", e.Sent, e.Context)
	case e.Refused:
		b.WriteString("the server refused the prompt as longer than its context (exceed_context_size_error)")
	case e.Calibrated:
		fmt.Fprintf(&b, "the server read %d prompt tokens of a prompt calibrated to %d: it cut the prompt to its context window (or its tokenizer changed; recalibrating on the next probe)", e.Read, e.Want)
	default:
		fmt.Fprintf(&b, "the server cuts prompts to about %d tokens (a longer prompt still counts %d): it cannot read this scenario's %d-token prompt", e.Read, e.Read, e.Want)
	}
	if e.Needed > 0 {
		fmt.Fprintf(&b, "; set the server's context length to at least %d tokens (prompt + output; Ollama: OLLAMA_CONTEXT_LENGTH or num_ctx, llama.cpp: --ctx-size, vLLM: --max-model-len), or leave the scenario out on this target", e.Needed)
	}
	return b.String()
}

// transportError wraps err with its Reason, using the context's cause when
// the context ended.
func transportError(ctx context.Context, err error) error {
	cause := err
	if ctx.Err() != nil {
		cause = context.Cause(ctx)
	}
	return &ReasonError{Reason: ClassifyError(cause), Err: err}
}
