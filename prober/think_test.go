package prober

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// Think time between a conversation's turns: drawn per turn from the
// conversation's own seeded generator, waited without the target's
// in-flight slot when the scheduler runs it, and cut short by the context.

// TestThinkTimeDraws: think times come from a generator of their own beside
// the new tokens' (one conversation's two streams never share values), the
// same seed and conversation draw the same think times, another conversation
// others; a fixed think time draws nothing.
func TestThinkTimeDraws(t *testing.T) {
	tt := ThinkTime{Min: 5 * time.Second, Max: time.Minute}
	draws := func(seed, n uint64) []time.Duration {
		_, think := conversationDraws(seed, n)
		out := make([]time.Duration, 8)
		for i := range out {
			out[i] = think.ThinkTime(tt)
			if out[i] < tt.Min || out[i] > tt.Max {
				t.Fatalf("think time %v outside %v", out[i], tt)
			}
		}
		return out
	}
	same, again, other := draws(7, 0), draws(7, 0), draws(7, 1)
	if !equalDurations(same, again) {
		t.Errorf("one seed and conversation, two sequences: %v and %v", same, again)
	}
	if equalDurations(same, other) {
		t.Errorf("another conversation drew the same sequence %v", same)
	}
	newTokens, think := conversationDraws(7, 0)
	a, b := newTokens.Duration(0, 1<<40), think.Duration(0, 1<<40)
	if a == b {
		t.Errorf("new tokens' and think times' generators drew the same value %v", a)
	}
	_, fixed := conversationDraws(7, 0)
	fixed.ThinkTime(ThinkTime{Min: 3 * time.Second, Max: 3 * time.Second})
	if x, y := fixed.ThinkTime(tt), same[0]; x != y {
		t.Errorf("a fixed think time moved the stream: %v against %v", x, y)
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestConversationThinkTimes: each follow-up waits its drawn think time
// (recorded by the injected sleep, never slept for real), in the range, in
// the order the conversation's generator gives from the scenario's seed; the priming turn
// waits nothing. A fixed think time is the same before every follow-up.
func TestConversationThinkTimes(t *testing.T) {
	_, target := warmSim(t, nil)
	for _, tt := range []ThinkTime{
		{Min: 5 * time.Second, Max: time.Minute},
		{Min: 15 * time.Second, Max: 15 * time.Second},
	} {
		t.Run(tt.String(), func(t *testing.T) {
			s := conversationTestScenario(5, 1024, 256)
			s.Conversation.ThinkTime = tt
			p := New(nil, nil)
			var slept []time.Duration
			p.sleep = func(ctx context.Context, d time.Duration) bool { slept = append(slept, d); return true }
			res := p.Probe(context.Background(), target, "", s)
			if res.Kind != KindSuccess || res.Turn != 5 || len(res.Earlier) != 4 {
				t.Fatalf("conversation: kind %s reason %s turn %d earlier %d err %v", res.Kind, res.Reason, res.Turn, len(res.Earlier), res.Err)
			}
			turns := append(append([]Result(nil), res.Earlier...), res)
			if len(slept) != 4 {
				t.Fatalf("slept %v; want 4 think times, one before each follow-up", slept)
			}
			_, want := conversationDraws(s.ConversationSeed(), 0) // the prober's first conversation of s
			for i, r := range turns {
				if r.ConversationID != res.ConversationID || !strings.HasPrefix(r.ConversationID, "slaprobe-") {
					t.Errorf("turn %d: conversation id %q, want %q on every turn", i+1, r.ConversationID, res.ConversationID)
				}
				if i == 0 {
					if r.ThinkTime != 0 {
						t.Errorf("priming turn: think time %v, want 0", r.ThinkTime)
					}
					continue
				}
				if r.ThinkTime != slept[i-1] {
					t.Errorf("turn %d: think time %v, but slept %v", i+1, r.ThinkTime, slept[i-1])
				}
				if r.ThinkTime < tt.Min || r.ThinkTime > tt.Max {
					t.Errorf("turn %d: think time %v outside [%v, %v]", i+1, r.ThinkTime, tt.Min, tt.Max)
				}
				if w := want.ThinkTime(tt); r.ThinkTime != w {
					t.Errorf("turn %d: think time %v; the conversation's generator gives %v", i+1, r.ThinkTime, w)
				}
			}
			if !tt.Fixed() && slept[0] == slept[1] && slept[1] == slept[2] && slept[2] == slept[3] {
				t.Errorf("a range drew %v four times", slept[0])
			}
		})
	}
}

// TestConversationCancelDuringThink: a context that ends in the middle of a
// (ten-minute) think time ends the conversation at once, with a failed
// result for the turn that was never sent, saying why, and the turns before
// it. A cancelled context reads like a cancelled request (connection_error),
// a deadline as a timeout.
func TestConversationCancelDuringThink(t *testing.T) {
	_, target := warmSim(t, nil)
	s := conversationTestScenario(3, 1024, 256)
	s.Conversation.ThinkTime = ThinkTime{Min: 10 * time.Minute, Max: 10 * time.Minute}
	for _, tc := range []struct {
		name   string
		cause  error // what ends the context; nil: a plain cancel
		reason Reason
		is     error
	}{
		{"cancel", nil, ReasonConnection, context.Canceled},
		{"deadline", context.DeadlineExceeded, ReasonTimeout, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(nil, nil)
			thinking := make(chan struct{})
			p.sleep = func(ctx context.Context, d time.Duration) bool {
				close(thinking)
				return schedSleep(ctx, d) // a real timer: only the context can end it
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			done := make(chan Result, 1)
			go func() { done <- p.Probe(ctx, target, "", s) }()
			select {
			case <-thinking:
			case res := <-done:
				t.Fatalf("the conversation ended before its think time: %s %v", res.Reason, res.Err)
			}
			cancel(tc.cause)
			var res Result
			select {
			case res = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the conversation did not return after its context ended in a think time")
			}
			if res.Kind != KindError || res.Reason != tc.reason || res.Turn != 2 || !errors.Is(res.Err, tc.is) ||
				!strings.Contains(res.Err.Error(), "think time before turn 2") {
				t.Errorf("result: kind %s reason %q turn %d err %v; want an error %q on turn 2 naming the think time", res.Kind, res.Reason, res.Turn, res.Err, tc.reason)
			}
			if res.ThinkTime != 10*time.Minute || len(res.Earlier) != 1 || res.Earlier[0].Kind != KindSuccess || res.Earlier[0].Turn != 1 {
				t.Errorf("think time %v, earlier %d turns; want 10m and the successful priming turn", res.ThinkTime, len(res.Earlier))
			}
		})
	}
}

// maxConcurrent wraps the prober's transport, counting the POST requests
// (calibrations and turns) the prober has open at once: from the request's
// send to its response body's close. It counts on the client's side because
// the slot is the client's: a server handler may still be returning after
// the prober read [DONE], closed the body and started its next request, so a
// count taken in the server's handler sees an overlap the prober never made.
type maxConcurrent struct {
	rt       http.RoundTripper
	now, max atomic.Int32
}

func (m *maxConcurrent) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost {
		return m.rt.RoundTrip(r)
	}
	n := m.now.Add(1)
	for {
		if old := m.max.Load(); n <= old || m.max.CompareAndSwap(old, n) {
			break
		}
	}
	resp, err := m.rt.RoundTrip(r)
	if err != nil {
		m.now.Add(-1)
		return nil, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, done: func() { m.now.Add(-1) }}
	return resp, nil
}

// countedBody calls done once, at its first Close.
type countedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *countedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// thinkSim is a simulated engine whose client counts its concurrent requests.
func thinkSim(t *testing.T) (*maxConcurrent, Target) {
	t.Helper()
	cfg := vllmsim.DefaultConfig()
	cfg.TimeScale = 0.1
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	url, client := testproc.Serve(t, e.Handler())
	mc := &maxConcurrent{rt: client.Transport}
	client.Transport = mc
	return mc, Target{Name: "sim", BaseURL: url, API: APIChat, Client: client}
}

// TestSchedulerConversationThinkReleasesSlot: with one in-flight slot per
// target, a cold probe of the same target runs while a conversation thinks,
// between its turns, and the prober never has two requests open at once. The
// injected Sleep holds the think time open until the cold probe has run, so
// without the slot's release the two wait for each other and no
// conversation finishes.
func TestSchedulerConversationThinkReleasesSlot(t *testing.T) {
	mc, target := thinkSim(t)
	const think = 7 * time.Second
	conv := conversationTestScenario(3, 1024, 256)
	conv.Interval = time.Hour // first probe after Rand·min(interval, FirstProbeMaxDelay) = 5 s
	conv.Conversation.ThinkTime = ThinkTime{Min: think, Max: think}
	cold := Scenario{Name: "chatbot", InputTokens: 1024, OutputTokens: 16, Interval: 4 * time.Second, Timeout: time.Minute} // first probe after 2 s

	thinking, coldDone := make(chan struct{}), make(chan struct{})
	var thinkOnce, coldOnce sync.Once
	sleep := func(ctx context.Context, d time.Duration) bool {
		var wait <-chan struct{}
		switch d {
		case 0, 5 * time.Second: // the conversation's first probe: at once
			return ctx.Err() == nil
		case think: // a think time: open until the cold probe has run
			thinkOnce.Do(func() { close(thinking) })
			wait = coldDone
		case 2 * time.Second: // the cold probe's first: once the conversation thinks
			wait = thinking
		default: // intervals after a probe: only the end of the test
		}
		select {
		case <-ctx.Done():
			return false
		case <-wait:
			return true
		}
	}
	p := New(nil, nil)
	probe := func(ctx context.Context, tg Target, model string, s Scenario, think ThinkFunc) Result {
		res := p.ProbePaced(ctx, tg, model, s, think)
		if s.Name == cold.Name {
			coldOnce.Do(func() { close(coldDone) })
		}
		return res
	}
	obs := newSchedObserver()
	sch := NewScheduler([]ScheduledTarget{{Target: target, Scenarios: []Scenario{conv, cold}}}, SchedulerOptions{
		Probe: probe, Observer: obs, Sleep: sleep, MaxInFlightPerTarget: 1,
		Rand: func() float64 { return 0.5 },
	})
	var convRes, coldRes *Result
	schedRunFor(t, sch, 30*time.Second, func() bool {
		res, _, _, _ := obs.snapshot()
		convRes, coldRes = nil, nil
		for i := range res {
			switch res[i].Scenario {
			case conv.Name:
				convRes = &res[i]
			case cold.Name:
				coldRes = &res[i]
			}
		}
		return convRes != nil && coldRes != nil
	})
	if convRes == nil || coldRes == nil {
		t.Fatalf("conversation recorded: %v, cold probe recorded: %v; the cold probe could not run during the think time", convRes != nil, coldRes != nil)
	}
	if convRes.Kind != KindSuccess || convRes.Turn != 3 || len(convRes.Earlier) != 2 || coldRes.Kind != KindSuccess {
		t.Fatalf("conversation %s (%v) turn %d, cold probe %s (%v)", convRes.Kind, convRes.Err, convRes.Turn, coldRes.Kind, coldRes.Err)
	}
	prime, second := convRes.Earlier[0], convRes.Earlier[1]
	if second.ThinkTime != think || convRes.ThinkTime != think {
		t.Errorf("think times %v, %v; want %v", second.ThinkTime, convRes.ThinkTime, think)
	}
	if !coldRes.Start.After(prime.LastToken) || !coldRes.LastToken.Before(second.Start) {
		t.Errorf("cold probe %v to %v; want it inside the think time, between turn 1's end %v and turn 2's start %v",
			coldRes.Start, coldRes.LastToken, prime.LastToken, second.Start)
	}
	if got := mc.max.Load(); got != 1 {
		t.Errorf("the prober had %d requests open at once; want 1 (one in-flight slot)", got)
	}
}

// TestSchedulerStopDuringThink: stopping the scheduler while a conversation
// thinks (a ten-minute think time on the real timer) returns at once, frees
// no slot the conversation no longer holds, and records nothing.
func TestSchedulerStopDuringThink(t *testing.T) {
	_, target := thinkSim(t)
	conv := conversationTestScenario(3, 1024, 256)
	conv.Conversation.ThinkTime = ThinkTime{Min: 10 * time.Minute, Max: 10 * time.Minute}
	thinking := make(chan struct{})
	var once sync.Once
	sleep := func(ctx context.Context, d time.Duration) bool {
		if d == 10*time.Minute {
			once.Do(func() { close(thinking) })
		}
		return schedSleep(ctx, d)
	}
	obs := newSchedObserver()
	hook := &schedHook{}
	sch := NewScheduler([]ScheduledTarget{{Target: target, Scenarios: []Scenario{conv}}}, SchedulerOptions{
		Probe: New(nil, nil).ProbePaced, Observer: obs, Sleep: sleep, Hooks: []ProbeHook{hook},
		Rand: func() float64 { return 0 },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sch.Run(ctx); close(done) }()
	select {
	case <-thinking:
	case <-time.After(30 * time.Second):
		t.Fatal("the conversation never reached its think time")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel during a think time")
	}
	if res, _, _, _ := obs.snapshot(); len(res) != 0 {
		t.Errorf("a stopped conversation was recorded: %+v", res)
	}
	if b, a := hook.before.Load(), hook.after.Load(); b != 1 || a != 1 {
		t.Errorf("hooks: %d before, %d after; want 1 and 1 (a conversation is one probe)", b, a)
	}
}

// TestSchedulerConversationsKeepTheLimit: conversations (a fake probe that
// calls the ThinkFunc the scheduler passes it between its turns, as runConversation
// does) and cold probes on one target, many times over, never have more
// requests in flight than the target's limit, yet cold probes do run
// inside think times.
func TestSchedulerConversationsKeepTheLimit(t *testing.T) {
	for _, limit := range []int{1, 2} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			var inFlight, maxSeen, thinking, duringThink, conversations atomic.Int32
			send := func() {
				n := inFlight.Add(1)
				for {
					if m := maxSeen.Load(); n <= m || maxSeen.CompareAndSwap(m, n) {
						break
					}
				}
				if thinking.Load() > 0 {
					duringThink.Add(1)
				}
				time.Sleep(time.Millisecond)
				inFlight.Add(-1)
			}
			probe := func(ctx context.Context, tg Target, model string, s Scenario, think ThinkFunc) Result {
				if !s.IsConversation() {
					send()
					return schedOK(tg, model, s)
				}
				if think == nil {
					t.Error("the scheduler gave a conversation no ThinkFunc")
					return schedOK(tg, model, s)
				}
				for k := 1; k <= s.Turns(); k++ {
					if k > 1 {
						thinking.Add(1)
						err := think(ctx, s.Conversation.ThinkTime.Min)
						thinking.Add(-1)
						if err != nil {
							return Result{Kind: KindError, Reason: ClassifyError(err), Err: err}
						}
					}
					send()
				}
				conversations.Add(1)
				return schedOK(tg, model, s)
			}
			var scenarios []Scenario
			for i := range 3 {
				c := schedScenario(fmt.Sprintf("conv%d", i), 100, 100*time.Millisecond)
				c.Conversation = Conversation{Turns: 4, NewTokens: 10, ThinkTime: ThinkTime{Min: 2 * time.Second, Max: 2 * time.Second}}
				scenarios = append(scenarios, c, schedScenario(fmt.Sprintf("cold%d", i), 100, 100*time.Millisecond))
			}
			sch := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a", Model: "m"}, Scenarios: scenarios}},
				SchedulerOptions{Probe: probe, ListModels: schedStaticModels(ModelInfo{ID: "m"}), Sleep: schedFastSleep,
					Jitter: 0.2, MaxInFlightPerTarget: limit})
			schedRunFor(t, sch, 5*time.Second, func() bool { return conversations.Load() >= 30 && duringThink.Load() >= 30 })
			if conversations.Load() < 10 || duringThink.Load() < 10 {
				t.Fatalf("only %d conversations, %d requests during think times", conversations.Load(), duringThink.Load())
			}
			if got := maxSeen.Load(); got > int32(limit) {
				t.Errorf("%d requests in flight at once; want at most %d", got, limit)
			}
		})
	}
}

