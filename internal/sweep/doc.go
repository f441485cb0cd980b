// Package sweep runs one sweep: it loads a target step by step (closed loop
// at N concurrent streams, then bursts of N requests at once), measures each
// step from the client's side, and turns the steps into the numbers a report
// shows: summaries, scaling efficiency and capacity (the largest N within a
// threshold).
//
// It is not package sweeper. sweeper is the daemon's scheduled job: when to
// sweep, how to stay out of production's way, where the results are kept and
// exported. A one-shot `slaprobe bench` and the daemon's sweeps both call
// Run here. One probe (its request, stream and timings) is package prober;
// sweep imports prober and never the other way.
//
// The files, from the bottom up, each using only those below it: stats.go
// (summaries, quantiles, which statistic a threshold reads), power.go and
// drain.go (what a step reads beside its requests: power, and the engine's
// queue), load.go (the two ways of loading a target), step.go (one step and
// its result), capacity.go (scaling efficiency and the largest N within a
// threshold), capacity_on.go (the largest N on a rule of sweep.capacity_on:
// goodput, or a statistic of a metric), progress.go (the events a caller sees), sweep.go (Options, Run
// and Result).
//
// What a report keeps of a sweep in the same shape, it keeps as these
// types, not a copy: a scenario's ScenarioSpec, its EarlyStop list, a
// step's Dist and ConversationStep, RuleCapacity and Bound (report.json's
// keys are their JSON tags). The rest (StepResult, Capacity) holds more
// than a report keeps, and report.FromSweep maps it.
package sweep
