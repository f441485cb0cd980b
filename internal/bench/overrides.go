package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// Overrides are bench settings given on the command line; each one set
// replaces the config file's `sweep` value, a nil one leaves it.
type Overrides struct {
	ClosedLoop, Burst *string // ladders such as "1,2,4", or "none"
	StepDuration      *time.Duration
	Warmup            *time.Duration
	MaxSafeTTFT       *time.Duration
	Cooldown          *time.Duration
	DrainTimeout      *time.Duration
	Statistic         *string
	BurstRepeat       *int
	MaxConcurrency    *int
	EarlyStopFactor   *float64
	// CapacityOn replaces sweep.capacity_on (--capacity.on, repeated).
	CapacityOn *[]string
	// ConversationHitShare replaces sweep.capacity.conversation_hit_share.
	ConversationHitShare *float64
}

// Apply writes the overrides that are set over sc. A ladder that does not
// parse is an error naming its flag.
func (o Overrides) Apply(sc *config.SweepConfig) error {
	for _, l := range []struct {
		flag string
		v    *string
		dst  *[]int
	}{{"--concurrency", o.ClosedLoop, &sc.ClosedLoop.Concurrency}, {"--burst", o.Burst, &sc.Burst.Concurrency}} {
		if l.v == nil {
			continue
		}
		n, err := ParseLadder(*l.v)
		if err != nil {
			return fmt.Errorf("%s: %w", l.flag, err)
		}
		*l.dst = n
	}
	for _, d := range []struct {
		v   *time.Duration
		dst *model.Duration
	}{{o.StepDuration, &sc.ClosedLoop.Duration}, {o.Warmup, &sc.ClosedLoop.Warmup}, {o.MaxSafeTTFT, &sc.Capacity.MaxSafeTTFT},
		{o.Cooldown, &sc.Cooldown}, {o.DrainTimeout, &sc.Drain.Timeout}} {
		if d.v != nil {
			*d.dst = model.Duration(*d.v)
		}
	}
	set(&sc.Capacity.Statistic, o.Statistic)
	set(&sc.Burst.Repeat, o.BurstRepeat)
	set(&sc.MaxConcurrency, o.MaxConcurrency)
	set(&sc.EarlyStop.Factor, o.EarlyStopFactor)
	if v := o.ConversationHitShare; v != nil && !(*v > 0 && *v <= 1) {
		return fmt.Errorf("--capacity.conversation-hit-share=%g: expected a share in (0, 1], e.g. 0.9", *v)
	}
	set(&sc.Capacity.ConversationHitShare, o.ConversationHitShare)
	if o.CapacityOn != nil {
		if _, err := sweep.ParseCapacityRules(*o.CapacityOn); err != nil {
			return fmt.Errorf("--capacity.on%w", err)
		}
		sc.CapacityOn = append([]string(nil), *o.CapacityOn...)
	}
	return nil
}

func set[T any](dst, v *T) {
	if v != nil {
		*dst = *v
	}
}

// SplitList reads repeated, comma-separated values ("chatbot,rag") into one
// list, dropping empty entries.
func SplitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
	}
	return out
}
