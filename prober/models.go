package prober

// This file holds the models a target serves (GET /v1/models), and the choice of
// the model a scenario is probed on.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode"
	"unicode/utf8"
)

// ModelInfo is one entry of /v1/models.
type ModelInfo struct {
	ID   string
	Root string
	// MaxModelLen is the longest prompt plus output the model takes:
	// vLLM's max_model_len, or llama.cpp server's per-slot n_ctx from
	// /props; 0 = unknown (null for LoRA adapters, absent on other servers).
	MaxModelLen int
}

// MaxModelsBytes bounds a /v1/models answer: tens of thousands of models.
const MaxModelsBytes = 4 << 20

// ListModels reads GET {base}/v1/models. When it lists one model and no
// max_model_len (llama.cpp server's /v1/models has none), the context size
// of GET {base}/props (llama.cpp's per-slot n_ctx) is taken as the model's
// MaxModelLen, best effort: a server without /props (Ollama) or an
// unreadable answer leaves it unknown.
func ListModels(ctx context.Context, t Target) ([]ModelInfo, error) {
	url := endpointURL(t.BaseURL, "/v1/models")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	setTargetHeaders(req, t)
	resp, err := targetClient(t).Do(req)
	if err != nil {
		return nil, fmt.Errorf("list models: %w", transportError(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("list models: %w", readHTTPError(resp.StatusCode, resp.Header, resp.Body))
	}
	var out struct {
		Data []struct {
			ID          string `json:"id"`
			Root        string `json:"root"`
			MaxModelLen *int   `json:"max_model_len"`
		} `json:"data"`
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxModelsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("list models: %w", transportError(ctx, err))
	}
	if len(b) > MaxModelsBytes {
		return nil, fmt.Errorf("list models: %s answered more than %d bytes; expected a short JSON list", url, MaxModelsBytes)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("list models: decode %s: %w", url, err)
	}
	models := make([]ModelInfo, 0, len(out.Data))
	for _, m := range out.Data {
		if !validModelID(m.ID) {
			// The detected model becomes the `model` label: a server must
			// not be able to put arbitrary text there.
			continue
		}
		mi := ModelInfo{ID: m.ID, Root: m.Root}
		if m.MaxModelLen != nil && *m.MaxModelLen > 0 {
			mi.MaxModelLen = *m.MaxModelLen
		}
		models = append(models, mi)
	}
	if len(models) == 1 && models[0].MaxModelLen == 0 {
		if props, err := ReadProps(ctx, t); err == nil && props.ContextSize > 0 {
			models[0].MaxModelLen = props.ContextSize
		}
	}
	return models, nil
}

// Fits reports whether s (prompt plus forced output) fits a context of
// maxModelLen tokens; an unknown length (0 or less) fits.
func Fits(s Scenario, maxModelLen int) bool {
	return maxModelLen <= 0 || s.MaxInputTokens()+s.OutputTokens <= maxModelLen
}

// ErrNoModel means /v1/models lists no model at all.
var ErrNoModel = errors.New("/v1/models lists no model")

// ChooseModel is slaprobe's one rule for which model a target is measured
// on; probes, the scheduler, daemon sweeps and bench all use it, so they
// measure the same model:
//   - a configured model is used as given; listed reports whether
//     /v1/models lists it (its MaxModelLen is then known);
//   - otherwise the first listed model with a known context length, since
//     vLLM lists LoRA adapters with max_model_len null after their base;
//   - otherwise the first listed model.
//
// It returns ErrNoModel when nothing is configured and nothing is listed.
func ChooseModel(models []ModelInfo, configured string) (m ModelInfo, listed bool, err error) {
	if configured != "" {
		for _, x := range models {
			if x.ID == configured {
				return x, true, nil
			}
		}
		return ModelInfo{ID: configured}, false, nil
	}
	for _, x := range models {
		if x.MaxModelLen > 0 {
			return x, true, nil
		}
	}
	if len(models) > 0 {
		return models[0], true, nil
	}
	return ModelInfo{}, false, ErrNoModel
}

// DetectModel lists t's models and applies ChooseModel with t.Model. When
// the listing fails, a configured model is still returned (with listed
// false) together with the error, so callers can warn and go on.
func DetectModel(ctx context.Context, t Target) (m ModelInfo, listed bool, err error) {
	models, err := ListModels(ctx, t)
	if err != nil {
		if t.Model != "" {
			return ModelInfo{ID: t.Model}, false, err
		}
		return ModelInfo{}, false, err
	}
	return ChooseModel(models, t.Model)
}

// MaxModelIDBytes is the longest model ID taken from /v1/models.
const MaxModelIDBytes = 256

// validModelID accepts a model ID as a label value: not empty, at most
// MaxModelIDBytes, valid UTF-8 without control characters.
func validModelID(id string) bool {
	if id == "" || len(id) > MaxModelIDBytes || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