// TestAgentScenariosCost: the built-in agent scenarios are conversations
// with think time, not probed by default, and cost what CONFIGURATION.md's table
// says (tokens per probe, and tokens an hour to 0.01 M).
func TestAgentScenariosCost(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"coding_agent", "tool_calling_agent", "general_chat_followup", "long_document_followup"} {
		s, ok := LookupBuiltin(name)
		if !ok || !s.IsConversation() || s.Validate() != nil {
			t.Fatalf("%s: built in %v, a conversation %v, %v", name, ok, s.IsConversation(), s.Validate())
		}
		if slices.Contains(DefaultScenarios, name) {
			t.Errorf("%s is probed by default", name)
		}
		if strings.HasSuffix(name, "_agent") && s.Conversation.ThinkTime.Max == 0 {
			t.Errorf("%s has no think time", name)
		}
		row := regexp.MustCompile("(?m)^\\| `" + name + "` \\| ([0-9,]+) \\| [^|]+ \\| ([0-9.]+) M \\|$").FindStringSubmatch(string(readme))
		if row == nil {
			t.Errorf("CONFIGURATION.md: no cost row for %s", name)
			continue
		}
		perHour := PlannedTokensPerHour([]Scenario{s})
		if got, want := strings.ReplaceAll(row[1], ",", ""), strconv.Itoa(s.TokensPerProbe()); got != want {
			t.Errorf("CONFIGURATION.md: %s costs %s tokens a probe; the scenario sends %s", name, got, want)
		}
		if got, want := row[2], strconv.FormatFloat(perHour/1e6, 'f', 2, 64); got != want {
			t.Errorf("CONFIGURATION.md: %s costs %s M tokens an hour; planned tokens per hour say %s M", name, got, want)
		}
	}
}

