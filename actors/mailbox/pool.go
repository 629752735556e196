// Package mailbox runs the hot actors' mailboxes (the partitions, the
// dispatcher) on a pool of goroutines that live on between runs: Pool is
// the protoactor dispatcher the node hands their props. Start with Pool.
package mailbox

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
)

// Pool runs the hot actors' mailboxes (partitions, the dispatcher) on
// goroutines that live on between runs. protoactor's default starts a
// goroutine for every run of a mailbox, whose small stack each deep
// Receive grows again by copying: a tenth of a node's CPU under issue 45's
// load went to stack growth and goroutine exits. A run goes to an idle
// worker when there is one, else to a new one, so a Receive that blocks
// never holds another mailbox back; a worker idle for Idle ends.
type Pool struct {
	clock      clock.Clock // times a worker's idle wait
	throughput int
	idle       time.Duration // how long a worker waits for another run
	work       chan func()
	workers    atomic.Int32 // alive, for tests
}

// Idle is how long a worker waits for another run before it ends:
// long enough to live through a load's gaps, short enough that a node
// that went quiet holds no goroutines it does not use.
const Idle = 2 * time.Second

var _ actor.Dispatcher = (*Pool)(nil)

// New is a pool whose runs each process up to throughput
// messages before yielding (protoactor's default is 300), and whose
// workers end after idle without a run on c.
func New(c clock.Clock, throughput int, idle time.Duration) *Pool {
	return &Pool{clock: clock.Or(c), throughput: throughput, idle: idle, work: make(chan func())}
}

func (m *Pool) Throughput() int { return m.throughput }

// Schedule runs fn on an idle worker, or on a new one.
func (m *Pool) Schedule(fn func()) {
	select {
	case m.work <- fn:
	default:
		m.workers.Add(1)
		go m.worker(fn)
	}
}

func (m *Pool) worker(fn func()) {
	defer m.workers.Add(-1)
	idle := clock.NewAlarm(m.clock, m.idle)
	defer idle.Stop()
	for {
		fn()
		select {
		case <-idle.C: // rang during a long run: the wait starts now
		default:
		}
		idle.Reset(m.idle)
		select {
		case fn = <-m.work:
		case <-idle.C:
			return
		}
	}
}
