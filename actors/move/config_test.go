package move

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestConfigValidateBounds holds each field at the edge of its range: the
// bound itself is valid, one step past it is refused with an error naming
// the field. The rest of the config is the seed's table.
func TestConfigValidateBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string // "" when valid
	}{
		{"CatchUpStopBytes 0 stops only at an empty pass", func(c *Config) { c.CatchUpStopBytes = 0 }, ""},
		{"CatchUpStopBytes -1", func(c *Config) { c.CatchUpStopBytes = -1 }, "CatchUpStopBytes"},
		{"MaxCatchUpPasses 1", func(c *Config) { c.MaxCatchUpPasses = 1 }, ""},
		{"MaxCatchUpPasses 0", func(c *Config) { c.MaxCatchUpPasses = 0 }, "MaxCatchUpPasses"},
		{"MaxPassesWithoutProgress 1", func(c *Config) { c.MaxPassesWithoutProgress = 1 }, ""},
		{"MaxPassesWithoutProgress 0", func(c *Config) { c.MaxPassesWithoutProgress = 0 }, "MaxPassesWithoutProgress"},
		{"FreezeTTL 4ms, re-armed every 1ms", func(c *Config) { c.FreezeTTL = 4 * time.Millisecond }, ""},
		{"FreezeTTL just under 4ms", func(c *Config) { c.FreezeTTL = 4*time.Millisecond - 1 }, "FreezeTTL"},
		{"FreezeTTL 1ms", func(c *Config) { c.FreezeTTL = time.Millisecond }, "FreezeTTL"},
		{"ReproposeFor 1ns", func(c *Config) { c.ReproposeFor = 1 }, ""},
		{"ReproposeFor 0", func(c *Config) { c.ReproposeFor = 0 }, "ReproposeFor"},
		{"UnknownSettle 1ns", func(c *Config) { c.UnknownSettle = 1 }, ""},
		{"UnknownSettle 0", func(c *Config) { c.UnknownSettle = 0 }, "UnknownSettle"},
		{"ForcePromoteAfter 1ns", func(c *Config) { c.ForcePromoteAfter = 1 }, ""},
		{"ForcePromoteAfter 0", func(c *Config) { c.ForcePromoteAfter = 0 }, "ForcePromoteAfter"},
		{"RetryAfter 1ns", func(c *Config) { c.RetryAfter = 1 }, ""},
		{"RetryAfter 0", func(c *Config) { c.RetryAfter = 0 }, "RetryAfter"},
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

// rule C3: New is a move with no pass behind it, the state Start begins
// from, so the first pass is never counted as one without progress.
func TestNewIsTheStateAStartBeginsFrom(t *testing.T) {
	started, fx := Step(DefaultConfig(), New(), 0, Start{})
	if !reflect.DeepEqual(fx, []any{Fetch{Attempt: 1}}) {
		t.Fatalf("Start: got effects %#v, want one Fetch, the first request", fx)
	}
	started.Asking, started.Attempt = false, 0 // the Fetch is on its way: the one difference
	if got := New(); !reflect.DeepEqual(got, started) {
		t.Fatalf("New: got %+v, want the started state %+v", got, started)
	}
}
