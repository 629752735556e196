package sweeper

import (
	"testing"

	"github.com/naradmq/narad/cluster/testnet"
)

// TestConfigValidateBounds holds each limit at the edges of its range: the
// bound itself is valid, one step past it is refused with an error naming
// the field. The rest of the config is the default.
func TestConfigValidateBounds(t *testing.T) {
	testnet.CheckValidate(t, DefaultConfig, []testnet.ConfigCase[Config]{
		{Name: "MaxCopiesPerPass 1", Edit: func(c *Config) { c.MaxCopiesPerPass = 1 }, Field: ""},
		{Name: "MaxCopiesPerPass 0", Edit: func(c *Config) { c.MaxCopiesPerPass = 0 }, Field: "MaxCopiesPerPass"},
		{Name: "MaxCopiesPerPass 1000000", Edit: func(c *Config) { c.MaxCopiesPerPass = 1000000 }, Field: ""},
		{Name: "MaxCopiesPerPass 1000001", Edit: func(c *Config) { c.MaxCopiesPerPass = 1000001 }, Field: "MaxCopiesPerPass"},
		{Name: "ParallelAsks 1", Edit: func(c *Config) { c.ParallelAsks = 1 }, Field: ""},
		{Name: "ParallelAsks 0", Edit: func(c *Config) { c.ParallelAsks = 0 }, Field: "ParallelAsks"},
		{Name: "ParallelAsks 1024", Edit: func(c *Config) { c.ParallelAsks = 1024 }, Field: ""},
		{Name: "ParallelAsks 1025", Edit: func(c *Config) { c.ParallelAsks = 1025 }, Field: "ParallelAsks"},
		{Name: "QuarantineListMaxCopies 1", Edit: func(c *Config) { c.QuarantineListMaxCopies = 1 }, Field: ""},
		{Name: "QuarantineListMaxCopies 0", Edit: func(c *Config) { c.QuarantineListMaxCopies = 0 }, Field: "QuarantineListMaxCopies"},
		{Name: "QuarantineListMaxCopies -1", Edit: func(c *Config) { c.QuarantineListMaxCopies = -1 }, Field: "QuarantineListMaxCopies"},
		{Name: "QuarantineListMaxCopies 10000", Edit: func(c *Config) { c.QuarantineListMaxCopies = 10000 }, Field: ""},
		{Name: "QuarantineListMaxCopies 10001", Edit: func(c *Config) { c.QuarantineListMaxCopies = 10001 }, Field: "QuarantineListMaxCopies"},
		{Name: "QuarantineAsksMax 1", Edit: func(c *Config) { c.QuarantineAsksMax = 1 }, Field: ""},
		{Name: "QuarantineAsksMax 0", Edit: func(c *Config) { c.QuarantineAsksMax = 0 }, Field: "QuarantineAsksMax"},
		{Name: "QuarantineAsksMax 4096", Edit: func(c *Config) { c.QuarantineAsksMax = 4096 }, Field: ""},
		{Name: "QuarantineAsksMax 4097", Edit: func(c *Config) { c.QuarantineAsksMax = 4097 }, Field: "QuarantineAsksMax"},
	})
}
