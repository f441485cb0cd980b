package sweep

// This file holds the progress events a sweep sends its caller.

import (
	"time"
)

// ProgressKind is the kind of a ProgressEvent.
type ProgressKind string

// ProgressEvent reports where a sweep is, for progress bars and logs.
type ProgressEvent struct {
	Kind ProgressKind
	StepInfo
	Step  int // 1-based index of this step
	Steps int // steps planned in all; shrinks when a ladder stops early
	// Elapsed is the time since the sweep started; Remaining a rough
	// estimate of the time left (0 when unknown).
	Elapsed, Remaining time.Duration
	Result             *StepResult // ProgressStepFinished only
	Message            string
}
