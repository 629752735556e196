package actors

import (
	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/partition"
)

// Sentinel errors of the node. Those a client can see are package api's
// values under this package's names: the API and the admin verbs map them
// to answers, and api cannot import this package.
var (
	// ErrInvalid is a bad configuration value or argument.
	ErrInvalid = api.ErrInvalid
	// ErrUnavailable is a request that cannot be served now (shutting down,
	// actor not ready, metastore without a leader); the caller may retry.
	ErrUnavailable = api.ErrUnavailable
	// ErrNotFound is a topic, partition or member that does not exist.
	ErrNotFound = api.ErrNotFound
	// ErrConflict is a topic name already taken.
	ErrConflict = api.ErrConflict
	// ErrGone is a lease that no longer matches, or a record retention
	// removed.
	ErrGone = api.ErrGone
	// ErrTooLarge is a record body larger than the node takes.
	ErrTooLarge = api.ErrTooLarge
	// ErrInvariant is an invariant the code should make impossible, caught
	// where it would have broken (logged at error and counted): the
	// partition actors' own sentinel, so that one error names every break.
	ErrInvariant = partition.ErrInvariant
)

// invalid is an ErrInvalid whose reason a client reads as is.
func invalid(reason string) error { return api.Invalid(reason) }

// invalidBy is an ErrInvalid whose reason is err's text.
func invalidBy(err error) error { return errs.InvalidBy(err) }

// fromMetastore names a metastore refusal with the node's sentinel,
// keeping its text (errs.FromMetastore).
func fromMetastore(err error) error { return errs.FromMetastore(err) }
