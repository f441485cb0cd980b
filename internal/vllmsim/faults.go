package vllmsim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FaultHeader is a TEST-ONLY request header that selects a fault for that one request, whatever
// Config.Faults says (Rate is not consulted). Its value is `<name>[=<n>[,<duration>]]`:
//
//	error_status[=CODE]      answer CODE (default Faults.ErrorStatus, else 500) with a vLLM error body
//	error_event[=N]          after N output tokens: data: {"error":…}, then data: [DONE]
//	cut[=N]                  after N output tokens: close the connection without [DONE]
//	stall[=N[,DUR]]          after N produced tokens the request pauses in the engine for DUR
//	                         (default Faults.StallFor, else 1s)
//	omit_usage               no usage objects at all
//	malformed[=N]            after N output tokens: one SSE event with truncated JSON, then go on
//	slow_stream[=DUR]        every token after the first comes DUR late (default
//	                         Faults.AlternateSlowToken, else 50ms)
//	none                     no fault, even if Faults.Rate would pick one
//
// N defaults to the matching Faults field when it is > 0, else 1. N=0 is allowed here: the fault
// fires right after the headers (and the early role chunk), before any token.
const FaultHeader = "X-Slaprobe-Sim-Fault"

// Fault names, as used by FaultHeader and recorded in Trace.Fault.
const (
	FaultErrorStatus = "error_status"
	FaultErrorEvent  = "error_event"
	FaultCut         = "cut"
	FaultStall       = "stall"
	FaultOmitUsage   = "omit_usage"
	FaultMalformed   = "malformed"
	FaultSlowStream  = "slow_stream"
	FaultNone        = "none"
)

// faultPlan is the fault applied to one request.
type faultPlan struct {
	name     string // "" for none
	status   int
	after    int
	stallFor time.Duration
}

// configured lists the faults Config.Faults enables, for random selection.
func (f Faults) configured() []faultPlan {
	var out []faultPlan
	if f.ErrorStatus != 0 {
		out = append(out, faultPlan{name: FaultErrorStatus, status: f.ErrorStatus})
	}
	if f.ErrorEventAfterTokens > 0 {
		out = append(out, faultPlan{name: FaultErrorEvent, after: f.ErrorEventAfterTokens})
	}
	if f.CutAfterTokens > 0 {
		out = append(out, faultPlan{name: FaultCut, after: f.CutAfterTokens})
	}
	if f.StallAfterTokens > 0 {
		out = append(out, faultPlan{name: FaultStall, after: f.StallAfterTokens, stallFor: f.StallFor})
	}
	if f.OmitUsage {
		out = append(out, faultPlan{name: FaultOmitUsage})
	}
	if f.MalformedChunkAfterTokens > 0 {
		out = append(out, faultPlan{name: FaultMalformed, after: f.MalformedChunkAfterTokens})
	}
	return out
}

// parseFaultHeader reads a FaultHeader value.
func parseFaultHeader(v string, f Faults) (faultPlan, error) {
	name, args, hasArgs := strings.Cut(strings.TrimSpace(v), "=")
	name = strings.ToLower(strings.TrimSpace(name))
	var arg1, arg2 string
	if hasArgs {
		arg1, arg2, _ = strings.Cut(args, ",")
		arg1, arg2 = strings.TrimSpace(arg1), strings.TrimSpace(arg2)
	}
	count := func(def int) (int, error) {
		if arg1 == "" {
			if def > 0 {
				return def, nil
			}
			return 1, nil
		}
		n, err := strconv.Atoi(arg1)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s: token count %q, want an integer >= 0", FaultHeader, arg1)
		}
		return n, nil
	}
	p := faultPlan{name: name}
	var err error
	switch name {
	case FaultNone:
		return faultPlan{}, nil
	case FaultErrorStatus:
		p.status = f.ErrorStatus
		if p.status == 0 {
			p.status = 500
		}
		if arg1 != "" {
			p.status, err = strconv.Atoi(arg1)
			if err != nil || p.status < 400 || p.status > 599 {
				return p, fmt.Errorf("%s: status %q, want 400..599", FaultHeader, arg1)
			}
		}
	case FaultErrorEvent:
		p.after, err = count(f.ErrorEventAfterTokens)
	case FaultCut:
		p.after, err = count(f.CutAfterTokens)
	case FaultMalformed:
		p.after, err = count(f.MalformedChunkAfterTokens)
	case FaultStall:
		p.after, err = count(f.StallAfterTokens)
		p.stallFor = f.StallFor
		if p.stallFor <= 0 {
			p.stallFor = time.Second
		}
		if arg2 != "" {
			d, perr := time.ParseDuration(arg2)
			if perr != nil || d <= 0 {
				return p, fmt.Errorf("%s: stall duration %q, want a Go duration > 0", FaultHeader, arg2)
			}
			p.stallFor = d
		}
	case FaultSlowStream:
		p.stallFor = f.AlternateSlowToken
		if p.stallFor <= 0 {
			p.stallFor = 50 * time.Millisecond
		}
		if arg1 != "" {
			d, perr := time.ParseDuration(arg1)
			if perr != nil || d <= 0 {
				return p, fmt.Errorf("%s: token delay %q, want a Go duration > 0", FaultHeader, arg1)
			}
			p.stallFor = d
		}
	case FaultOmitUsage:
	default:
		return p, fmt.Errorf("%s: unknown fault %q, want one of %s", FaultHeader, name,
			strings.Join([]string{FaultErrorStatus, FaultErrorEvent, FaultCut, FaultStall, FaultOmitUsage, FaultMalformed, FaultSlowStream, FaultNone}, ", "))
	}
	return p, err
}
