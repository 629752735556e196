package transport

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
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

// publicKey is the public key of the user seed in raw, an nkey seed file
// or a .creds file (whose seed follows its JWT).
func publicKey(raw []byte) (string, error) {
	kp, err := nkeys.ParseDecoratedNKey(raw)
	if err != nil {
		return "", fmt.Errorf("no user seed: %w: %w", err, ErrInvalid)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return "", fmt.Errorf("no user seed: %w", ErrInvalid)
	}
	return pub, nil
}

// jwtMarker starts the user JWT of a .creds file; an nkey seed file holds
// only the seed (possibly decorated the same way).
var jwtMarker = []byte("-----BEGIN NATS USER JWT-----")

// Options are the nats.go options that present a's credentials and TLS,
// and take replies under the user's own inbox (InboxPrefix): a secured
// server lets each identity subscribe there only. It reads CredsFile once
// to tell a seed from a .creds file and to learn the user's public key.
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
		user, err := publicKey(raw)
		clear(raw) // a seed is a secret: do not keep it around
		if err != nil {
			return nil, fmt.Errorf("auth: %s: %w", a.CredsFile, err)
		}
		opts = append(opts, nats.CustomInboxPrefix(InboxPrefix(user)))
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
		// A user name that is not one subject token keeps NATS's own
		// _INBOX: the deployment's permissions, not ours, govern it.
		if ValidToken("NATS user", a.User) == nil {
			opts = append(opts, nats.CustomInboxPrefix(InboxPrefix(a.User)))
		}
	}
	if a.TLS.Enabled() {
		// Both load their files at once, so a bad path fails Connect, and
		// again at each reconnect, so a renewed certificate is picked up.
		opts = append(opts, nats.RootCAs(a.TLS.CAFile), nats.ClientCert(a.TLS.CertFile, a.TLS.KeyFile))
	}
	return opts, nil
}
