package testnet

import (
	"testing"
	"time"
)

// pollEvery is how often a wait looks again: often enough that a test
// waits little past the moment, rarely enough that the polling costs
// nothing beside the nodes it watches.
const pollEvery = 10 * time.Millisecond

// Wait polls cond until it holds or within passes, and reports whether it
// held: for a test that fails with what it last saw.
func Wait(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
	return true
}

// Eventually polls cond until it holds, and fails the test naming what it
// waited for when it does not within: a bound on something that must
// happen, never a measure of how long it takes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Wait(within, cond) {
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
}
