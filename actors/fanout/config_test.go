package fanout

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
		{Name: "BatchRecords 1", Edit: func(c *Config) { c.BatchRecords = 1 }, Field: ""},
		{Name: "BatchRecords 0", Edit: func(c *Config) { c.BatchRecords = 0 }, Field: "BatchRecords"},
		{Name: "BatchRecords 65536", Edit: func(c *Config) { c.BatchRecords = 65536 }, Field: ""},
		{Name: "BatchRecords 65537", Edit: func(c *Config) { c.BatchRecords = 65537 }, Field: "BatchRecords"},
		{Name: "BatchBytes 1KiB", Edit: func(c *Config) { c.BatchBytes = 1 << 10 }, Field: ""},
		{Name: "BatchBytes 1KiB-1", Edit: func(c *Config) { c.BatchBytes = 1<<10 - 1 }, Field: "BatchBytes"},
		{Name: "BatchBytes 64MiB", Edit: func(c *Config) { c.BatchBytes = 64 << 20 }, Field: ""},
		{Name: "BatchBytes 64MiB+1", Edit: func(c *Config) { c.BatchBytes = 64<<20 + 1 }, Field: "BatchBytes"},
		{Name: "RetryMin 1ms", Edit: func(c *Config) { c.RetryMin = time.Millisecond }, Field: ""},
		{Name: "RetryMin below 1ms", Edit: func(c *Config) { c.RetryMin = time.Millisecond - 1 }, Field: "RetryMin"},
		{Name: "RetryMin 1m, RetryMax 1m", Edit: func(c *Config) { c.RetryMin, c.RetryMax = time.Minute, time.Minute }, Field: ""},
		{Name: "RetryMin past 1m", Edit: func(c *Config) { c.RetryMin, c.RetryMax = time.Minute+1, 2*time.Minute }, Field: "RetryMin"},
		{Name: "RetryMax at RetryMin", Edit: func(c *Config) { c.RetryMax = c.RetryMin }, Field: ""},
		{Name: "RetryMax below RetryMin", Edit: func(c *Config) { c.RetryMax = c.RetryMin - 1 }, Field: "RetryMax"},
		{Name: "RetryMax 10m", Edit: func(c *Config) { c.RetryMax = 10 * time.Minute }, Field: ""},
		{Name: "RetryMax past 10m", Edit: func(c *Config) { c.RetryMax = 10*time.Minute + 1 }, Field: "RetryMax"},
	})
}
