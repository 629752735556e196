// Package errs holds the errors that cross the node's packages: one
// sentinel per kind of refusal (invalid, not found, conflict, gone, too
// large, unavailable), the cases the client contract words apart, and
// the two error types whose reason a client reads. Any package may wrap
// them; the HTTP layer (actors/api) translates them into statuses and
// texts, so no package below it imports the HTTP layer.
package errs

import (
	"errors"
	"fmt"
)

// The kinds of refusal. A package wraps them with context; the HTTP layer
// finds them with errors.Is, so the sentinel, never the text, decides the
// status.
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
	// ErrUnauthenticated is an unknown user or a wrong password: the two
	// are never told apart (401).
	ErrUnauthenticated = errors.New("unauthenticated")
)

// Refusals that the contract words apart, each a case of one of the above.
var (
	// ErrNoSuchPartition is a partition index the topic does not have.
	ErrNoSuchPartition = fmt.Errorf("no such partition: %w", ErrInvalid)
	// ErrParentNotFound is a fan-out parent that does not exist.
	ErrParentNotFound = fmt.Errorf("parent topic: %w", ErrNotFound)
	// ErrDelayChild is a direct produce to a fan-out child with a delay:
	// its records come only from its parent, each after the delay.
	ErrDelayChild = fmt.Errorf("direct produce to a delay child: %w", ErrConflict)
	// ErrDraining is a produce to a node being decommissioned (rule D6):
	// the client should produce to another node.
	ErrDraining = fmt.Errorf("node is being decommissioned: %w", ErrUnavailable)
	// ErrStopping is a produce to a node that is shutting down.
	ErrStopping = fmt.Errorf("node is shutting down: %w", ErrUnavailable)
	// ErrNoSpace is a produce the node's disk had no space for: the record
	// is not accepted, another node may take it.
	ErrNoSpace = fmt.Errorf("no space left on the node's disk: %w", ErrUnavailable)
	// ErrBacklogFull is a produce while the node holds more accepted
	// records than it may before their owners commit them.
	ErrBacklogFull = fmt.Errorf("ingress backlog full: %w", ErrUnavailable)
	// ErrIngressFull is a produce the ingress WAL's queue has no room for.
	ErrIngressFull = fmt.Errorf("ingress queue full: %w", ErrUnavailable)
	// ErrAckedAheadFull is an ack past the partition's acked-ahead cap:
	// the head of the queue is stuck until it is acked.
	ErrAckedAheadFull = fmt.Errorf("acked-ahead set is full: %w", ErrUnavailable)
	// ErrBusy is a long poll or a connection past the node's cap on them:
	// the client should retry after a pause (503 with Retry-After).
	ErrBusy = fmt.Errorf("node at its cap of waiting clients: %w", ErrUnavailable)
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

// Refusal is a refusal whose reason the client reads as is (a fan-out
// conflict, a child not attached); Kind, ErrConflict or ErrNotFound,
// decides the status.
type Refusal struct {
	Kind   error
	Reason string
}

func (e *Refusal) Error() string { return e.Reason }

func (e *Refusal) Unwrap() error { return e.Kind }

// Invalid is an InvalidArgument for reason.
func Invalid(reason string) error { return &InvalidArgument{Reason: reason} }
