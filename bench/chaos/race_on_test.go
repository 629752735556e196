//go:build race

package main

// raceEnabled skips the short profile under the race detector: three
// nodes and their load would run several times slower, past its bound.
const raceEnabled = true
