package webguard

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

const (
	authUser = "vllm"
	authPass = "s3cret"
)

// TestBasicAuthBudget: password checks draw on a budget of bcrypt time
// (Burst, refilled at Share per second); credentials that passed once need
// no check, so they pass while the budget is spent.
func TestBasicAuthBudget(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte(authPass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBasicAuth(map[string]string{authUser: string(hash)})
	if err != nil {
		t.Fatal(err)
	}
	// A fake clock on which every comparison takes 500 ms.
	now := time.Unix(1e9, 0)
	compares := 0
	b.SetHooks(Hooks{
		Now: func() time.Time { return now },
		Compare: func(h, p []byte) error {
			compares++
			now = now.Add(500 * time.Millisecond)
			return bcrypt.CompareHashAndPassword(h, p)
		},
	})
	step := func(user, pass, want string, wantCompares int) {
		t.Helper()
		before := compares
		if got := b.Check(user, pass); got != want {
			t.Errorf("Check(%q, …) = %q, want %q", user, got, want)
		}
		if n := compares - before; n != wantCompares {
			t.Errorf("Check(%q, …) ran %d comparisons, want %d", user, n, wantCompares)
		}
	}
	// Each comparison takes 0.5 s, during which 0.125 s is earned: a net
	// 0.375 s. From 2 s, six comparisons start with budget left
	// (2 − 5 × 0.375 = 0.125 s), a seventh would start at −0.25 s.
	step(authUser, authPass, "", 1)
	step(authUser, authPass, "", 0) // remembered: no comparison
	step(authUser, "wrong", Unauthenticated, 1)
	step("mallory", authPass, Unauthenticated, 1) // an unknown user costs a comparison too
	step(authUser, "wrong2", Unauthenticated, 1)
	step(authUser, "wrong3", Unauthenticated, 1)
	step(authUser, "wrong4", Unauthenticated, 1)
	step(authUser, "wrong5", Throttled, 0)
	step("mallory", "x", Throttled, 0)
	step(authUser, authPass, "", 0) // the known-good credentials still pass
	now = now.Add(time.Second)      // +0.25 s: 0 left, still spent
	step(authUser, "wrong6", Throttled, 0)
	now = now.Add(time.Second) // +0.25 s: one more comparison
	step(authUser, "wrong7", Unauthenticated, 1)
	step(authUser, "wrong8", Throttled, 0)
	now = now.Add(time.Hour) // refilled to Burst, no more: six again
	for i := range 6 {
		step(authUser, fmt.Sprint("w", i), Unauthenticated, 1)
	}
	step(authUser, "w6", Throttled, 0)
	if got, want := b.Spent(), 13*500*time.Millisecond; got != want {
		t.Errorf("Spent() = %s, want %s (13 comparisons)", got, want)
	}
}

// TestStateChange: what a web page can send cross-site is refused; what
// curl, Prometheus and Kubernetes send passes.
func TestStateChange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		method  string
		headers map[string]string
		want    string // the reason; "" passes
	}{
		{"curl -X POST", "POST", map[string]string{"User-Agent": "curl/8.5.0", "Accept": "*/*"}, ""},
		{"curl with a JSON body", "POST", map[string]string{"Content-Type": "application/json"}, ""},
		{"Prometheus-like", "POST", map[string]string{"User-Agent": "Prometheus/2.55.1"}, ""},
		{"DELETE", "DELETE", nil, ""},
		{"same-origin fetch", "POST", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://slaprobe.test:9781"}, ""},
		{"typed by the user", "POST", map[string]string{"Sec-Fetch-Site": "none"}, ""},
		{"Origin of this listener, other case", "POST", map[string]string{"Origin": "http://SLAPROBE.test:9781"}, ""},
		{"cross-site", "POST", map[string]string{"Sec-Fetch-Site": "cross-site"}, CrossSite},
		{"same-site", "DELETE", map[string]string{"Sec-Fetch-Site": "same-site"}, CrossSite},
		{"cross-site, origin forged equal", "POST", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://slaprobe.test:9781"}, CrossSite},
		{"foreign Origin", "POST", map[string]string{"Origin": "http://evil.test"}, ForeignOrigin},
		{"other port", "POST", map[string]string{"Origin": "http://slaprobe.test:8080"}, ForeignOrigin},
		{"null Origin", "POST", map[string]string{"Origin": "null"}, ForeignOrigin},
		{"form", "POST", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, FormContentType},
		{"multipart", "POST", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, FormContentType},
		{"text/plain", "POST", map[string]string{"Content-Type": "Text/Plain; charset=utf-8"}, FormContentType},
		{"bad content type", "POST", map[string]string{"Content-Type": "a b"}, FormContentType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://slaprobe.test:9781/-/reload", nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			got := StateChange(r)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("refused (%s: %s), want it to pass", got.Reason, got.Message)
			case tc.want != "" && got == nil:
				t.Errorf("passed, want it refused as %s", tc.want)
			case tc.want != "" && got.Reason != tc.want:
				t.Errorf("refused as %s (%s), want %s", got.Reason, got.Message, tc.want)
			}
		})
	}
}

