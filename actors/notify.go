package actors

import "sync"

// commitNotifier wakes long polls when a partition of their topic commits.
// It is the one piece of memory the API's goroutines and the partition
// actors share, and it carries no state beyond "something changed".
type commitNotifier struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
}

func newCommitNotifier() *commitNotifier {
	return &commitNotifier{chans: map[string]chan struct{}{}}
}

// wait returns a channel closed at the next commit to topic.
func (n *commitNotifier) wait(topic string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.chans[topic]
	if !ok {
		c = make(chan struct{})
		n.chans[topic] = c
	}
	return c
}

// notify wakes every waiter of topic. Topics nobody waits on cost nothing.
func (n *commitNotifier) notify(topic string) {
	n.mu.Lock()
	c, ok := n.chans[topic]
	delete(n.chans, topic)
	n.mu.Unlock()
	if ok {
		close(c)
	}
}
