package controller

import (
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
)

// TestConfigValidateBounds holds each setting at the edges of its range:
// the bound itself is valid, one step past it is refused with an error
// naming the field. The rest of the config is the default.
func TestConfigValidateBounds(t *testing.T) {
	testnet.CheckValidate(t, DefaultConfig, []testnet.ConfigCase[Config]{
		{Name: "MetastoreVoters 1", Edit: func(c *Config) { c.MetastoreVoters = 1 }, Field: ""},
		{Name: "MetastoreVoters 0", Edit: func(c *Config) { c.MetastoreVoters = 0 }, Field: "MetastoreVoters"},
		{Name: "MetastoreVoters 7", Edit: func(c *Config) { c.MetastoreVoters = 7 }, Field: ""},
		{Name: "MetastoreVoters 8", Edit: func(c *Config) { c.MetastoreVoters = 8 }, Field: "MetastoreVoters"},
		{Name: "VoterCheckInterval 1ns", Edit: func(c *Config) { c.VoterCheckInterval = 1 }, Field: ""},
		{Name: "VoterCheckInterval 0", Edit: func(c *Config) { c.VoterCheckInterval = 0 }, Field: "VoterCheckInterval"},
		{Name: "MaxCreatesPerGroup 1", Edit: func(c *Config) { c.MaxCreatesPerGroup = 1 }, Field: ""},
		{Name: "MaxCreatesPerGroup 0", Edit: func(c *Config) { c.MaxCreatesPerGroup = 0 }, Field: "MaxCreatesPerGroup"},
		{Name: "MaxCreatesPerGroup 1024", Edit: func(c *Config) { c.MaxCreatesPerGroup = 1024 }, Field: ""},
		{Name: "MaxCreatesPerGroup 1025", Edit: func(c *Config) { c.MaxCreatesPerGroup = 1025 }, Field: "MaxCreatesPerGroup"},
		{Name: "DeadTargetAbortAfter 1ns", Edit: func(c *Config) { c.DeadTargetAbortAfter = 1 }, Field: ""},
		{Name: "DeadTargetAbortAfter 0", Edit: func(c *Config) { c.DeadTargetAbortAfter = 0 }, Field: "DeadTargetAbortAfter"},
		{Name: "RebalanceInterval 0", Edit: func(c *Config) { c.RebalanceInterval = 0 }, Field: "RebalanceInterval"},
		{Name: "RebalanceBusyInterval at RebalanceInterval", Edit: func(c *Config) { c.RebalanceBusyInterval = c.RebalanceInterval }, Field: ""},
		{Name: "RebalanceBusyInterval past RebalanceInterval", Edit: func(c *Config) { c.RebalanceBusyInterval = c.RebalanceInterval + time.Nanosecond }, Field: "RebalanceBusyInterval"},
		{Name: "RebalanceBusyInterval 0", Edit: func(c *Config) { c.RebalanceBusyInterval = 0 }, Field: "RebalanceBusyInterval"},
		{Name: "Rebalance off", Edit: func(c *Config) { c.Rebalance = false }, Field: ""},
	})
}
