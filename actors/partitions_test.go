package actors

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/naradmq/narad/cluster/metastore/metastoretest"
	"github.com/naradmq/narad/storage"
)

// fakeReplica is the tests' metastore replica in memory.
type fakeReplica = metastoretest.Replica

func newFakeReplica() *fakeReplica { return metastoretest.NewReplica() }

// rule K6, on open: a partition whose consumer state holds acked-ahead
// offsets at or past its log's HWM (an install or a recovery that ended
// short of them) forgets them, though its frontier needs no clamp: the
// records later appended at those offsets are delivered, not skipped as
// acked.
func TestRuleK6AnOpenedPartitionForgetsAckedAheadPastItsHWM(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("k", 3)
	for i := range 3 {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/k/produce?partition=0", fmt.Appendf(nil, `"r%d"`, i))
	}
	waitFor(t, func() bool { return hwmOf(t, tn, "k") == 3 })
	tn.stop()
	dir := storage.PartitionPath(tn.cfg.DataDir, "k", 0)
	if err := storage.SaveConsumerState(dir, storage.ConsumerState{Frontier: 0, AckedAhead: []int64{2, 5}}, true); err != nil {
		t.Fatal(err)
	}
	tn.start()
	for i := 3; i < 7; i++ {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/k/produce?partition=0", fmt.Appendf(nil, `"r%d"`, i))
	}
	waitFor(t, func() bool { return hwmOf(t, tn, "k") == 7 })
	var got []int64
	for {
		m := tn.consume("k", "partition=0&wait=0")
		if m == nil {
			break
		}
		got = append(got, m.Offset)
	}
	if want := []int64{1, 3, 4, 5, 6}; !slices.Equal(got, want) {
		t.Fatalf("offsets delivered after an open at HWM 3 with offsets 2 and 5 acked ahead: got %v, want %v (5 was appended after the open)", got, want)
	}
}
