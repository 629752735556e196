package partition

import (
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
)

// TestConfigValidateBounds holds each limit at the edges of its range: the
// bound itself is valid, one step past it is refused with an error naming
// the field. The rest of the config is the default.
func TestConfigValidateBounds(t *testing.T) {
	testnet.CheckValidate(t, DefaultConfig, []testnet.ConfigCase[Config]{
		{Name: "ConsumerFlushInterval 1ns", Edit: func(c *Config) { c.ConsumerFlushInterval = time.Nanosecond }, Field: ""},
		{Name: "ConsumerFlushInterval 0", Edit: func(c *Config) { c.ConsumerFlushInterval = 0 }, Field: "ConsumerFlushInterval"},
		{Name: "LeaseDrainTimeout 0", Edit: func(c *Config) { c.LeaseDrainTimeout = 0 }, Field: ""},
		{Name: "LeaseDrainTimeout -1ns", Edit: func(c *Config) { c.LeaseDrainTimeout = -time.Nanosecond }, Field: "LeaseDrainTimeout"},
		{Name: "MoveChunkReadsInFlight 0", Edit: func(c *Config) { c.MoveChunkReadsInFlight = 0 }, Field: ""},
		{Name: "MoveChunkReadsInFlight -1", Edit: func(c *Config) { c.MoveChunkReadsInFlight = -1 }, Field: "MoveChunkReadsInFlight"},
		{Name: "MoveChunkReadsInFlight 64", Edit: func(c *Config) { c.MoveChunkReadsInFlight = 64 }, Field: ""},
		{Name: "MoveChunkReadsInFlight 65", Edit: func(c *Config) { c.MoveChunkReadsInFlight = 65 }, Field: "MoveChunkReadsInFlight"},
		{Name: "AckMemoryWindow 0", Edit: func(c *Config) { c.AckMemoryWindow = 0 }, Field: ""},
		{Name: "AckMemoryWindow -1ns", Edit: func(c *Config) { c.AckMemoryWindow = -time.Nanosecond }, Field: "AckMemoryWindow"},
		{Name: "AckMemoryWindow 1h", Edit: func(c *Config) { c.AckMemoryWindow = time.Hour }, Field: ""},
		{Name: "AckMemoryWindow 1h+1ns", Edit: func(c *Config) { c.AckMemoryWindow = time.Hour + time.Nanosecond }, Field: "AckMemoryWindow"},
		{Name: "AckMemoryEntriesMax 0", Edit: func(c *Config) { c.AckMemoryEntriesMax = 0 }, Field: ""},
		{Name: "AckMemoryEntriesMax -1", Edit: func(c *Config) { c.AckMemoryEntriesMax = -1 }, Field: "AckMemoryEntriesMax"},
		{Name: "AckMemoryEntriesMax 1<<20", Edit: func(c *Config) { c.AckMemoryEntriesMax = 1 << 20 }, Field: ""},
		{Name: "AckMemoryEntriesMax 1<<20+1", Edit: func(c *Config) { c.AckMemoryEntriesMax = 1<<20 + 1 }, Field: "AckMemoryEntriesMax"},
		{Name: "AckWriteThroughEntriesMax 0", Edit: func(c *Config) { c.AckWriteThroughEntriesMax = 0 }, Field: ""},
		{Name: "AckWriteThroughEntriesMax -1", Edit: func(c *Config) { c.AckWriteThroughEntriesMax = -1 }, Field: "AckWriteThroughEntriesMax"},
		{Name: "AckWriteThroughEntriesMax 1<<16", Edit: func(c *Config) { c.AckWriteThroughEntriesMax = 1 << 16 }, Field: ""},
		{Name: "AckWriteThroughEntriesMax 1<<16+1", Edit: func(c *Config) { c.AckWriteThroughEntriesMax = 1<<16 + 1 }, Field: "AckWriteThroughEntriesMax"},
		{Name: "AckMemoryPersistedMax 0", Edit: func(c *Config) { c.AckMemoryPersistedMax = 0 }, Field: ""},
		{Name: "AckMemoryPersistedMax -1", Edit: func(c *Config) { c.AckMemoryPersistedMax = -1 }, Field: "AckMemoryPersistedMax"},
		{Name: "AckMemoryPersistedMax 1024", Edit: func(c *Config) { c.AckMemoryPersistedMax = 1024 }, Field: ""},
		{Name: "AckMemoryPersistedMax 1025", Edit: func(c *Config) { c.AckMemoryPersistedMax = 1025 }, Field: "AckMemoryPersistedMax"},
		{Name: "LeasePersistedMax 0", Edit: func(c *Config) { c.LeasePersistedMax = 0 }, Field: ""},
		{Name: "LeasePersistedMax -1", Edit: func(c *Config) { c.LeasePersistedMax = -1 }, Field: "LeasePersistedMax"},
		{Name: "LeasePersistedMax 65536", Edit: func(c *Config) { c.LeasePersistedMax = 1 << 16 }, Field: ""},
		{Name: "LeasePersistedMax 65537", Edit: func(c *Config) { c.LeasePersistedMax = 1<<16 + 1 }, Field: "LeasePersistedMax"},
		{Name: "LeaseRestoreSpanMax 0", Edit: func(c *Config) { c.LeaseRestoreSpanMax = 0 }, Field: "LeaseRestoreSpanMax"},
		{Name: "LeaseRestoreSpanMax 0, leases off", Edit: func(c *Config) { c.LeaseRestoreSpanMax, c.LeasePersistedMax = 0, 0 }, Field: ""},
		{Name: "LeaseRestoreSpanMax past the acked-ahead limit", Edit: func(c *Config) { c.LeaseRestoreSpanMax = 1<<22 + 1 }, Field: "LeaseRestoreSpanMax"},
	})
}
