package metastore

import "errors"

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
	// ErrUnavailable: no leader, the shard is busy or closed, or the
	// proposal timed out. The outcome of a proposal is unknown.
	ErrUnavailable = errors.New("metastore unavailable")
)
