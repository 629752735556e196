package actors

import "errors"

// Sentinel errors of the node.
var (
	// ErrInvalid is a bad configuration value or argument.
	ErrInvalid = errors.New("invalid")
	// ErrUnavailable is a request that cannot be served now (shutting down,
	// actor not ready, metastore without a leader); the caller may retry.
	ErrUnavailable = errors.New("unavailable")
	// ErrInvariant is an invariant the code should make impossible, caught
	// where it would have broken (logged at error and counted).
	ErrInvariant = errors.New("invariant broken")
)
