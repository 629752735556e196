package fanout

import (
	"fmt"
	"time"
)

// Config is the fan-out's part of the node's configuration (actors.Config
// composes it as Fanout). Every limit has its unit in its name.
type Config struct {
	// BatchRecords and BatchBytes bound one fan-out copy: the records one
	// link reads and commits to its child at once, and so the records in
	// flight per link (one copy at a time). At least one record goes
	// whatever its size. BatchRecords within 1..65,536, BatchBytes within
	// 1 KiB..64 MiB.
	BatchRecords, BatchBytes int
	// RetryMin and RetryMax bound the back-off of a link whose child
	// partition refused or did not answer (owner down, frozen by a move):
	// it doubles from Min to Max, so a down owner costs a request now and
	// then. Min within 1ms..1min, Max within Min..10min.
	RetryMin, RetryMax time.Duration
}

// DefaultConfig is the fan-out's limits as a node runs them.
func DefaultConfig() Config {
	return Config{BatchRecords: 256, BatchBytes: 512 << 10, RetryMin: 50 * time.Millisecond, RetryMax: 2 * time.Second}
}

// Validate reports the first field out of range, naming it.
func (c Config) Validate() error {
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("fanout config: %s %v %s", field, v, why)
	}
	switch {
	case c.BatchRecords < 1 || c.BatchRecords > 65536:
		return bad("BatchRecords", c.BatchRecords, "must be within 1..65536")
	case c.BatchBytes < 1<<10 || c.BatchBytes > 64<<20:
		return bad("BatchBytes", c.BatchBytes, "must be within 1KiB..64MiB")
	case c.RetryMin < time.Millisecond || c.RetryMin > time.Minute:
		return bad("RetryMin", c.RetryMin, "must be within 1ms..1m")
	case c.RetryMax < c.RetryMin || c.RetryMax > 10*time.Minute:
		return bad("RetryMax", c.RetryMax, "must be within RetryMin..10m")
	}
	return nil
}
