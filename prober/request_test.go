package prober

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestBodyTemplateSplice(t *testing.T) {
	for _, api := range []API{APIChat, APICompletions} {
		tpl, err := newBodyTemplate(api, "org/model-7B", 300, 256, false, false)
		if err != nil {
			t.Fatal(err)
		}
		nonce, salt := newNonce(), newSalt()
		want, err := marshalRequest(requestSpec{
			API: api, Model: "org/model-7B", Prompt: promptText(nonce, bodyWords(300)),
			MaxTokens: 256, MinTokens: 256, Stream: true, CacheSalt: salt,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := tpl.bytes(nonce, salt); !bytes.Equal(got, want) {
			t.Fatalf("%s: spliced body differs from a fresh encoding:\n%s\n%s", api, got, want)
		}
		streamed, _ := io.ReadAll(tpl.reader(nonce, salt))
		if !bytes.Equal(streamed, want) || tpl.size(nonce, salt) != int64(len(want)) {
			t.Fatalf("%s: reader/size disagree with the body", api)
		}
	}
}

func TestRequestJSONShape(t *testing.T) {
	b, err := marshalRequest(requestSpec{API: APIChat, Model: "m", Prompt: "p", MaxTokens: 9, MinTokens: 9, Stream: true, CacheSalt: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"stream_options"`); n != 1 {
		t.Fatalf("stream_options appears %d times in %s", n, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := `{"cache_salt":"s","ignore_eos":true,"max_tokens":9,"messages":[{"content":"p","role":"user"}],"min_tokens":9,"model":"m","stream":true,"stream_options":{"continuous_usage_stats":true,"include_usage":true}}`
	if got, _ := json.Marshal(m); string(got) != want {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}

	// Calibration request: no streaming, no forcing.
	b, _ = marshalRequest(requestSpec{API: APICompletions, Model: "m", Prompt: "p", MaxTokens: 1, CacheSalt: "s"})
	if string(b) != `{"model":"m","prompt":"p","max_tokens":1,"cache_salt":"s"}` {
		t.Fatalf("calibration body %s", b)
	}
	b, _ = marshalTokenize(requestSpec{API: APIChat, Model: "m", Prompt: "p"})
	if string(b) != `{"model":"m","messages":[{"role":"user","content":"p"}],"add_generation_prompt":true}` {
		t.Fatalf("tokenize body %s", b)
	}
	b, _ = marshalTokenize(requestSpec{API: APICompletions, Model: "m", Prompt: "p"})
	if string(b) != `{"model":"m","prompt":"p"}` {
		t.Fatalf("tokenize body %s", b)
	}
}

func TestBodyTemplateRejectsPlaceholderClash(t *testing.T) {
	if _, err := newBodyTemplate(APIChat, "x"+nonceMark, 5, 5, false, false); err == nil {
		t.Fatal("a model name containing the placeholder must be rejected")
	}
}

// bytes returns the whole body (for tests).
func (t *bodyTemplate) bytes(nonce, salt string) []byte {
	out := make([]byte, 0, t.size(nonce, salt))
	out = append(out, t.pre...)
	out = append(out, nonce...)
	out = append(out, t.mid...)
	out = append(out, salt...)
	return append(out, t.tail...)
}
