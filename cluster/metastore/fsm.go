package metastore

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/naradmq/narad/messages"
)

// core is what the adapter needs of a pure state machine (metaState,
// assignState).
type core interface {
	// applyRaft applies one encoded command at a Raft index and returns
	// its result code and result value (a copy, safe to encode unlocked).
	applyRaft(data []byte, index uint64) (messages.ResultCode, any, error)
	lookup(query any) (any, error)
	appliedIndex() uint64
	save(w io.Writer) error
}

func (s *metaState) applyRaft(data []byte, index uint64) (messages.ResultCode, any, error) {
	res, err := s.applyEntry(data, index)
	return res.Code, res, err
}

func (s *assignState) applyRaft(data []byte, index uint64) (messages.ResultCode, any, error) {
	res, err := s.applyEntry(data, index)
	return res.Code, res, err
}

// fsm adapts a pure core to Dragonboat's statemachine.IStateMachine.
//
// How reads are made safe: the adapter owns a RWMutex. Update and
// RecoverFromSnapshot (Dragonboat's apply goroutine) take it for writing;
// Lookup, SaveSnapshot and the Store's local reads take it for reading.
// Dragonboat happens to serialise Update and Lookup of a regular
// IStateMachine too, but local reads do not go through NodeHost.StaleRead:
// routing calls them on every request, they must not fail (StaleRead errors
// before the replica is initialised or after it is closed, and the read
// methods return no error), and they must not depend on an implementation
// detail of Dragonboat's rsm package. The lock is uncontended except while
// an entry applies, which takes microseconds.
type fsm[C core] struct {
	shard uint64
	mu    sync.RWMutex
	state C
	load  func(io.Reader) (C, error)
	// applied mirrors state.appliedIndex() for lock-free Version reads.
	applied atomic.Uint64
	// restores counts RecoverFromSnapshot calls (tests prove recovery ran).
	restores atomic.Int64
	// onApply is called after every apply and restore, outside the lock.
	onApply func(shard, applied uint64)
}

var _ sm.IStateMachine = (*fsm[*metaState])(nil)

func newFSM[C core](shard uint64, state C, load func(io.Reader) (C, error), onApply func(shard, applied uint64)) *fsm[C] {
	return &fsm[C]{shard: shard, state: state, load: load, onApply: onApply}
}

// Update applies one committed entry. It returns an error only for an entry
// this binary must not apply (a newer command version); Dragonboat then
// stops the replica. Every other outcome, refused CAS included, is a result:
// Value is the messages.ResultCode, Data the JSON of the result struct.
func (f *fsm[C]) Update(e sm.Entry) (sm.Result, error) {
	f.mu.Lock()
	code, res, err := f.state.applyRaft(e.Cmd, e.Index)
	applied := f.state.appliedIndex()
	f.mu.Unlock()
	if err != nil {
		return sm.Result{}, err
	}
	data, err := json.Marshal(res)
	if err != nil {
		return sm.Result{}, fmt.Errorf("metastore: shard %d: encode result of entry %d: %w", f.shard, e.Index, err)
	}
	f.applied.Store(applied)
	f.onApply(f.shard, applied)
	return sm.Result{Value: uint64(code), Data: data}, nil
}

// Lookup answers the queries of the core (topicQuery, assignmentQuery, ...)
// for NodeHost.SyncRead.
func (f *fsm[C]) Lookup(q any) (any, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.lookup(q)
}

// view runs fn with the state read-locked; fn must not keep references.
func (f *fsm[C]) view(fn func(C)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
}

func (f *fsm[C]) SaveSnapshot(w io.Writer, _ sm.ISnapshotFileCollection, _ <-chan struct{}) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if err := f.state.save(w); err != nil {
		return fmt.Errorf("metastore: shard %d: save snapshot: %w", f.shard, err)
	}
	return nil
}

func (f *fsm[C]) RecoverFromSnapshot(r io.Reader, _ []sm.SnapshotFile, _ <-chan struct{}) error {
	state, err := f.load(r)
	if err != nil {
		return fmt.Errorf("metastore: shard %d: recover from snapshot: %w", f.shard, err)
	}
	f.mu.Lock()
	f.state = state
	applied := state.appliedIndex()
	// Counted under the lock: a reader of the state sees the count of
	// the restore that made it (Store.OwnerChangesSince relies on it).
	f.restores.Add(1)
	f.mu.Unlock()
	f.applied.Store(applied)
	f.onApply(f.shard, applied)
	return nil
}

func (f *fsm[C]) Close() error { return nil }

// notifier is a broadcast: wait returns a channel that the next notify
// closes; every caller of wait between two notifies shares one channel.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}
