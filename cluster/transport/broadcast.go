package transport

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// Broadcasts are one-way messages a node sends to every other node, on
// narad.<cluster>.node.<NodeID>.<service>: no reply, no retry, and no
// delivery guarantee beyond NATS's at-most-once. They suit hints only
// (commit notices: a long poll that misses one rescans).

// Publish broadcasts data on this node's subject of service.
func (t *Transport) Publish(service string, data []byte) error {
	subj, err := NodeSubject(t.cfg.Cluster, t.cfg.NodeID, service)
	if err != nil {
		return err
	}
	if t.cut.Load() {
		return nil // cut off: as if lost on the way
	}
	if t.isClosed() {
		return fmt.Errorf("transport: publish %s: %w", subj, ErrClosed)
	}
	if err := t.nc.Publish(subj, data); err != nil {
		return fmt.Errorf("transport: publish %s: %w", subj, err)
	}
	return nil
}

// Watch calls fn with every other node's broadcasts of service, with the
// sending node's id, on the subscription's goroutine one at a time: fn
// must be quick. A node's own broadcasts are not passed to it.
func (t *Transport) Watch(service string, fn func(from string, data []byte)) error {
	if fn == nil {
		return fmt.Errorf("transport: nil watcher for %s: %w", service, ErrInvalid)
	}
	if err := ValidToken("service", service); err != nil {
		return err
	}
	prefix := subjectRoot + "." + t.cfg.Cluster + ".node."
	subj := prefix + "*." + service
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.subjectFreeLocked(subj, "a watcher"); err != nil {
		return err
	}
	sub, err := t.nc.Subscribe(subj, func(m *nats.Msg) {
		from, _, _ := strings.Cut(strings.TrimPrefix(m.Subject, prefix), ".")
		if t.cut.Load() || from == t.cfg.NodeID {
			return
		}
		fn(from, m.Data)
	})
	if err != nil {
		return fmt.Errorf("transport: subscribe %s: %w", subj, err)
	}
	t.subs[subj] = sub
	return nil
}
