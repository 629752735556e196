package mover

import (
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
)

// TestConfigValidateBounds holds each limit at the edges of its range: the
// bound itself is valid, one step past it is refused with an error naming
// the field. The rest of the config is the default.
func TestConfigValidateBounds(t *testing.T) {
	testnet.CheckValidate(t, DefaultConfig, []testnet.ConfigCase[Config]{
		{Name: "FullScanEvery 0", Edit: func(c *Config) { c.FullScanEvery = 0 }, Field: "FullScanEvery"},
		{Name: "SweepEveryTicks 1", Edit: func(c *Config) { c.SweepEveryTicks = 1 }, Field: ""},
		{Name: "SweepEveryTicks 0", Edit: func(c *Config) { c.SweepEveryTicks = 0 }, Field: "SweepEveryTicks"},
		{Name: "SweepEveryTicks 100000", Edit: func(c *Config) { c.SweepEveryTicks = 100000 }, Field: ""},
		{Name: "SweepEveryTicks 100001", Edit: func(c *Config) { c.SweepEveryTicks = 100001 }, Field: "SweepEveryTicks"},
		{Name: "WorkerMaxRestarts 0", Edit: func(c *Config) { c.WorkerMaxRestarts = 0 }, Field: ""},
		{Name: "WorkerMaxRestarts -1", Edit: func(c *Config) { c.WorkerMaxRestarts = -1 }, Field: "WorkerMaxRestarts"},
		{Name: "WorkerRestartWindow 0", Edit: func(c *Config) { c.WorkerRestartWindow = 0 }, Field: "WorkerRestartWindow"},
		{Name: "WorkerRestartBackoff 0", Edit: func(c *Config) { c.WorkerRestartBackoff = 0 }, Field: "WorkerRestartBackoff"},
		{Name: "ChunkWindow 1", Edit: func(c *Config) { c.ChunkWindow = 1 }, Field: ""},
		{Name: "ChunkWindow 0", Edit: func(c *Config) { c.ChunkWindow = 0 }, Field: "ChunkWindow"},
		{Name: "ChunkWindow 64", Edit: func(c *Config) { c.ChunkWindow = 64 }, Field: ""},
		{Name: "ChunkWindow 65", Edit: func(c *Config) { c.ChunkWindow = 65 }, Field: "ChunkWindow"},
		{Name: "InlineBytes 0", Edit: func(c *Config) { c.InlineBytes = 0 }, Field: ""},
		{Name: "InlineBytes -1", Edit: func(c *Config) { c.InlineBytes = -1 }, Field: "InlineBytes"},
		{Name: "InlineBytes 64KiB", Edit: func(c *Config) { c.InlineBytes = 64 << 10 }, Field: ""},
		{Name: "InlineBytes 64KiB+1", Edit: func(c *Config) { c.InlineBytes = 64<<10 + 1 }, Field: "InlineBytes"},
		{Name: "FlipBatchWindow 0", Edit: func(c *Config) { c.FlipBatchWindow = 0 }, Field: ""},
		{Name: "FlipBatchWindow 1s", Edit: func(c *Config) { c.FlipBatchWindow = time.Second }, Field: ""},
		{Name: "FlipBatchWindow past 1s", Edit: func(c *Config) { c.FlipBatchWindow = time.Second + 1 }, Field: "FlipBatchWindow"},
		{Name: "MaxFlipBatch 0", Edit: func(c *Config) { c.MaxFlipBatch = 0 }, Field: "MaxFlipBatch"},
		{Name: "MaxFlipBatch 10000", Edit: func(c *Config) { c.MaxFlipBatch = 10000 }, Field: ""},
		{Name: "MaxFlipBatch 10001", Edit: func(c *Config) { c.MaxFlipBatch = 10001 }, Field: "MaxFlipBatch"},
		{Name: "InstallBatchWindow -1", Edit: func(c *Config) { c.InstallBatchWindow = -1 }, Field: "InstallBatchWindow"},
		{Name: "InstallBatchWindow past 1s", Edit: func(c *Config) { c.InstallBatchWindow = time.Second + 1 }, Field: "InstallBatchWindow"},
		{Name: "MaxInstallBatch 0", Edit: func(c *Config) { c.MaxInstallBatch = 0 }, Field: "MaxInstallBatch"},
		{Name: "MaxInstallBatch 10001", Edit: func(c *Config) { c.MaxInstallBatch = 10001 }, Field: "MaxInstallBatch"},
	})
}
