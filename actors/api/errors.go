package api

import (
	"errors"
	"fmt"
)

// The errors a Node reports. A Node wraps them with context; the handlers
// find them with errors.Is, so the sentinel, never the text, decides the
// status. Package actors uses these same values as its own sentinels, which
// is how a node can report them without this package importing it.
var (
	// ErrInvalid is a request the node refuses as malformed (400).
	ErrInvalid = errors.New("invalid")
	// ErrNotFound is a topic or member that does not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrConflict is a name already taken (409).
	ErrConflict = errors.New("conflict")
	// ErrGone is a receipt handle that matches no lease any more, or a
	// replayed offset that retention removed (410).
	ErrGone = errors.New("gone")
	// ErrTooLarge is a record body past MaxBodyBytes (413).
	ErrTooLarge = errors.New("too large")
	// ErrUnavailable is a request the node cannot serve now; the client
	// may retry (503).
	ErrUnavailable = errors.New("unavailable")
)

// Refusals that the contract words apart, each a case of one of the above.
var (
	// ErrNoSuchPartition is a partition index the topic does not have.
	ErrNoSuchPartition = fmt.Errorf("no such partition: %w", ErrInvalid)
	// ErrParentNotFound is a fan-out parent that does not exist.
	ErrParentNotFound = fmt.Errorf("parent topic: %w", ErrNotFound)
	// ErrDraining is a produce to a node being decommissioned (rule D6):
	// the client should produce to another node.
	ErrDraining = fmt.Errorf("node is being decommissioned: %w", ErrUnavailable)
	// ErrStopping is a produce to a node that is shutting down.
	ErrStopping = fmt.Errorf("node is shutting down: %w", ErrUnavailable)
	// ErrBacklogFull is a produce while the node holds more accepted
	// records than it may before their owners commit them.
	ErrBacklogFull = fmt.Errorf("ingress backlog full: %w", ErrUnavailable)
	// ErrIngressFull is a produce the ingress WAL's queue has no room for.
	ErrIngressFull = fmt.Errorf("ingress queue full: %w", ErrUnavailable)
	// ErrAckedAheadFull is an ack past the partition's acked-ahead cap:
	// the head of the queue is stuck until it is acked.
	ErrAckedAheadFull = fmt.Errorf("acked-ahead set is full: %w", ErrUnavailable)
)

// InvalidArgument is an ErrInvalid whose reason the client reads, after
// the contract's "invalid argument: " prefix; it keeps its reason however
// the error is wrapped on the way out.
type InvalidArgument struct {
	Reason string
	// Err is the failure the reason came from, if any.
	Err error
}

func (e *InvalidArgument) Error() string { return "invalid argument: " + e.Reason }

// Is makes an InvalidArgument an ErrInvalid.
func (e *InvalidArgument) Is(target error) bool { return target == ErrInvalid }

func (e *InvalidArgument) Unwrap() error { return e.Err }

// Invalid is an InvalidArgument for reason.
func Invalid(reason string) error { return &InvalidArgument{Reason: reason} }

// invalidText is the contract's 400 text for err.
func invalidText(err error) string {
	if ia, ok := errors.AsType[*InvalidArgument](err); ok {
		return ia.Error()
	}
	return "invalid argument: " + err.Error()
}
