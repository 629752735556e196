package fanout

import (
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// Links tells a partition actor the fan-out links of its topic as the
// local replica now has them (the partitions supervisor sends it on a
// change, Links alone), and the partition actor tells its fan-out actor
// the same with the anchored cursors and its HWM.
type Links struct {
	Links   []messages.ChildLink
	Cursors map[string]int64
	HWM     int64
}

// Read asks the partition actor for committed records from offset From
// on, at most Max of them and about Bytes (one record at least). The
// fan-out actor sends it as a request (*Read); the answer is Records.
type Read struct {
	Child string
	Epoch uint64
	From  int64
	Max   int
	Bytes int
}

// Records answers Read. Gone: From is below the oldest retained offset,
// which Oldest names.
type Records struct {
	Child  string
	Epoch  uint64
	From   int64
	Recs   []storage.Record
	HWM    int64
	Oldest int64
	Gone   bool
	Err    error
}

// Advance tells the partition actor that the child committed every
// record before Offset: its cursor may move there.
type Advance struct {
	Child  string
	Epoch  uint64
	Offset int64
}

// Hello is a fan-out actor's first word to its partition actor, which
// answers with Links: after a restart (a panic) it knows none.
type Hello struct{}

// Wake tells the fan-out actor the partition's HWM moved.
type Wake struct{ HWM int64 }

// timer wakes the fan-out actor after a back-off or a delay.
type timer struct{}

// sent is a copy goroutine's outcome: the groups still to commit (empty
// when every one committed).
type sent struct {
	child   string
	epoch   uint64
	upto    int64
	pending []group
	err     error
}
