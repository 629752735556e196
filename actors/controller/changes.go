package controller

import (
	"sync/atomic"
	"time"
)

// changeWatch turns the replica's changes into one changed message at a
// time: a change that arrives while the last message is still unhandled
// (the actor has not called handled) sends nothing more, since the next
// pass reads the latest state anyway. A bulk move applies thousands of
// changes a second; without this, each would queue a full pass behind the
// others. (The root package's partitions supervisor and move runner watch
// the same way with a changeWatch of their own.)
type changeWatch struct{ pending atomic.Bool }

// changePassEvery spaces the passes a changeWatch asks for: 20 ms adds that
// much to a move's end being seen and caps the passes at 50 a second.
const changePassEvery = 20 * time.Millisecond

// run sends at each change, at most every changePassEvery, until stop is
// closed.
//
// The next change's channel is taken as soon as one fired, before the
// send and the pause: a change during them closes it, so none is missed.
func (w *changeWatch) run(store interface{ Changed() <-chan struct{} }, stop <-chan struct{}, send func()) {
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
