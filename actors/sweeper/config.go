package sweeper

import "fmt"

// Config is the sweeper's part of the node's configuration (actors.Config
// composes it as Sweep). Every limit has its unit in its name.
type Config struct {
	// MaxCopiesPerPass bounds the copies one sweep judges (the rest wait
	// for the next one, in turn), and ParallelAsks the owners it asks at
	// once: after a bulk move a node holds thousands of copies, and a sweep
	// must not flood the owners or hold the disk for long.
	MaxCopiesPerPass int
	ParallelAsks     int
	// QuarantineListMaxCopies bounds the copies set aside (and orphan
	// topic directories) one node lists in an answer of the "quarantine"
	// verb (1,000): the answer is one NATS message, and a node may hold
	// a set-aside copy per partition after a disk-wide failure. Its totals
	// still count every copy.
	QuarantineListMaxCopies int
	// QuarantineAsksMax bounds the quarantine asks the sweeper holds at
	// once (listings waiting for a walk, releases under way): each holds an
	// operator's request open, and past it an ask answers 503 at once
	// rather than queue behind a slow disk.
	QuarantineAsksMax int
}

// DefaultConfig is the sweeper's limits as a node runs them.
func DefaultConfig() Config {
	return Config{MaxCopiesPerPass: 4096, ParallelAsks: 16, QuarantineListMaxCopies: 1000, QuarantineAsksMax: 64}
}

// Validate reports the first field out of range, naming it.
func (c Config) Validate() error {
	bad := func(field string, v int, why string) error {
		return fmt.Errorf("sweeper config: %s %d %s", field, v, why)
	}
	switch {
	case c.MaxCopiesPerPass < 1 || c.MaxCopiesPerPass > 1000000:
		return bad("MaxCopiesPerPass", c.MaxCopiesPerPass, "must be 1 to 1000000")
	case c.ParallelAsks < 1 || c.ParallelAsks > 1024:
		return bad("ParallelAsks", c.ParallelAsks, "must be 1 to 1024")
	case c.QuarantineListMaxCopies < 1 || c.QuarantineListMaxCopies > 10000:
		return bad("QuarantineListMaxCopies", c.QuarantineListMaxCopies, "must be within 1..10000 (an answer is one NATS message)")
	case c.QuarantineAsksMax < 1 || c.QuarantineAsksMax > 4096:
		return bad("QuarantineAsksMax", c.QuarantineAsksMax, "must be within 1..4096")
	}
	return nil
}
