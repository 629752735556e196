package partition

import (
	"errors"
	"testing"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// guardRig is a data dir with a topic directory prepared for one
// incarnation, and the node's guard over it.
type guardRig struct {
	t *testing.T
	g Guard
}

func newGuardRig(t *testing.T) *guardRig {
	t.Helper()
	r := &guardRig{t: t, g: Guard{Guards: storage.NewGuards(), DataDir: t.TempDir(), Log: testLogger(t)}}
	if _, err := storage.PrepareTopicDir(r.g.DataDir, "g", 7); err != nil {
		t.Fatal(err)
	}
	return r
}

// staticTopics is a topic record table for Guard.PrepareTopicDir.
type staticTopics map[string]messages.Topic

func (s staticTopics) Topic(name string) (messages.Topic, bool) { t, ok := s[name]; return t, ok }

// rule V10: the preparation re-reads the topic record under the guard and
// refuses unless it names the incarnation the move read, and refuses while
// a partition of another incarnation is open in the directory; otherwise
// it sets a deleted incarnation's directory aside and stamps its own.
func TestRuleV10ThePreparationRereadsTheRecordUnderTheGuard(t *testing.T) {
	r := newGuardRig(t)
	k8 := messages.PartitionKey{Topic: "g", Incarnation: 8, Partition: 0}
	if err := r.g.PrepareTopicDir(staticTopics{"g": {Name: "g", Incarnation: 9}}, k8); !errors.Is(err, ErrGuardRefused) {
		t.Fatalf("prepare for 8 with the record naming 9: got %v, want refused", err)
	}
	if err := r.g.PrepareTopicDir(staticTopics{}, k8); !errors.Is(err, ErrGuardRefused) {
		t.Fatalf("prepare for 8 with no record: got %v, want refused", err)
	}
	r.g.Guards.MarkOpen("g", 7, 1)
	if err := r.g.PrepareTopicDir(staticTopics{"g": {Name: "g", Incarnation: 8}}, k8); !errors.Is(err, ErrGuardRefused) {
		t.Fatalf("prepare for 8 with a partition of 7 open: got %v, want refused", err)
	}
	if inc, _, _ := storage.TopicIncarnation(r.g.DataDir, "g"); inc != 7 {
		t.Fatalf("the marker after refused preparations: got %d, want 7 untouched", inc)
	}
	r.g.Guards.MarkClosed("g", 7, 1)
	if err := r.g.PrepareTopicDir(staticTopics{"g": {Name: "g", Incarnation: 8}}, k8); err != nil {
		t.Fatalf("prepare for 8 with the record naming 8: %v", err)
	}
	if inc, _, _ := storage.TopicIncarnation(r.g.DataDir, "g"); inc != 8 {
		t.Fatalf("the marker after the preparation: got %d, want 8", inc)
	}
	stale, err := storage.StaleDirs(r.g.DataDir)
	if err != nil || len(stale) != 1 || stale[0].Incarnation != 7 {
		t.Fatalf("set aside: got %+v (%v), want incarnation 7's directory", stale, err)
	}
}
