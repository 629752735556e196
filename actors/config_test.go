package actors

import (
	"errors"
	"strings"
	"testing"
)

func TestNodeConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := map[string]func(*Config){
		"NodeID":                 func(c *Config) { c.NodeID = "" },
		"TopicDefaultPartitions": func(c *Config) { c.TopicDefaultPartitions = 2 },
		"MaxConsumeWait":         func(c *Config) { c.MaxConsumeWait = c.HTTPWriteTimeout },
		"MaxCommitBatchBytes":    func(c *Config) { c.MaxCommitBatchBytes = c.Log.MaxBodyBytes },
		// Two commits that queued during a sync are written as one batch:
		// together they must fit the log's batch limits.
		"MaxCommitsInFlight*MaxCommitBatchRecords": func(c *Config) { c.MaxCommitsInFlight = 8 },
		"MaxCommitsInFlight*MaxCommitBatchBytes":   func(c *Config) { c.MaxCommitBatchBytes = 10 << 20 },
	}
	for field, mutate := range bad {
		c := DefaultConfig()
		mutate(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s out of range: got %v, want ErrInvalid naming it", field, err)
		}
	}
}
