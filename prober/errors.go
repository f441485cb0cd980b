package prober

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

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
}

func (e *HTTPError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.StatusCode)
	}
	return fmt.Sprintf("HTTP %d: %s", e.StatusCode, e.Message)
}

// Reason maps the status to http_5xx or http_4xx. Statuses below 400 that are
// not 2xx (an unfollowed redirect) are a configuration problem and count as
// http_4xx.
func (e *HTTPError) Reason() Reason {
	if e.StatusCode >= 500 {
		return ReasonHTTP5xx
	}
	return ReasonHTTP4xx
}

// ClassifyError maps a transport or probe error to a Reason: ErrStall → stall;
// ErrProbeTimeout, context.DeadlineExceeded and network timeouts → timeout;
// ECONNREFUSED → connection_refused; *ReasonError and *HTTPError → their own
// reason; anything else (DNS, TLS, reset, a cancelled context) → connection_error.
func ClassifyError(err error) Reason {
	if err == nil {
		return ReasonNone
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

// readHTTPError reads at most maxErrorBody bytes of a non-2xx body and returns
// an *HTTPError carrying the server's message.
func readHTTPError(status int, body io.Reader) *HTTPError {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	return &HTTPError{StatusCode: status, Message: errorMessage(b)}
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
