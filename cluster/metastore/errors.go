package metastore

import (
	"errors"
	"fmt"
)

// The package's error sentinels. Every error returned by this package wraps
// exactly one of them (test with errors.Is), plus context.
var (
	// ErrExists: a topic of that name already exists.
	ErrExists = errors.New("already exists")
	// ErrNotFound: the topic or assignment does not exist (or, for a delete
	// by incarnation, is another incarnation).
	ErrNotFound = errors.New("not found")
	// ErrRefused: a compare-and-swap whose expected values did not match.
	// The Store answers refused CAS proposals with a result, not this error;
	// it exists for callers that want to turn a result into an error.
	ErrRefused = errors.New("refused")
	// ErrInvalid: a command that cannot apply (bad input, shrinking
	// partitions) or an invalid configuration. Nothing was changed.
	ErrInvalid = errors.New("invalid")
	// ErrConflict: a fan-out command the topics' roles, the child limit or
	// their schemas refuse.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable: no leader, the shard is busy or closed, or the
	// proposal timed out. The outcome of a proposal is unknown.
	ErrUnavailable = errors.New("metastore unavailable")
)

// RefusedError is a command the state machine refused with a reason a
// client reads (the fan-out refusals). It matches the sentinel of its code.
type RefusedError struct {
	Op     string
	Reason string
	kind   error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("metastore: %s: %s: %v", e.Op, e.Reason, e.kind)
}

func (e *RefusedError) Unwrap() error { return e.kind }
