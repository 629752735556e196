package fanout

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
		{"BatchRecords 1", func(c *Config) { c.BatchRecords = 1 }, ""},
		{"BatchRecords 0", func(c *Config) { c.BatchRecords = 0 }, "BatchRecords"},
		{"BatchRecords 65536", func(c *Config) { c.BatchRecords = 65536 }, ""},
		{"BatchRecords 65537", func(c *Config) { c.BatchRecords = 65537 }, "BatchRecords"},
		{"BatchBytes 1KiB", func(c *Config) { c.BatchBytes = 1 << 10 }, ""},
		{"BatchBytes 1KiB-1", func(c *Config) { c.BatchBytes = 1<<10 - 1 }, "BatchBytes"},
		{"BatchBytes 64MiB", func(c *Config) { c.BatchBytes = 64 << 20 }, ""},
		{"BatchBytes 64MiB+1", func(c *Config) { c.BatchBytes = 64<<20 + 1 }, "BatchBytes"},
		{"RetryMin 1ms", func(c *Config) { c.RetryMin = time.Millisecond }, ""},
		{"RetryMin below 1ms", func(c *Config) { c.RetryMin = time.Millisecond - 1 }, "RetryMin"},
		{"RetryMin 1m, RetryMax 1m", func(c *Config) { c.RetryMin, c.RetryMax = time.Minute, time.Minute }, ""},
		{"RetryMin past 1m", func(c *Config) { c.RetryMin, c.RetryMax = time.Minute+1, 2*time.Minute }, "RetryMin"},
		{"RetryMax at RetryMin", func(c *Config) { c.RetryMax = c.RetryMin }, ""},
		{"RetryMax below RetryMin", func(c *Config) { c.RetryMax = c.RetryMin - 1 }, "RetryMax"},
		{"RetryMax 10m", func(c *Config) { c.RetryMax = 10 * time.Minute }, ""},
		{"RetryMax past 10m", func(c *Config) { c.RetryMax = 10*time.Minute + 1 }, "RetryMax"},
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
