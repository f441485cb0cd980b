package status

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/prober"
)

// conversationPage serves the status page of the config yml, whose first
// target runs the conversation scenario named scenario, and returns its URL,
// the recorder and clock that feed it, and the scenario as configured.
func conversationPage(t *testing.T, yml, scenario string) (string, *Recorder, *fakeClock, prober.Scenario) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slaprobe.yml")
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var sc prober.Scenario
	for _, s := range cfg.Scenarios(cfg.TargetConfigs[0].Name) {
		if s.Name == scenario {
			sc = s
		}
	}
	if !sc.IsConversation() {
		t.Fatalf("scenario %q of the config is not a conversation scenario", scenario)
	}
	c := newClock()
	rec := NewRecorder(0, c.now)
	s, err := New(Options{Config: func() *config.Config { return cfg }, Recorder: rec, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Mount(mux.Handle)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/", rec, c, sc
}

// turnResult is turn k of a conversation whose follow-ups the server served
// as class says, with a TTFT to match: a cold priming turn, a hit costing a
// tenth of it, a partial half, a miss all of it.
func turnResult(target, scenario string, start time.Time, k int, class prober.ConversationCache, cold time.Duration) prober.Result {
	r := okResult(target, scenario, start)
	r.Turn, r.PromptTokens = k, 4096+(k-1)*1024
	ttft := cold
	if k > 1 {
		r.SeenTokens, r.CachedReported = r.PromptTokens-1024, true
		switch class {
		case prober.CacheHitTurn:
			r.CachedTokens, ttft = r.SeenTokens, cold/10
		case prober.CachePartialTurn:
			r.CachedTokens, ttft = r.SeenTokens/2, cold/2
		case prober.CacheMissTurn:
		case prober.CacheUnknownTurn:
			r.CachedReported = false
		}
	}
	r.FirstToken = start.Add(ttft)
	r.LastToken = r.FirstToken.Add(255 * 10 * time.Millisecond)
	return r
}

// conversation is a conversation probe's result: its last turn carrying the
// earlier ones, the follow-ups served as classes says.
func conversation(target, scenario string, start time.Time, cold time.Duration, classes ...prober.ConversationCache) prober.Result {
	var earlier []prober.Result
	last := turnResult(target, scenario, start, 1, "", cold)
	for i, c := range classes {
		earlier = append(earlier, last)
		last = turnResult(target, scenario, start.Add(time.Duration(i+1)*5*time.Second), i+2, c, cold)
	}
	last.Earlier = earlier
	return last
}

// conversationResult is a conversation of turns turns whose follow-ups draw
// their class from rng: mostly hits, some partial, a few misses.
func conversationResult(target, scenario string, start time.Time, turns int, rng *rand.Rand) prober.Result {
	classes := make([]prober.ConversationCache, turns-1)
	for i := range classes {
		switch n := rng.IntN(10); {
		case n < 7:
			classes[i] = prober.CacheHitTurn
		case n < 9:
			classes[i] = prober.CachePartialTurn
		default:
			classes[i] = prober.CacheMissTurn
		}
	}
	return conversation(target, scenario, start, time.Duration(1200+rng.IntN(600))*time.Millisecond, classes...)
}

// cacheCounts reads the follow-up counts by class of the card of scenario
// from the status page.
func cacheCounts(t *testing.T, page, scenario string) map[string]int {
	t.Helper()
	i := strings.Index(page, `data-scenario="`+scenario+`"`)
	if i < 0 {
		t.Fatalf("no card of %s on the page", scenario)
	}
	card := page[i:]
	card = card[:strings.Index(card, "</section>")]
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`data-cache="(\w+)" data-count="(\d+)"`).FindAllStringSubmatch(card, -1) {
		n, _ := strconv.Atoi(m[2])
		got[m[1]] = n
	}
	return got
}

// TestConversationCard: the card of a conversation scenario counts the
// window's successful follow-ups by cache class (a failed follow-up and the
// priming turns are not counted, a conversation older than the window is
// not either) and draws the median TTFT of each turn and the last
// conversation's; a cold scenario's card has neither.
func TestConversationCard(t *testing.T) {
	url, rec, clock, s := conversationPage(t, `targets:
  - name: a
    url: http://vllm-a:8000
    scenarios: [chatbot, agent]
scenarios:
  - name: agent
    input_tokens: 4096
    output_tokens: 256
    conversation: {turns: 4, new_tokens: 1024}
`, "agent")
	send := func(res prober.Result) {
		rec.BeforeProbe(context.Background(), tgt("a"), s)
		clock.add(3 * time.Second)
		rec.AfterProbe(&res)
	}
	// Out of the window (DefaultWindow): three misses that must not count.
	send(conversation("a", s.Name, clock.t, time.Second, prober.CacheMissTurn, prober.CacheMissTurn, prober.CacheMissTurn))
	clock.add(2 * DefaultWindow)
	send(conversation("a", s.Name, clock.t, time.Second, prober.CacheHitTurn, prober.CacheHitTurn, prober.CacheHitTurn))
	send(conversation("a", s.Name, clock.t, time.Second, prober.CacheMissTurn, prober.CachePartialTurn, prober.CachePartialTurn))
	send(conversation("a", s.Name, clock.t, 2*time.Second, prober.CacheHitTurn, prober.CacheUnknownTurn, prober.CacheHitTurn))
	failed := conversation("a", s.Name, clock.t, time.Second, prober.CacheHitTurn, prober.CacheMissTurn)
	failed.Kind, failed.Reason = prober.KindError, prober.ReasonHTTP5xx // the third turn failed: its class is not counted, its hit is
	send(failed)

	page := pageHTML(t, url)
	got := cacheCounts(t, page, s.Name)
	want := map[string]int{"hit": 6, "partial": 2, "miss": 1, "unknown": 1}
	for class, n := range want {
		if got[class] != n {
			t.Errorf("%s: %d follow-ups on the page, want %d (all: %v)", class, got[class], n, got)
		}
	}
	if !strings.Contains(page, `data-conversation="4"`) {
		t.Error("the card does not say 4 conversations in the window")
	}
	// Turn 1's median is over the four conversations in the window: 1, 1,
	// 2, 1 s: 1 s. Turn 2's: 100 ms, 1 s, 200 ms, 100 ms: 150 ms. Turn 4's
	// over the three that got there: 100, 500, 200 ms. The last
	// conversation, the failed one, has two turns to draw.
	for _, tip := range []string{"turn 1: median TTFT 1.00 s over 4 conversations", "turn 2: median TTFT 150.0 ms over 4 conversations",
		"turn 4: median TTFT 200.0 ms over 3 conversations", "turn 2: TTFT 100.0 ms, cache hit"} {
		if !strings.Contains(page, tip) {
			t.Errorf("no point %q on the page", tip)
		}
	}
	if n := strings.Count(page, `data-conversation=`); n != 1 {
		t.Errorf("%d conversation sections on the page; want 1 (the cold scenarios have none)", n)
	}
}
