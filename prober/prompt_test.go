package prober

import (
	"regexp"
	"strings"
	"testing"
)

func TestBodyWordsDeterministicPrefix(t *testing.T) {
	long := bodyWords(5000)
	if got := len(strings.Fields(long)); got != 5000 {
		t.Fatalf("bodyWords(5000) has %d words", got)
	}
	for _, n := range []int{1, 7, 100, 1234, 4999} {
		b := bodyWords(n)
		if !strings.HasPrefix(long, b) || len(strings.Fields(b)) != n {
			t.Fatalf("bodyWords(%d) is not the %d-word prefix", n, n)
		}
		if b != bodyWords(n) {
			t.Fatalf("bodyWords(%d) is not deterministic", n)
		}
	}
	if bodyWords(0) != "" || bodyWords(-3) != "" {
		t.Fatal("empty body expected")
	}
}

func TestBodyWordsLooksLikeProse(t *testing.T) {
	text := bodyWords(20000)
	words := strings.Fields(text)
	distinct := map[string]int{}
	for _, w := range words {
		distinct[strings.ToLower(strings.Trim(w, ".,?!"))]++
	}
	if len(distinct) < 200 {
		t.Errorf("only %d distinct words", len(distinct))
	}
	for w, n := range distinct {
		if n > len(words)/10 && w != "the" {
			t.Errorf("%q is %d of %d words", w, n, len(words))
		}
	}
	sentences := regexp.MustCompile(`[.?!](\s|$)`).FindAllStringIndex(text, -1)
	if per := float64(len(words)) / float64(len(sentences)); per < 6 || per > 30 {
		t.Errorf("%.1f words per sentence", per)
	}
	if !strings.Contains(text, "\n\n") {
		t.Error("no paragraphs")
	}
	if strings.ContainsAny(text, "\"\\<>&{}") {
		t.Error("text needs JSON or HTML escaping")
	}
	for _, p := range strings.Split(text, "\n\n") {
		if p == "" || p[0] < 'A' || p[0] > 'Z' {
			t.Errorf("paragraph does not start with a capital: %.30q", p)
		}
	}
}

func TestNonceAndSalt(t *testing.T) {
	shape := regexp.MustCompile(`^\d{4}-\d{4}-\d{4}-\d{4}$`)
	hexRe := regexp.MustCompile(`^[0-9a-f]{32}$`)
	nonces, salts := map[string]bool{}, map[string]bool{}
	for range 2000 {
		n, s := newNonce(), newSalt()
		if !shape.MatchString(n) || len(n) != nonceLen {
			t.Fatalf("nonce %q", n)
		}
		if !hexRe.MatchString(s) || len(s) != saltLen {
			t.Fatalf("salt %q", s)
		}
		if nonces[n] || salts[s] {
			t.Fatal("repeated nonce or salt")
		}
		nonces[n], salts[s] = true, true
	}
}

func TestPromptTextNonceFirst(t *testing.T) {
	p := promptText("1234-5678-9012-3456", bodyWords(10))
	if !strings.HasPrefix(p, "[probe 1234-5678-9012-3456] ") || !strings.HasSuffix(p, bodyWords(10)) {
		t.Fatalf("%q", p)
	}
	// The nonce's cost in the fake tokenizer (digits are tokens) is the same for every nonce.
	if fakeTokens(promptText(newNonce(), "")) != fakeTokens(promptText(newNonce(), "")) {
		t.Fatal("nonce token count varies")
	}
}
