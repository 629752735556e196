// Command narad-sim runs the deterministic move simulation
// (actors/move/sim) over many seeds, or replays one with its trace.
//
//	narad-sim -seeds 100000 -workers 2   many seeds; seeds per second
//	narad-sim -seed 75 -trace            one seed, one line per step
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/naradmq/narad/actors/move/sim"
)

func main() {
	seed := flag.Uint64("seed", 0, "run this one seed (0: run -seeds seeds from -from)")
	from := flag.Uint64("from", 1, "first seed of a many-seed run")
	seeds := flag.Uint64("seeds", 1000, "how many seeds to run")
	workers := flag.Int("workers", 2, "seeds run in parallel")
	trace := flag.Bool("trace", false, "print the trace of -seed")
	aim := flag.Bool("aim", false, "add the faults aimed at the protocol's narrowest windows (sim.Config.Aim)")
	fanout := flag.Bool("fanout", false, "model a fan-out link per partition and its cursor sidecars (sim.Config.Fanout)")
	breaks := flag.String("break", "", "comma-separated defects to inject: F3, F9, P4, P2, T1, F2, F7, ABA, Reopen, Confirm, Holder, Stale, Stage, GateClock, CursorAfterHWM, CursorAtTail, MissingCursorAtTail (see sim.Breaks; the cursor ones need -fanout)")
	flag.Parse()
	b, err := parseBreaks(*breaks)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *workers < 1 {
		fmt.Fprintln(os.Stderr, "-workers must be at least 1")
		os.Exit(2)
	}
	base := sim.Config{Breaks: b, Aim: *aim, Fanout: *fanout}
	if *seed != 0 {
		os.Exit(one(*seed, base, *trace))
	}
	os.Exit(many(*from, *seeds, *workers, base, replayFlags(*aim, *fanout, *breaks)))
}

func parseBreaks(s string) (sim.Breaks, error) {
	var b sim.Breaks
	for _, name := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' }) {
		switch strings.ToUpper(strings.TrimSpace(name)) {
		case "F3":
			b.F3 = true
		case "F9":
			b.F9 = true
		case "P4":
			b.P4 = true
		case "T1":
			b.T1 = true
		case "F2":
			b.F2 = true
		case "F7":
			b.F7 = true
		case "P2":
			b.P2 = true
		case "REOPEN":
			b.Reopen = true
		case "ABA":
			b.ABA = true
		case "CONFIRM":
			b.Confirm = true
		case "HOLDER":
			b.Holder = true
		case "CURSORAFTERHWM":
			b.CursorAfterHWM = true
		case "CURSORATTAIL":
			b.CursorAtTail = true
		case "MISSINGCURSORATTAIL":
			b.MissingCursorAtTail = true
		case "STALE":
			b.Stale = true
		case "STAGE":
			b.Stage = true
		case "GATECLOCK":
			b.GateClock = true
		default:
			return b, fmt.Errorf("unknown -break %q: want F3, F9, P4, P2, T1, F2, F7, ABA, Reopen, Confirm, Holder, Stale, Stage, GateClock, CursorAfterHWM, CursorAtTail or MissingCursorAtTail", name)
		}
	}
	return b, nil
}

func one(seed uint64, base sim.Config, trace bool) int {
	cfg := base
	cfg.Seed = seed
	if trace {
		cfg.Trace = os.Stdout
	}
	r := sim.Run(cfg)
	fmt.Printf("seed %d: %d steps, %s simulated, trace hash %016x\n%+v\n", seed, r.Steps, r.SimTime.Round(time.Millisecond), r.Hash, r.Stats)
	if r.Err != nil {
		fmt.Printf("FAIL: %v\n", r.Err)
		return 1
	}
	return 0
}

func many(from, n uint64, workers int, base sim.Config, replay string) int {
	start := time.Now()
	var next, done, failed atomic.Uint64
	next.Store(from)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				s := next.Add(1) - 1
				if s >= from+n {
					return
				}
				cfg := base
				cfg.Seed = s
				r := sim.Run(cfg)
				done.Add(1)
				if r.Err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = r.Err
						fmt.Printf("FAIL: %v\nreplay: go run ./cmd/narad-sim -seed %d -trace%s\n", r.Err, s, replay)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("%d seeds (%d..%d) in %s: %.1f seeds/s with %d workers, %d failed\n", done.Load(), from, from+n-1, el.Round(time.Millisecond), float64(done.Load())/el.Seconds(), workers, failed.Load())
	if failed.Load() > 0 {
		return 1
	}
	return 0
}

// replayFlags are the flags a failing seed's replay line repeats.
func replayFlags(aim, fanout bool, breaks string) string {
	var out string
	if aim {
		out += " -aim"
	}
	if fanout {
		out += " -fanout"
	}
	if breaks != "" {
		out += " -break " + breaks
	}
	return out
}
