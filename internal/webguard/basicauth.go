// Package webguard holds what slaprobe's HTTP servers share to keep a
// caller from turning them against the host: basic auth checked within a
// budget of bcrypt time, with known-good credentials remembered (the main
// web listener and the OTLP receivers), and the refusal of cross-site
// requests that change state (POST /-/reload, POST|DELETE /-/sweep).
package webguard

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Why credentials were refused: the reasons Check returns.
const (
	// Unauthenticated: no basic auth credentials, or wrong ones.
	Unauthenticated = "unauthenticated"
	// Throttled: the credentials are not known good and the password
	// checks' CPU budget is spent (a flood of wrong passwords).
	Throttled = "throttled"
)

// The bound on the CPU that password checks may burn. A bcrypt comparison
// is slow on purpose (tens of milliseconds at cost 10), so a client that
// sends wrong passwords as fast as it can would keep a core busy.
// Credentials that passed once are remembered (as a SHA-256, never in
// clear), so a client with the right password costs one comparison per
// restart; every other comparison runs one at a time and draws on a budget
// of bcrypt time that refills at Share per second up to Burst. Once it is
// spent, credentials not yet known good are refused as Throttled, unchecked.
const (
	Share              = 0.25 // seconds of bcrypt per second: a quarter of one core at most
	Burst              = 2 * time.Second
	maxGoodCredentials = 64
)

// The reserve: once the budget is spent, a flood takes every comparison
// the refill allows, and a client whose credentials are not known good yet
// (Prometheus after a restart of slaprobe) would be throttled for as long
// as the flood lasts. So a source (an IP address, CheckFrom) whose
// credentials have not failed in the last SuspectFor may draw on a small
// reserve of its own; a failed comparison marks its source, which then
// draws on the budget alone. Each source of a flood costs the reserve one
// comparison: it bounds what many sources can take, ReserveShare of a core.
const (
	ReserveShare = 0.05
	ReserveBurst = 500 * time.Millisecond
	SuspectFor   = 10 * time.Minute
	maxSuspects  = 4096
)

// BasicAuth checks user and password against bcrypt hashes, in constant
// time over the user names (an unknown user is checked against a hash of
// the same cost), within a bounded CPU budget (see Share). It is safe for
// concurrent use.
type BasicAuth struct {
	users   []basicUser
	fake    []byte // the hash an unknown user is checked against
	now     func() time.Time
	compare func(hash, password []byte) error

	bcryptMu sync.Mutex // one comparison at a time

	mu       sync.Mutex
	budget   time.Duration // bcrypt time left
	reserve  time.Duration // bcrypt time left for sources not suspect
	filled   time.Time     // when budget and reserve were last refilled
	spent    time.Duration // bcrypt time spent since start
	good     map[[sha256.Size]byte]struct{}
	suspects map[string]time.Time // source → when its credentials last failed
}

type basicUser struct {
	sum  [sha256.Size]byte // of the name, compared in constant time
	hash []byte
}

// NewBasicAuth checks against users: user name to bcrypt hash, as in a
// web configuration file's basic_auth_users.
func NewBasicAuth[S ~string](users map[string]S) (*BasicAuth, error) {
	b := &BasicAuth{
		now: time.Now, compare: bcrypt.CompareHashAndPassword,
		budget: Burst, reserve: ReserveBurst,
		good: map[[sha256.Size]byte]struct{}{}, suspects: map[string]time.Time{},
	}
	b.filled = b.now()
	maxCost := bcrypt.MinCost
	for _, u := range slices.Sorted(maps.Keys(users)) {
		h := []byte(users[u])
		cost, err := bcrypt.Cost(h)
		if err != nil {
			return nil, fmt.Errorf("basic_auth_users: user %q: not a bcrypt hash (%v)", u, err)
		}
		maxCost = max(maxCost, cost)
		b.users = append(b.users, basicUser{sum: sha256.Sum256([]byte(u)), hash: h})
	}
	fake, err := bcrypt.GenerateFromPassword([]byte("slaprobe: no such user"), maxCost)
	if err != nil {
		return nil, err
	}
	b.fake = fake
	return b, nil
}

// Hooks replace the clock and the comparison of a BasicAuth, for tests and
// benchmarks; nil fields keep what is there.
type Hooks struct {
	Now     func() time.Time
	Compare func(hash, password []byte) error
}

