package controller

import (
	"strings"
	"testing"
	"time"
)

// TestConfigValidateBounds holds each setting at the edges of its range:
// the bound itself is valid, one step past it is refused with an error
// naming the field. The rest of the config is the default.
func TestConfigValidateBounds(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: got %v, want valid", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string // "" when valid
	}{
		{"MetastoreVoters 1", func(c *Config) { c.MetastoreVoters = 1 }, ""},
		{"MetastoreVoters 0", func(c *Config) { c.MetastoreVoters = 0 }, "MetastoreVoters"},
		{"MetastoreVoters 7", func(c *Config) { c.MetastoreVoters = 7 }, ""},
		{"MetastoreVoters 8", func(c *Config) { c.MetastoreVoters = 8 }, "MetastoreVoters"},
		{"VoterCheckInterval 1ns", func(c *Config) { c.VoterCheckInterval = 1 }, ""},
		{"VoterCheckInterval 0", func(c *Config) { c.VoterCheckInterval = 0 }, "VoterCheckInterval"},
		{"MaxCreatesPerGroup 1", func(c *Config) { c.MaxCreatesPerGroup = 1 }, ""},
		{"MaxCreatesPerGroup 0", func(c *Config) { c.MaxCreatesPerGroup = 0 }, "MaxCreatesPerGroup"},
		{"MaxCreatesPerGroup 1024", func(c *Config) { c.MaxCreatesPerGroup = 1024 }, ""},
		{"MaxCreatesPerGroup 1025", func(c *Config) { c.MaxCreatesPerGroup = 1025 }, "MaxCreatesPerGroup"},
		{"DeadTargetAbortAfter 1ns", func(c *Config) { c.DeadTargetAbortAfter = 1 }, ""},
		{"DeadTargetAbortAfter 0", func(c *Config) { c.DeadTargetAbortAfter = 0 }, "DeadTargetAbortAfter"},
		{"RebalanceInterval 0", func(c *Config) { c.RebalanceInterval = 0 }, "RebalanceInterval"},
		{"RebalanceBusyInterval at RebalanceInterval", func(c *Config) { c.RebalanceBusyInterval = c.RebalanceInterval }, ""},
		{"RebalanceBusyInterval past RebalanceInterval", func(c *Config) { c.RebalanceBusyInterval = c.RebalanceInterval + time.Nanosecond }, "RebalanceBusyInterval"},
		{"RebalanceBusyInterval 0", func(c *Config) { c.RebalanceBusyInterval = 0 }, "RebalanceBusyInterval"},
		{"Rebalance off", func(c *Config) { c.Rebalance = false }, ""},
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
