package prober

import "net/url"

// endpointURL is the URL of path (e.g. "/v1/models") on the server at
// base, built with net/url: base's path is extended, never its query or
// fragment, so a base URL that carries '?' or '#' cannot pick another
// path. A base that does not parse gives "", which no request accepts.
func endpointURL(base, path string) string {
	u, err := url.Parse(baseURLOf(base))
	if err != nil || u.Host == "" {
		return ""
	}
	return u.JoinPath(path).String()
}
