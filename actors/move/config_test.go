package move

import (
	"reflect"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
)

// TestConfigValidateBounds holds each field at the edge of its range: the
// bound itself is valid, one step past it is refused with an error naming
// the field. The rest of the config is the seed's table.
func TestConfigValidateBounds(t *testing.T) {
	testnet.CheckValidate(t, DefaultConfig, []testnet.ConfigCase[Config]{
		{Name: "CatchUpStopBytes 0 stops only at an empty pass", Edit: func(c *Config) { c.CatchUpStopBytes = 0 }, Field: ""},
		{Name: "CatchUpStopBytes -1", Edit: func(c *Config) { c.CatchUpStopBytes = -1 }, Field: "CatchUpStopBytes"},
		{Name: "MaxCatchUpPasses 1", Edit: func(c *Config) { c.MaxCatchUpPasses = 1 }, Field: ""},
		{Name: "MaxCatchUpPasses 0", Edit: func(c *Config) { c.MaxCatchUpPasses = 0 }, Field: "MaxCatchUpPasses"},
		{Name: "MaxPassesWithoutProgress 1", Edit: func(c *Config) { c.MaxPassesWithoutProgress = 1 }, Field: ""},
		{Name: "MaxPassesWithoutProgress 0", Edit: func(c *Config) { c.MaxPassesWithoutProgress = 0 }, Field: "MaxPassesWithoutProgress"},
		{Name: "FreezeTTL 4ms, re-armed every 1ms", Edit: func(c *Config) { c.FreezeTTL = 4 * time.Millisecond }, Field: ""},
		{Name: "FreezeTTL just under 4ms", Edit: func(c *Config) { c.FreezeTTL = 4*time.Millisecond - 1 }, Field: "FreezeTTL"},
		{Name: "FreezeTTL 1ms", Edit: func(c *Config) { c.FreezeTTL = time.Millisecond }, Field: "FreezeTTL"},
		{Name: "ReproposeFor 1ns", Edit: func(c *Config) { c.ReproposeFor = 1 }, Field: ""},
		{Name: "ReproposeFor 0", Edit: func(c *Config) { c.ReproposeFor = 0 }, Field: "ReproposeFor"},
		{Name: "UnknownSettle 1ns", Edit: func(c *Config) { c.UnknownSettle = 1 }, Field: ""},
		{Name: "UnknownSettle 0", Edit: func(c *Config) { c.UnknownSettle = 0 }, Field: "UnknownSettle"},
		{Name: "ForcePromoteAfter 1ns", Edit: func(c *Config) { c.ForcePromoteAfter = 1 }, Field: ""},
		{Name: "ForcePromoteAfter 0", Edit: func(c *Config) { c.ForcePromoteAfter = 0 }, Field: "ForcePromoteAfter"},
		{Name: "RetryAfter 1ns", Edit: func(c *Config) { c.RetryAfter = 1 }, Field: ""},
		{Name: "RetryAfter 0", Edit: func(c *Config) { c.RetryAfter = 0 }, Field: "RetryAfter"},
	})
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
