package metastore

import (
	"encoding/json"
	"fmt"

	"github.com/naradmq/narad/messages"
)

// AssignMachine is an assignment shard's state machine without Raft around
// it: the same decode and apply a replica runs on every committed entry,
// for a caller that orders the entries itself. The move simulator
// (actors/move/sim) is that caller: it plays the Raft log, its leader
// changes and its lost answers, and needs the real compare-and-swaps
// under them. Not safe for concurrent use.
type AssignMachine struct {
	s *assignState
}

// NewAssignMachine is an empty shard.
func NewAssignMachine() *AssignMachine { return &AssignMachine{s: newAssignState()} }

// Apply applies one command as the log entry at index, encoded as a
// proposal would encode it. An error is an entry no replica can apply (a
// newer command version); Raft would halt the shard on it.
func (m *AssignMachine) Apply(cmd messages.AssignCommand, index uint64) (messages.AssignResult, error) {
	data, err := json.Marshal(cmd)
	if err != nil {
		return messages.AssignResult{}, fmt.Errorf("metastore: encode assignment command: %w", err)
	}
	return m.s.applyEntry(data, index)
}

// Get is the assignment of one partition, as a lookup on a replica answers.
func (m *AssignMachine) Get(incarnation uint64, partition int) (messages.Assignment, bool) {
	return m.s.get(incarnation, partition)
}

// Moving is every assignment with a target, sorted.
func (m *AssignMachine) Moving() []messages.Assignment { return m.s.moving() }

// All is every assignment, sorted.
func (m *AssignMachine) All() []messages.Assignment { return m.s.all() }

// Applied is the index of the last entry applied.
func (m *AssignMachine) Applied() uint64 { return m.s.appliedIndex() }
