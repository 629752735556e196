package actors

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A founding node restarted on its data under another replica id (--peers
// listed in another order) is refused before its metastore opens, with the
// id its data belongs to; under its own id it starts again.
func TestAFoundingNodeRestartedUnderAnotherReplicaIDIsRefused(t *testing.T) {
	tn := newTestNode(t)
	tn.stop()
	other := tn.mcfg
	other.ReplicaID = 2
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, tn.cfg, other, testLogger(t))
	if err == nil {
		n.Stop(context.Background())
		t.Fatal("start on replica 1's data as replica 2: got a running node, want a refusal")
	}
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "belongs to replica id 1, not 2") {
		t.Fatalf("start on replica 1's data as replica 2: got %v, want ErrInvalid naming replica id 1", err)
	}
	tn.start()
}
