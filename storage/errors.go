package storage

import "errors"

// Sentinel errors. Callers test them with errors.Is; every returned error
// wraps one of these with context.
var (
	// ErrCorrupt marks bytes that fail their checksum or do not decode.
	ErrCorrupt = errors.New("corrupt data")
	// ErrClosed is returned by a Log, WAL or Staging used after Close.
	ErrClosed = errors.New("closed")
	// ErrOutOfRange is an offset below the oldest retained or at/above the HWM.
	ErrOutOfRange = errors.New("offset out of range")
	// ErrTooLarge is a record, key or chunk over its configured limit.
	ErrTooLarge = errors.New("too large")
	// ErrInvalid is a caller error: a bad argument or config value.
	ErrInvalid = errors.New("invalid argument")
	// ErrBroken marks a Log that could not restore its invariants after a
	// failed write; it refuses appends until it is reopened (recovered).
	ErrBroken = errors.New("log broken; reopen to recover")
	// ErrNotFound is a missing segment, staging area, file or partition.
	ErrNotFound = errors.New("not found")
	// ErrVerify is a staged copy that does not recover to the wanted HWM.
	ErrVerify = errors.New("copy does not verify")
	// ErrFull is a bounded queue that is at its limit.
	ErrFull = errors.New("queue full")
	// ErrGuardRefused is an act on a topic's directory that the checks made
	// under its guard (Guards) refused: nothing was changed, and the caller
	// retries or gives up.
	ErrGuardRefused = errors.New("refused under the topic guard")
	// ErrInjected is a write or fsync a Faults failed on purpose (a
	// fault-injection run): nothing was written, or nothing is known durable.
	ErrInjected = errors.New("injected storage fault")
)
