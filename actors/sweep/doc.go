// Package sweep is the decision core of the stale-copy sweep (seed 000,
// rules S1-S5 and P6): what becomes of one local copy of a partition this
// node no longer owns. Start with Judge.
//
// Judge(copy) returns a Verdict: defer, reclaim at the position the owner
// vouches for, quarantine, or leave alone. It reads no clock (the caller
// computes the install's age), does no I/O and draws no random numbers. The
// sweep actor around it lists the local copy, asks the owner for its
// listing and move marker, and carries out the verdict under the topic's
// open guard (rule S6), re-checking there that the copy is still at or
// below the vouched position. The order of the checks in Judge is the
// order of the decision table in ARCHITECTURE.md; every case is tested
// alone in judge_test.go, each test naming its rule.
package sweep