// TestConversationThinkTimeElapses: on the real timer, each follow-up starts
// at least its drawn think time after the turn before's last token (a lower
// bound only: how much later depends on the machine).
func TestConversationThinkTimeElapses(t *testing.T) {
	_, target := warmSim(t, nil)
	s := conversationTestScenario(3, 1024, 256)
	s.Conversation.ThinkTime = ThinkTime{Min: 100 * time.Millisecond, Max: 300 * time.Millisecond}
	res := New(nil, nil).Probe(context.Background(), target, "", s)
	if res.Kind != KindSuccess || len(res.Earlier) != 2 {
		t.Fatalf("conversation: kind %s reason %s turn %d err %v", res.Kind, res.Reason, res.Turn, res.Err)
	}
	turns := append(append([]Result(nil), res.Earlier...), res)
	for i := 1; i < len(turns); i++ {
		gap := turns[i].Start.Sub(turns[i-1].LastToken)
		if turns[i].ThinkTime < s.Conversation.ThinkTime.Min || gap < turns[i].ThinkTime {
			t.Errorf("turn %d started %v after turn %d's last token; its think time was %v", i+1, gap, i, turns[i].ThinkTime)
		}
		t.Logf("turn %d: think time %v, gap %v", i+1, turns[i].ThinkTime, gap)
	}
}
