//go:build !race

package actors

// raceSlowdown stretches the harness's waits under the race detector.
const raceSlowdown = 1