// SetHooks installs h and restarts the budget's refill from h.Now.
func (b *BasicAuth) SetHooks(h Hooks) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.Now != nil {
		b.now = h.Now
		b.filled = h.Now()
	}
	if h.Compare != nil {
		b.compare = h.Compare
	}
}

// Drain empties the budget and the reserve: the steady state of a long
// flood (benchmarks).
func (b *BasicAuth) Drain() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.budget, b.reserve = 0, 0
}

// Spent is the bcrypt time spent so far.
func (b *BasicAuth) Spent() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}

func credentialKey(user, pass string) [sha256.Size]byte {
	return sha256.Sum256([]byte(user + "\x00" + pass))
}

// refill adds the budget and reserve earned since the last refill. b.mu
// is held.
func (b *BasicAuth) refill() {
	now := b.now()
	elapsed := float64(now.Sub(b.filled))
	b.budget = min(Burst, b.budget+time.Duration(elapsed*Share))
	b.reserve = min(ReserveBurst, b.reserve+time.Duration(elapsed*ReserveShare))
	b.filled = now
}

// suspect reports whether source's credentials failed within SuspectFor.
// b.mu is held.
func (b *BasicAuth) suspect(source string) bool {
	if source == "" {
		return true // unknown: no reserve
	}
	at, ok := b.suspects[source]
	return ok && b.now().Sub(at) < SuspectFor
}

// Quick settles what needs no bcrypt comparison: credentials known good
// (""), or any other while the budget is spent (Throttled). It does not
// settle the rest: Check does.
func (b *BasicAuth) Quick(user, pass string) (settled bool, reason string) {
	settled, reason, _ = b.quick("", user, pass)
	return settled, reason
}

// quick is Quick for a request from source; when not settled, fromReserve
// says which bucket the comparison draws on.
func (b *BasicAuth) quick(source, user, pass string) (settled bool, reason string, fromReserve bool) {
	key := credentialKey(user, pass)
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.good[key]; ok {
		return true, "", false
	}
	b.refill()
	switch {
	case b.budget > 0:
		return false, "", false
	case b.reserve > 0 && !b.suspect(source):
		return false, "", true
	}
	return true, Throttled, false
}

// Check returns "" for a known user with its password, else the reason to
// refuse: Unauthenticated or Throttled.
func (b *BasicAuth) Check(user, pass string) string { return b.CheckFrom("", user, pass) }

// CheckFrom is Check for a request from source, the client's IP address
// ("" when unknown): a source whose credentials have not failed lately
// may be checked on the reserve while the budget is spent.
func (b *BasicAuth) CheckFrom(source, user, pass string) string {
	if settled, reason, _ := b.quick(source, user, pass); settled {
		return reason
	}
	b.bcryptMu.Lock()
	defer b.bcryptMu.Unlock()
	// Settle again: the budget may have gone, or the credentials been
	// found good, while this one waited for its turn.
	settled, reason, fromReserve := b.quick(source, user, pass)
	if settled {
		return reason
	}
	hash, known := b.fake, false
	want := sha256.Sum256([]byte(user))
	for _, u := range b.users {
		if subtle.ConstantTimeCompare(u.sum[:], want[:]) == 1 {
			hash, known = u.hash, true
		}
	}
	start := b.now()
	err := b.compare(hash, []byte(pass))
	spent := b.now().Sub(start)

	b.mu.Lock()
	defer b.mu.Unlock()
	if fromReserve {
		b.reserve -= spent
	} else {
		b.budget -= spent
	}
	b.spent += spent
	if err != nil || !known {
		b.markSuspect(source)
		return Unauthenticated
	}
	if len(b.good) >= maxGoodCredentials {
		clear(b.good)
	}
	b.good[credentialKey(user, pass)] = struct{}{}
	return ""
}

// markSuspect records that source's credentials failed. The map is
// bounded: when full, the marks older than SuspectFor go, and if none
// does, all of them (a flood from more than maxSuspects sources then costs
// the reserve again, within ReserveShare). b.mu is held.
func (b *BasicAuth) markSuspect(source string) {
	if source == "" {
		return
	}
	if _, ok := b.suspects[source]; !ok && len(b.suspects) >= maxSuspects {
		now := b.now()
		for s, at := range b.suspects {
			if now.Sub(at) >= SuspectFor {
				delete(b.suspects, s)
			}
		}
		if len(b.suspects) >= maxSuspects {
			clear(b.suspects)
		}
	}
	b.suspects[source] = b.now()
}
