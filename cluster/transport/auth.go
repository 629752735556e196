package transport

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
)

// Auth is how a NATS client proves who it is and checks the server. The
// zero value connects without credentials and without TLS, which only an
// open server (a test's) accepts.
type Auth struct {
	// CredsFile is an nkey seed file (what `nats --nkey` takes, and what
	// `narad nats` writes) or a JWT .creds file of a NATS account (a
	// deployment in operator mode); the file's content says which.
	CredsFile string
	// User and Password are plain user/password credentials, the other way
	// a NATS server authorizes clients. Exclusive with CredsFile.
	User, Password string
	// TLS verifies the server against a CA and presents a client
	// certificate; all three files or none.
	TLS TLSFiles
}

// TLSFiles are a CA and a certificate with its key, PEM files: the CA a
// peer's certificate must chain to, and what this side presents.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
}

// Enabled reports whether the files are set.
func (f TLSFiles) Enabled() bool { return f.CAFile != "" || f.CertFile != "" || f.KeyFile != "" }

// Validate refuses a partial set: a CA without a certificate (or the
// reverse) would leave one direction unauthenticated without saying so.
func (f TLSFiles) Validate() error {
	if f.Enabled() && (f.CAFile == "" || f.CertFile == "" || f.KeyFile == "") {
		return fmt.Errorf("TLS CAFile %q, CertFile %q, KeyFile %q: want all three or none: %w",
			f.CAFile, f.CertFile, f.KeyFile, ErrInvalid)
	}
	return nil
}

// Validate reports every problem of a at once; each wraps ErrInvalid.
func (a Auth) Validate() error {
	var errs []error
	if a.CredsFile != "" && a.User != "" {
		errs = append(errs, fmt.Errorf("auth: CredsFile and User both set, want one: %w", ErrInvalid))
	}
	if a.Password != "" && a.User == "" {
		errs = append(errs, fmt.Errorf("auth: Password without User: %w", ErrInvalid))
	}
	if err := a.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("auth: %w", err))
	}
	return errors.Join(errs...)
}

// jwtMarker starts the user JWT of a .creds file; an nkey seed file holds
// only the seed (possibly decorated the same way).
var jwtMarker = []byte("-----BEGIN NATS USER JWT-----")

// Options are the nats.go options that present a's credentials and TLS.
// It reads CredsFile once to tell a seed from a .creds file.
func (a Auth) Options() ([]nats.Option, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	switch {
	case a.CredsFile != "":
		raw, err := os.ReadFile(a.CredsFile)
		if err != nil {
			return nil, fmt.Errorf("auth: read credentials: %w", err)
		}
		isJWT := bytes.Contains(raw, jwtMarker)
		clear(raw) // a seed is a secret: do not keep it around
		if isJWT {
			opts = append(opts, nats.UserCredentials(a.CredsFile))
			break
		}
		opt, err := nats.NkeyOptionFromSeed(a.CredsFile)
		if err != nil {
			return nil, fmt.Errorf("auth: nkey seed %s: %w", a.CredsFile, err)
		}
		opts = append(opts, opt)
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if a.TLS.Enabled() {
		// Both load their files at once, so a bad path fails Connect, and
		// again at each reconnect, so a renewed certificate is picked up.
		opts = append(opts, nats.RootCAs(a.TLS.CAFile), nats.ClientCert(a.TLS.CertFile, a.TLS.KeyFile))
	}
	return opts, nil
}
