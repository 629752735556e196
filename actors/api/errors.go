package api

import (
	"errors"
	"net/http"

	"github.com/naradmq/narad/actors/errs"
)

// The errors a Node reports are package errs' (actors/errs), named here
// too so that the handlers and their tests read as before: a Node wraps
// them with context, and the handlers find them with errors.Is, so the
// sentinel, never the text, decides the status.
var (
	ErrInvalid         = errs.ErrInvalid
	ErrNotFound        = errs.ErrNotFound
	ErrConflict        = errs.ErrConflict
	ErrGone            = errs.ErrGone
	ErrTooLarge        = errs.ErrTooLarge
	ErrUnavailable     = errs.ErrUnavailable
	ErrNoSuchPartition = errs.ErrNoSuchPartition
	ErrParentNotFound  = errs.ErrParentNotFound
	ErrDelayChild      = errs.ErrDelayChild
	ErrDraining        = errs.ErrDraining
	ErrStopping        = errs.ErrStopping
	ErrNoSpace         = errs.ErrNoSpace
	ErrBacklogFull     = errs.ErrBacklogFull
	ErrIngressFull     = errs.ErrIngressFull
	ErrAckedAheadFull  = errs.ErrAckedAheadFull
	ErrBusy            = errs.ErrBusy
)

// InvalidArgument is errs.InvalidArgument: an ErrInvalid whose reason the
// client reads.
type InvalidArgument = errs.InvalidArgument

// Refusal is errs.Refusal: a refusal whose reason the client reads as is.
type Refusal = errs.Refusal

// Invalid is an InvalidArgument for reason.
func Invalid(reason string) error { return errs.Invalid(reason) }

// invalidText is the contract's 400 text for err.
func invalidText(err error) string {
	if ia, ok := errors.AsType[*InvalidArgument](err); ok {
		return ia.Error()
	}
	return "invalid argument: " + err.Error()
}

// An answer is the status and text one route gives an error that wraps
// err. Each route keeps its own list, tried in order, because the contract
// words the same sentinel apart per route (§13): a missing partition is
// "invalid partition" to a consume and "partition out of range" to a
// produce. A sentinel that wraps another (ErrDraining wraps
// ErrUnavailable) must come before it.
type answer struct {
	err    error
	status int
	// text is the body's error text; "" answers the node's own reason
	// (invalidText), which is what an ErrInvalid carries.
	text string
}

// writeFailure answers err with the first of answers that it wraps, and
// with status and text when it wraps none of them.
func writeFailure(w http.ResponseWriter, err error, answers []answer, status int, text string) {
	status, text = failure(err, answers, status, text)
	writeError(w, status, text)
}

// failure is the status and text writeFailure answers err with.
func failure(err error, answers []answer, status int, text string) (int, string) {
	for _, a := range answers {
		if errors.Is(err, a.err) {
			status, text = a.status, a.text
			if text == "" {
				text = invalidText(err)
			}
			if r, ok := errors.AsType[*Refusal](err); ok && errors.Is(r.Kind, a.err) {
				text = r.Reason
			}
			break
		}
	}
	return status, text
}
