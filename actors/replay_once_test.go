package actors

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/naradmq/narad/storage"
)

// A node that dies after its partition committed a record and before its
// ingress WAL persisted the record's release replays the record at its
// next start. The partition finds it among what it committed, by the WAL
// life and seq it came under, and answers it committed without storing it
// again; a record the replay sends that never reached the partition is
// stored as always. (The dispatcher here is a rig over its own WAL, so the
// WAL "as the crash left it" is a copy taken before the first commit.)
func TestARecordCommittedBeforeACrashIsStoredOnceAfterTheReplay(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("once", 3)
	inc := tn.incarnationOf("once")
	first := newDispatcherRig(t, tn, nil).toNode()
	committed := first.appendRecord(storage.WALRecord{Topic: "once", Incarnation: inc, Body: []byte("committed before the crash")})
	crashed := filepath.Join(t.TempDir(), "wal")
	if err := os.CopyFS(crashed, os.DirFS(first.walDir)); err != nil {
		t.Fatal(err)
	}
	first.start()
	waitFor(t, func() bool { return first.wal.CommittedThrough() >= committed.Seq })

	next := newDispatcherRigOn(t, tn, crashed, nil).toNode()
	never := next.appendRecord(storage.WALRecord{Topic: "once", Incarnation: inc, Body: []byte("replayed, never committed")})
	already := tn.n.metrics.commitsAlreadyIn.Get()
	next.start()
	waitFor(t, func() bool { return next.wal.CommittedThrough() >= never.Seq })

	want := []string{"committed before the crash", "replayed, never committed"}
	if got := tn.bodiesAt("once", inc, 0); !slices.Equal(got, want) {
		t.Fatalf("partition after the replay: got %q, want %q", got, want)
	}
	if got := tn.n.metrics.commitsAlreadyIn.Get() - already; got != 1 {
		t.Fatalf("narad_commit_records_already_committed_total: got %d more, want 1", got)
	}
}
