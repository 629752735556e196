package transport

import (
	"errors"
	"fmt"
)

// The package's error sentinels. Every error Request returns wraps at least
// one of them (test with errors.Is); each says what the caller may assume
// about the request's outcome.
var (
	// ErrTimeout: no answer arrived in time (or the caller's context ended,
	// or this node is cut off). The request may or may not have been
	// processed: the outcome is unknown, so it is never retried blindly.
	ErrTimeout = errors.New("transport: no answer in time, outcome unknown")
	// ErrNoResponders: nobody subscribes to the subject, so the node is down
	// (or does not serve that service). The request was not processed.
	ErrNoResponders = errors.New("transport: no responders, node down")
	// ErrNotConnected: this node's NATS connection was down, so the request
	// was never sent. It was not processed.
	ErrNotConnected = errors.New("transport: not connected to NATS, request not sent")
	// ErrRemote: the handler answered with an error. The error is a
	// *RemoteError carrying the handler's status and message.
	ErrRemote = errors.New("transport: remote handler failed")
	// ErrTooLarge: the payload (plus headers) exceeds the connection's max
	// payload. Returned before sending, so nothing was processed; a remote
	// *RemoteError with StatusTooLarge also matches it (its reply was too large).
	// The same payload fails the same way at any node, so sending it
	// elsewhere helps nothing until the server's max payload grows.
	ErrTooLarge = errors.New("transport: payload exceeds max payload")
	// ErrClosed: the transport is closed.
	ErrClosed = errors.New("transport: closed")
	// ErrInvalid: a bad configuration, subject token or registration.
	ErrInvalid = errors.New("transport: invalid")
)

// Status codes the transport itself puts on error replies. Handlers may use
// any code; these are the conventions callers rely on.
const (
	// StatusBadRequest: the request body could not be decoded (HandleJSON).
	StatusBadRequest = 400
	// StatusTooLarge: the handler's reply exceeded the max payload.
	StatusTooLarge = 413
	// StatusInternal: the handler returned a plain error or panicked.
	StatusInternal = 500
	// StatusTimeout: the handler returned an error after its context hit the
	// caller's deadline. The caller turns it into ErrTimeout: the handler
	// may have done part of its work, so the outcome is unknown.
	StatusTimeout = 504
	// StatusUnavailable: the request was refused before any work was done
	// (the node is closing). Handlers that return it promise the same, so
	// NotProcessed treats it as safe to send elsewhere.
	StatusUnavailable = 503
)

// RemoteError is the error a handler answered with. A handler returns one
// (or wraps one) to choose the status; any other error travels as
// StatusInternal with its message. On the caller's side it matches ErrRemote.
type RemoteError struct {
	Status int
	Msg    string
}

func (e *RemoteError) Error() string { return fmt.Sprintf("remote error %d: %s", e.Status, e.Msg) }

// Is makes a RemoteError match ErrRemote, and ErrTooLarge for StatusTooLarge.
func (e *RemoteError) Is(target error) bool {
	return target == ErrRemote || (target == ErrTooLarge && e.Status == StatusTooLarge)
}

// Errorf returns a *RemoteError with the status and a formatted message, for
// handlers.
func Errorf(status int, format string, args ...any) error {
	return &RemoteError{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// NotProcessed reports whether err proves the remote node did not act on the
// request, so it is safe to send it again or elsewhere: no responders, not
// connected, refused as too large before sending, or a StatusUnavailable
// answer. A timeout, a closed transport and every other remote error are
// false: the outcome is unknown or the handler ran.
func NotProcessed(err error) bool {
	if re, ok := errors.AsType[*RemoteError](err); ok {
		return re.Status == StatusUnavailable
	}
	if errors.Is(err, ErrTimeout) {
		return false
	}
	return errors.Is(err, ErrNoResponders) || errors.Is(err, ErrNotConnected) || errors.Is(err, ErrTooLarge)
}
