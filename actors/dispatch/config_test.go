package dispatch

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := map[string]func(*Config){
		"CommitRetryInterval":   func(c *Config) { c.CommitRetryInterval = 0 },
		"RerouteGrace":          func(c *Config) { c.RerouteGrace = c.CommitRetryInterval - time.Millisecond },
		"MaxCommitBatchRecords": func(c *Config) { c.MaxCommitBatchRecords = 0 },
		"MaxCommitsInFlight":    func(c *Config) { c.MaxCommitsInFlight = 17 },
	}
	for field, mutate := range bad {
		c := DefaultConfig()
		mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s out of range: got %v, want an error naming it", field, err)
		}
	}
}