// TestBasicAuthReserve: once a flood has spent the budget, a source whose
// credentials never failed is still checked, on the reserve; the flood's
// sources, marked by their failures, are not; fresh sources each cost the
// reserve one comparison until it is spent; a mark lasts SuspectFor.
func TestBasicAuthReserve(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte(authPass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBasicAuth(map[string]string{authUser: string(hash), "grafana": string(hash)})
	if err != nil {
		t.Fatal(err)
	}
	// A fake clock on which every comparison takes 100 ms.
	now := time.Unix(1e9, 0)
	compares := 0
	b.SetHooks(Hooks{
		Now: func() time.Time { return now },
		Compare: func(h, p []byte) error {
			compares++
			now = now.Add(100 * time.Millisecond)
			return bcrypt.CompareHashAndPassword(h, p)
		},
	})
	step := func(source, user, pass, want string, wantCompares int) {
		t.Helper()
		before := compares
		if got := b.CheckFrom(source, user, pass); got != want {
			t.Errorf("CheckFrom(%q, %q, …) = %q, want %q", source, user, got, want)
		}
		if n := compares - before; n != wantCompares {
			t.Errorf("CheckFrom(%q, %q, …) ran %d comparisons, want %d", source, user, n, wantCompares)
		}
	}
	const attacker, prometheus = "127.0.0.2", "127.0.0.1"
	// The flood spends the budget (2 s, refilled at 0.025 s per comparison:
	// 21 comparisons start with some left).
	for i := 0; ; i++ {
		if b.CheckFrom(attacker, authUser, fmt.Sprint("wrong", i)) == Throttled {
			break
		}
		if i > 100 {
			t.Fatal("the budget never ran out")
		}
	}
	step(attacker, authUser, "wrong", Throttled, 0) // marked: no reserve
	step("", authUser, authPass, Throttled, 0)      // unknown source: no reserve
	step(prometheus, authUser, authPass, "", 1)     // never failed: on the reserve
	step(prometheus, authUser, authPass, "", 0)     // known good now
	// Fresh sources cost the reserve one comparison each until it is spent
	// (0.4 s left, refilled at 0.005 s per comparison: five start with some
	// left), while the flood keeps the budget spent.
	spendBudget := func() {
		b.mu.Lock()
		b.budget = -time.Hour
		b.mu.Unlock()
	}
	for i := range 5 {
		spendBudget()
		step(fmt.Sprintf("127.0.1.%d", i), authUser, "wrong", Unauthenticated, 1)
	}
	spendBudget()
	step("127.0.1.9", "grafana", authPass, Throttled, 0) // the reserve is spent too
	step(prometheus, authUser, authPass, "", 0)          // still known good
	// The marks last SuspectFor.
	now = now.Add(SuspectFor)
	spendBudget()
	step(attacker, authUser, "wrong", Unauthenticated, 1) // its mark expired: the reserve again
	spendBudget()
	step(attacker, authUser, "wrong", Throttled, 0) // marked again
}
