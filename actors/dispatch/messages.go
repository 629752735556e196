package dispatch

import (
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// Record hands the dispatcher a record that is durable in the ingress WAL
// (the node's Produce sends it once the append returned).
type Record struct {
	Rec storage.WALRecord
}

// Records hands the dispatcher many records that are durable in the
// ingress WAL at once (a produce batch): one message for them all, taken
// in order as Record would take each.
type Records struct {
	Recs []storage.WALRecord
}

// dispatchTick is the dispatcher's own timer: retry held commits, compact
// the WAL.
type dispatchTick struct{}

// commitDone is the outcome of one commit request, delivered back to the
// dispatcher in its own context.
type commitDone struct {
	key messages.PartitionKey
	// owner is the node the commit was sent to, as the replica read when
	// it was sent.
	owner string
	batch []storage.WALRecord
	res   *messages.CommitResult
	err   error
}
