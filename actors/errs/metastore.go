package errs

import (
	"errors"

	"github.com/naradmq/narad/cluster/metastore"
)

// FromMetastore names a metastore refusal with this package's sentinel,
// keeping its text: an invalid argument's is what the client reads.
func FromMetastore(err error) error {
	switch {
	case errors.Is(err, metastore.ErrExists):
		return kindOf{ErrConflict, err}
	case errors.Is(err, metastore.ErrNotFound):
		return kindOf{ErrNotFound, err}
	case errors.Is(err, metastore.ErrInvalid):
		return InvalidBy(err)
	case errors.Is(err, metastore.ErrUnavailable):
		return kindOf{ErrUnavailable, err}
	}
	return err
}

// InvalidBy is an ErrInvalid whose reason is err's text.
func InvalidBy(err error) error { return &InvalidArgument{Reason: err.Error(), Err: err} }

// kindOf is err, also matching the sentinel kind, with err's text.
type kindOf struct{ kind, err error }

func (k kindOf) Error() string   { return k.err.Error() }
func (k kindOf) Unwrap() []error { return []error{k.kind, k.err} }
