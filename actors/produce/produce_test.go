package produce

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/messages"
)

// topicsOf is a replica that has the topics given.
type topicsOf map[string]messages.Topic

func (r topicsOf) Topic(name string) (messages.Topic, bool) { t, ok := r[name]; return t, ok }

// held is a WAL backlog of n records.
type held int64

func (h held) Backlog() (int64, int64) { return int64(h), 0 }

// firstLive is a router whose every owner is alive.
type firstLive struct{}

func (firstLive) LivePartition(_ messages.Topic, p int) int { return p }

// Each refusal a produce can meet before the WAL, in the contract's
// words, and a record that passes them: pinned to the incarnation it was
// checked against, its partition the key's, a made-up key when it had none.
func TestPrepareRecordRefusesAndPins(t *testing.T) {
	ts := topicsOf{
		"t":       {Name: "t", Partitions: 3, Incarnation: 7},
		"delayed": {Name: "delayed", Partitions: 3, Parent: "t", FanoutDelayMs: 1000},
	}
	var stopping atomic.Bool
	mk := func(backlog held) *Intake {
		return New(Deps{Config: Config{NodeID: "n1", MaxBacklogRecords: 10}, Store: ts, Owners: firstLive{}, Backlog: backlog, Stopping: &stopping})
	}
	p := mk(0)
	for _, c := range []struct {
		what string
		rec  api.Record
		want error
	}{
		{"a body past the request's cap", api.Record{Topic: "t", Partition: -1, Body: make([]byte, api.MaxBodyBytes+1)}, errs.ErrTooLarge},
		{"an unknown topic", api.Record{Topic: "nope", Partition: -1}, errs.ErrNotFound},
		{"a delay child", api.Record{Topic: "delayed", Partition: -1}, errs.ErrDelayChild},
		{"a partition the topic lacks", api.Record{Topic: "t", Partition: 3}, errs.ErrNoSuchPartition},
	} {
		if _, _, err := p.prepareRecord(c.rec); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.what, err, c.want)
		}
	}
	if _, _, err := mk(10).prepareRecord(api.Record{Topic: "t", Partition: -1}); !errors.Is(err, errs.ErrBacklogFull) {
		t.Errorf("a full backlog: got %v, want ErrBacklogFull", err)
	}
	stopping.Store(true)
	if _, _, err := p.prepareRecord(api.Record{Topic: "t", Partition: -1}); !errors.Is(err, errs.ErrStopping) {
		t.Errorf("a stopping node: got %v, want ErrStopping", err)
	}
	stopping.Store(false)
	_, wr, err := p.prepareRecord(api.Record{Topic: "t", Partition: -1, Key: "k1", Body: []byte("x")})
	if err != nil || wr.Incarnation != 7 || int(wr.Partition) != PartitionForKey("k1", 3) || string(wr.Key) != "k1" {
		t.Fatalf("a keyed record: got %+v, %v; want incarnation 7, the key's partition", wr, err)
	}
	_, wr, err = p.prepareRecord(api.Record{Topic: "t", Partition: 2})
	if err != nil || wr.Partition != 2 || !strings.HasPrefix(string(wr.Key), "key-") {
		t.Fatalf("a keyless record to partition 2: got %+v, %v; want partition 2 and a made-up key", wr, err)
	}
}

// A draining node refuses every produce before anything else (rule D6).
func TestAdmitRefusesWhileDraining(t *testing.T) {
	var producing atomic.Int64
	p := New(Deps{Config: Config{NodeID: "n1", MaxBacklogRecords: 1}, Draining: func() bool { return true }, Producing: &producing})
	if err := p.Admit(); !errors.Is(err, errs.ErrDraining) {
		t.Fatalf("Admit while draining: got %v, want ErrDraining", err)
	}
	if _, err := p.admitProduce(); !errors.Is(err, errs.ErrDraining) || producing.Load() != 0 {
		t.Fatalf("a produce while draining: got %v with %d counted, want ErrDraining and none", err, producing.Load())
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{MaxBacklogRecords: 0}).Validate(); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("no backlog: got %v, want ErrInvalid", err)
	}
	if err := (Config{MaxBacklogRecords: 1}).Validate(); err != nil {
		t.Fatalf("a backlog of 1: got %v, want nil", err)
	}
}
