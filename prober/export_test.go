package prober

// TimingAttempts gives the external tests (package prober_test) the retry
// helper of the timing-sensitive tests.
var TimingAttempts = timingAttempts
