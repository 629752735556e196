package mover

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
		{"FullScanEvery 0", func(c *Config) { c.FullScanEvery = 0 }, "FullScanEvery"},
		{"SweepEveryTicks 1", func(c *Config) { c.SweepEveryTicks = 1 }, ""},
		{"SweepEveryTicks 0", func(c *Config) { c.SweepEveryTicks = 0 }, "SweepEveryTicks"},
		{"SweepEveryTicks 100000", func(c *Config) { c.SweepEveryTicks = 100000 }, ""},
		{"SweepEveryTicks 100001", func(c *Config) { c.SweepEveryTicks = 100001 }, "SweepEveryTicks"},
		{"WorkerMaxRestarts 0", func(c *Config) { c.WorkerMaxRestarts = 0 }, ""},
		{"WorkerMaxRestarts -1", func(c *Config) { c.WorkerMaxRestarts = -1 }, "WorkerMaxRestarts"},
		{"WorkerRestartWindow 0", func(c *Config) { c.WorkerRestartWindow = 0 }, "WorkerRestartWindow"},
		{"WorkerRestartBackoff 0", func(c *Config) { c.WorkerRestartBackoff = 0 }, "WorkerRestartBackoff"},
		{"ChunkWindow 1", func(c *Config) { c.ChunkWindow = 1 }, ""},
		{"ChunkWindow 0", func(c *Config) { c.ChunkWindow = 0 }, "ChunkWindow"},
		{"ChunkWindow 64", func(c *Config) { c.ChunkWindow = 64 }, ""},
		{"ChunkWindow 65", func(c *Config) { c.ChunkWindow = 65 }, "ChunkWindow"},
		{"InlineBytes 0", func(c *Config) { c.InlineBytes = 0 }, ""},
		{"InlineBytes -1", func(c *Config) { c.InlineBytes = -1 }, "InlineBytes"},
		{"InlineBytes 64KiB", func(c *Config) { c.InlineBytes = 64 << 10 }, ""},
		{"InlineBytes 64KiB+1", func(c *Config) { c.InlineBytes = 64<<10 + 1 }, "InlineBytes"},
		{"FlipBatchWindow 0", func(c *Config) { c.FlipBatchWindow = 0 }, ""},
		{"FlipBatchWindow 1s", func(c *Config) { c.FlipBatchWindow = time.Second }, ""},
		{"FlipBatchWindow past 1s", func(c *Config) { c.FlipBatchWindow = time.Second + 1 }, "FlipBatchWindow"},
		{"MaxFlipBatch 0", func(c *Config) { c.MaxFlipBatch = 0 }, "MaxFlipBatch"},
		{"MaxFlipBatch 10000", func(c *Config) { c.MaxFlipBatch = 10000 }, ""},
		{"MaxFlipBatch 10001", func(c *Config) { c.MaxFlipBatch = 10001 }, "MaxFlipBatch"},
		{"InstallBatchWindow -1", func(c *Config) { c.InstallBatchWindow = -1 }, "InstallBatchWindow"},
		{"InstallBatchWindow past 1s", func(c *Config) { c.InstallBatchWindow = time.Second + 1 }, "InstallBatchWindow"},
		{"MaxInstallBatch 0", func(c *Config) { c.MaxInstallBatch = 0 }, "MaxInstallBatch"},
		{"MaxInstallBatch 10001", func(c *Config) { c.MaxInstallBatch = 10001 }, "MaxInstallBatch"},
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
