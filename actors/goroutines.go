package actors

import (
	"sync/atomic"
	"time"
)

// changeWatch turns the replica's changes into one message at a time to an
// actor: a change that arrives while the last message is still unhandled
// (the actor has not called handled) sends nothing more, since the
// actor's next pass reads the latest state anyway. A bulk move applies
// thousands of changes a second; without this, each would queue a full
// pass behind the others.
type changeWatch struct{ pending atomic.Bool }

// changePassEvery spaces the passes a changeWatch asks for: a pass reads
// and sorts every assignment the node owns or is targeted with (10,000 at
// seed 003's scale), and a bulk move applies thousands of changes a
// second. 20 ms adds that much to a handover or a move's start and caps
// the passes at 50 a second.
const changePassEvery = 20 * time.Millisecond

// run sends msg to self at each change, at most every changePassEvery,
// until stop is closed.
//
// The next change's channel is taken as soon as one fired, before the
// send and the pause: a change during them closes it, so none is missed.
func (w *changeWatch) run(store watcher, stop <-chan struct{}, send func()) {
	next := store.Changed()
	for {
		select {
		case <-next:
		case <-stop:
			return
		}
		next = store.Changed()
		if !w.pending.Swap(true) {
			send()
		}
		select {
		case <-time.After(changePassEvery):
		case <-stop:
			return
		}
	}
}

// handled is the actor starting the pass a change asked for: the next
// change sends again.
func (w *changeWatch) handled() { w.pending.Store(false) }
