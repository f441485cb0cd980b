package webguard

import (
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// Why a request that changes state was refused (see StateChange).
const (
	// CrossSite: a browser said the request comes from another site
	// (Sec-Fetch-Site: cross-site or same-site).
	CrossSite = "cross_site"
	// ForeignOrigin: the Origin header names another host than the one
	// the request was sent to, or is "null" (a sandboxed page, a file).
	ForeignOrigin = "foreign_origin"
	// FormContentType: the body is one a web page can send cross-site
	// without asking (application/x-www-form-urlencoded,
	// multipart/form-data, text/plain).
	FormContentType = "form_content_type"
)

// Refusal says why a request was refused: Reason is one of the constants
// above, Message says it to the caller.
type Refusal struct {
	Reason, Message string
}

// formTypes are the content types of a "simple" request: a page on any
// site can POST them without a CORS preflight.
var formTypes = map[string]bool{
	"application/x-www-form-urlencoded": true,
	"multipart/form-data":               true,
	"text/plain":                        true,
}

// StateChange returns why r, a request that changes state (POST
// /-/reload, POST|DELETE /-/sweep), must be refused, or nil. It refuses
// what a web page open in a colleague's browser could send to the
// listener: a request the browser marks as from another site, one whose
// Origin is not the listener, and form content types. curl, Prometheus,
// wget and Kubernetes hooks send none of those headers and no body (or one
// of another type), so they pass.
func StateChange(r *http.Request) *Refusal {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return &Refusal{CrossSite, "refused: Sec-Fetch-Site: " + site + "; state changes are not taken from web pages of other sites (send the request with curl or the page's own origin)"}
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if o == "null" || err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return &Refusal{ForeignOrigin, "refused: Origin " + quoteShort(o) + " is not this listener (" + quoteShort(r.Host) + "); state changes are not taken from web pages of other sites"}
		}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || formTypes[strings.ToLower(mt)] {
			return &Refusal{FormContentType, "refused: Content-Type " + quoteShort(ct) + "; state changes take no form body (send no body, and parameters in the query string)"}
		}
	}
	return nil
}

// quoteShort quotes s, cut to 100 bytes: it goes back to the caller.
func quoteShort(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return `"` + strings.ToValidUTF8(strings.ReplaceAll(s, `"`, `\"`), "?") + `"`
}
