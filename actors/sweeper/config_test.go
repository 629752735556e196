package sweeper

import (
	"strings"
	"testing"
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
		{"MaxCopiesPerPass 1", func(c *Config) { c.MaxCopiesPerPass = 1 }, ""},
		{"MaxCopiesPerPass 0", func(c *Config) { c.MaxCopiesPerPass = 0 }, "MaxCopiesPerPass"},
		{"MaxCopiesPerPass 1000000", func(c *Config) { c.MaxCopiesPerPass = 1000000 }, ""},
		{"MaxCopiesPerPass 1000001", func(c *Config) { c.MaxCopiesPerPass = 1000001 }, "MaxCopiesPerPass"},
		{"ParallelAsks 1", func(c *Config) { c.ParallelAsks = 1 }, ""},
		{"ParallelAsks 0", func(c *Config) { c.ParallelAsks = 0 }, "ParallelAsks"},
		{"ParallelAsks 1024", func(c *Config) { c.ParallelAsks = 1024 }, ""},
		{"ParallelAsks 1025", func(c *Config) { c.ParallelAsks = 1025 }, "ParallelAsks"},
		{"QuarantineListMaxCopies 1", func(c *Config) { c.QuarantineListMaxCopies = 1 }, ""},
		{"QuarantineListMaxCopies 0", func(c *Config) { c.QuarantineListMaxCopies = 0 }, "QuarantineListMaxCopies"},
		{"QuarantineListMaxCopies -1", func(c *Config) { c.QuarantineListMaxCopies = -1 }, "QuarantineListMaxCopies"},
		{"QuarantineListMaxCopies 10000", func(c *Config) { c.QuarantineListMaxCopies = 10000 }, ""},
		{"QuarantineListMaxCopies 10001", func(c *Config) { c.QuarantineListMaxCopies = 10001 }, "QuarantineListMaxCopies"},
		{"QuarantineAsksMax 1", func(c *Config) { c.QuarantineAsksMax = 1 }, ""},
		{"QuarantineAsksMax 0", func(c *Config) { c.QuarantineAsksMax = 0 }, "QuarantineAsksMax"},
		{"QuarantineAsksMax 4096", func(c *Config) { c.QuarantineAsksMax = 4096 }, ""},
		{"QuarantineAsksMax 4097", func(c *Config) { c.QuarantineAsksMax = 4097 }, "QuarantineAsksMax"},
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
