package engine

import (
	"fmt"

	dto "github.com/prometheus/client_model/go"
)

// LengthFamilies returns the families that hold the prompt and the output
// tokens of each finished request (histograms) of the engine whose page
// fams is, current name first: what the live length mix (workload: live)
// is read from. A page of no known engine gets vLLM's. why says, for an
// error, where the engine exports them (vLLM always; SGLang only with a
// flag); err is set when the engine exports none (llama.cpp server).
func LengthFamilies(fams map[string]*dto.MetricFamily) (prompt, output []string, why string, err error) {
	f := detect(func(prefix string) bool { return hasPrefix(fams, prefix) })
	if f == nil {
		f = vllmFlavor
	}
	for _, r := range f.rows {
		switch r.signal {
		case sigPromptLength:
			prompt = r.names
		case sigOutputLength:
			output = r.names
		}
	}
	if prompt == nil || output == nil {
		return nil, nil, f.lengths, fmt.Errorf("no length mix from a %s page: %s", f.name, f.lengths)
	}
	return prompt, output, f.lengths, nil
}
