package partition

import (
	"strings"
	"testing"
	"time"
)

// TestConfigValidateBounds holds each limit at the edges of its range: the
// bound itself is valid, one step past it is refused with an error naming
// the field. The rest of the config is the default.
func TestConfigValidateBounds(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: got %v, want valid", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string // "" when valid
	}{
		{"ConsumerFlushInterval 1ns", func(c *Config) { c.ConsumerFlushInterval = time.Nanosecond }, ""},
		{"ConsumerFlushInterval 0", func(c *Config) { c.ConsumerFlushInterval = 0 }, "ConsumerFlushInterval"},
		{"LeaseDrainTimeout 0", func(c *Config) { c.LeaseDrainTimeout = 0 }, ""},
		{"LeaseDrainTimeout -1ns", func(c *Config) { c.LeaseDrainTimeout = -time.Nanosecond }, "LeaseDrainTimeout"},
		{"MoveChunkReadsInFlight 0", func(c *Config) { c.MoveChunkReadsInFlight = 0 }, ""},
		{"MoveChunkReadsInFlight -1", func(c *Config) { c.MoveChunkReadsInFlight = -1 }, "MoveChunkReadsInFlight"},
		{"MoveChunkReadsInFlight 64", func(c *Config) { c.MoveChunkReadsInFlight = 64 }, ""},
		{"MoveChunkReadsInFlight 65", func(c *Config) { c.MoveChunkReadsInFlight = 65 }, "MoveChunkReadsInFlight"},
		{"AckMemoryWindow 0", func(c *Config) { c.AckMemoryWindow = 0 }, ""},
		{"AckMemoryWindow -1ns", func(c *Config) { c.AckMemoryWindow = -time.Nanosecond }, "AckMemoryWindow"},
		{"AckMemoryWindow 1h", func(c *Config) { c.AckMemoryWindow = time.Hour }, ""},
		{"AckMemoryWindow 1h+1ns", func(c *Config) { c.AckMemoryWindow = time.Hour + time.Nanosecond }, "AckMemoryWindow"},
		{"AckMemoryEntriesMax 0", func(c *Config) { c.AckMemoryEntriesMax = 0 }, ""},
		{"AckMemoryEntriesMax -1", func(c *Config) { c.AckMemoryEntriesMax = -1 }, "AckMemoryEntriesMax"},
		{"AckMemoryEntriesMax 1<<20", func(c *Config) { c.AckMemoryEntriesMax = 1 << 20 }, ""},
		{"AckMemoryEntriesMax 1<<20+1", func(c *Config) { c.AckMemoryEntriesMax = 1<<20 + 1 }, "AckMemoryEntriesMax"},
		{"AckWriteThroughEntriesMax 0", func(c *Config) { c.AckWriteThroughEntriesMax = 0 }, ""},
		{"AckWriteThroughEntriesMax -1", func(c *Config) { c.AckWriteThroughEntriesMax = -1 }, "AckWriteThroughEntriesMax"},
		{"AckWriteThroughEntriesMax 1<<16", func(c *Config) { c.AckWriteThroughEntriesMax = 1 << 16 }, ""},
		{"AckWriteThroughEntriesMax 1<<16+1", func(c *Config) { c.AckWriteThroughEntriesMax = 1<<16 + 1 }, "AckWriteThroughEntriesMax"},
		{"AckMemoryPersistedMax 0", func(c *Config) { c.AckMemoryPersistedMax = 0 }, ""},
		{"AckMemoryPersistedMax -1", func(c *Config) { c.AckMemoryPersistedMax = -1 }, "AckMemoryPersistedMax"},
		{"AckMemoryPersistedMax 1024", func(c *Config) { c.AckMemoryPersistedMax = 1024 }, ""},
		{"AckMemoryPersistedMax 1025", func(c *Config) { c.AckMemoryPersistedMax = 1025 }, "AckMemoryPersistedMax"},
		{"LeasePersistedMax 0", func(c *Config) { c.LeasePersistedMax = 0 }, ""},
		{"LeasePersistedMax -1", func(c *Config) { c.LeasePersistedMax = -1 }, "LeasePersistedMax"},
		{"LeasePersistedMax 65536", func(c *Config) { c.LeasePersistedMax = 1 << 16 }, ""},
		{"LeasePersistedMax 65537", func(c *Config) { c.LeasePersistedMax = 1<<16 + 1 }, "LeasePersistedMax"},
		{"LeaseRestoreSpanMax 0", func(c *Config) { c.LeaseRestoreSpanMax = 0 }, "LeaseRestoreSpanMax"},
		{"LeaseRestoreSpanMax 0, leases off", func(c *Config) { c.LeaseRestoreSpanMax, c.LeasePersistedMax = 0, 0 }, ""},
		{"LeaseRestoreSpanMax past the acked-ahead limit", func(c *Config) { c.LeaseRestoreSpanMax = 1<<22 + 1 }, "LeaseRestoreSpanMax"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate: got %v, want nil", err)
			case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)):
				t.Fatalf("Validate: got %v, want an error naming %s", err, tc.field)
			}
		})
	}
}
