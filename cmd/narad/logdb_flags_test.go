package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// The --raft-logdb-* flags reach the metastore, whose Validate bounds them.
func TestServeRefusesLogDBBoundsOutOfRange(t *testing.T) {
	tests := []struct{ flag, value, want string }{
		{"--raft-logdb-shards", "65", "LogDBShards 65, want 1 to 64"},
		{"--raft-logdb-write-buffer-bytes", "1024", "LogDBWriteBufferBytes 1024, want 256 KiB to 256 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			// Cancelled: were the value not to reach the metastore, the
			// node would give up starting instead of being refused.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := runServe(ctx, []string{"--data", t.TempDir(), "--http", "127.0.0.1:0",
				"--raft", "127.0.0.1:0", "--insecure-raft", tt.flag, tt.value, "--log-level", "error"}, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve %s %s: got %v, want the metastore's refusal %q", tt.flag, tt.value, err, tt.want)
			}
		})
	}
}
