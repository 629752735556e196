package auth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// AdminUser is the root user seeded at first cluster start.
const AdminUser = "admin"

// seedInterval is how often a node looks again whether admin exists
// (and, on the metadata leader, creates it).
const seedInterval = time.Second

// Store is what Accounts needs of the metastore replica: the users as the
// local replica has them, the proposals that change them, and whether
// this replica leads the metadata shard (only the leader seeds admin).
type Store interface {
	User(name string) (messages.User, bool)
	Users() []messages.User
	CreateUser(ctx context.Context, u messages.User) (messages.User, error)
	DeleteUser(ctx context.Context, name string) (messages.User, error)
	SetUserGrants(ctx context.Context, c messages.SetUserGrants) (messages.User, error)
	SetUserPassword(ctx context.Context, c messages.SetUserPassword) (messages.User, error)
	Leader(shard uint64) (replicaID uint64, ok bool)
	ReplicaID() uint64
}

// Config is the users' settings: the seeded admin's password ("" makes
// one up and writes it to AdminPasswordFile), bcrypt's cost, and how long
// one proposal of the seed may take.
type Config struct {
	AdminPassword string
	// AdminPasswordFile is where a generated admin password is written
	// (mode 0600), never to the log, which is kept and shipped far more
	// widely than the node's data directory.
	AdminPasswordFile string
	PasswordHashCost  int
	RequestTimeout    time.Duration
}

// Validate reports a cost bcrypt does not take.
func (c Config) Validate() error {
	if c.PasswordHashCost < bcrypt.MinCost || c.PasswordHashCost > bcrypt.MaxCost {
		return fmt.Errorf("PasswordHashCost %d must be within 4..31 (bcrypt's costs): %w", c.PasswordHashCost, errs.ErrInvalid)
	}
	return nil
}

// Accounts are the users and their grants over the metastore: a login
// checked against the local replica's record by Credentials, the changes
// proposed with the hash and the time stamps the node makes, and the root
// user seeded once (SeedAdmin). The node embeds it, so its methods are the
// node's own (api.Users).
type Accounts struct{ deps AccountsDeps }

// AccountsDeps is what Accounts needs of its node.
type AccountsDeps struct {
	Config Config
	Store  Store
	Creds  *Credentials
	Log    *slog.Logger
	// Clock stamps the records' times, which clients read beside their own
	// (the wall clock in a node), and paces the seed's looks.
	Clock clock.Clock
}

// NewAccounts is the users over d.
func NewAccounts(d AccountsDeps) Accounts { return Accounts{deps: d} }

// Authenticate checks name and password against the local replica's
// record: errs.ErrUnauthenticated for an unknown user and a wrong password
// alike.
func (a *Accounts) Authenticate(ctx context.Context, name, password string) (messages.UserInfo, error) {
	u, ok := a.deps.Store.User(name)
	good, err := a.deps.Creds.Verify(ctx, name, password, u.PasswordHash, ok)
	switch {
	case err != nil:
		return messages.UserInfo{}, fmt.Errorf("verify password of user %s: %w", name, err)
	case !good:
		return messages.UserInfo{}, fmt.Errorf("user %s: %w", name, errs.ErrUnauthenticated)
	}
	return userInfo(u), nil
}

// KnownLogin is name's record when password is one Credentials verified
// against name's current hash and still remembers: no slow hash runs.
func (a *Accounts) KnownLogin(name, password string) (messages.UserInfo, bool) {
	u, ok := a.deps.Store.User(name)
	if !ok || !a.deps.Creds.Known(name, password, u.PasswordHash) {
		return messages.UserInfo{}, false
	}
	return userInfo(u), true
}

func userInfo(u messages.User) messages.UserInfo {
	return messages.UserInfo{Username: u.Username, Grants: u.Grants, Root: u.Root, CreatedAtMs: u.CreatedAtMs, UpdatedAtMs: u.UpdatedAtMs}
}

// User is the user's record on the local replica.
func (a *Accounts) User(name string) (messages.UserInfo, error) {
	u, ok := a.deps.Store.User(name)
	if !ok {
		return messages.UserInfo{}, fmt.Errorf("user %s: %w", name, errs.ErrNotFound)
	}
	return userInfo(u), nil
}

// Users lists the local replica's users by name.
func (a *Accounts) Users() []messages.UserInfo {
	us := a.deps.Store.Users()
	out := make([]messages.UserInfo, len(us))
	for i, u := range us {
		out[i] = userInfo(u)
	}
	return out
}

// hashPassword is the slow hash of a password to store.
func (a *Accounts) hashPassword(password string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), a.deps.Config.PasswordHashCost)
	if errors.Is(err, bcrypt.ErrPasswordTooLong) {
		return "", errs.Invalid("password longer than 72 bytes")
	}
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// CreateUser hashes the password and stores the user.
func (a *Accounts) CreateUser(ctx context.Context, req messages.CreateUserRequest) (messages.UserInfo, error) {
	hash, err := a.hashPassword(req.Password)
	if err != nil {
		return messages.UserInfo{}, fmt.Errorf("create user %s: %w", req.Username, err)
	}
	now := a.deps.Clock.Now().UnixMilli()
	u, err := a.deps.Store.CreateUser(ctx, messages.User{Username: req.Username, PasswordHash: hash, Grants: req.Grants,
		CreatedAtMs: now, UpdatedAtMs: now})
	if err != nil {
		return messages.UserInfo{}, fmt.Errorf("create user %s: %w", req.Username, errs.FromMetastore(err))
	}
	return userInfo(u), nil
}

// DeleteUser removes the user.
func (a *Accounts) DeleteUser(ctx context.Context, name string) error {
	if _, err := a.deps.Store.DeleteUser(ctx, name); err != nil {
		return fmt.Errorf("delete user %s: %w", name, errs.FromMetastore(err))
	}
	return nil
}

// SetGrants replaces the user's grants.
func (a *Accounts) SetGrants(ctx context.Context, name string, grants []messages.Grant) (messages.UserInfo, error) {
	u, err := a.deps.Store.SetUserGrants(ctx, messages.SetUserGrants{Username: name, Grants: grants, UpdatedAtMs: a.deps.Clock.Now().UnixMilli()})
	if err != nil {
		return messages.UserInfo{}, fmt.Errorf("set grants of user %s: %w", name, errs.FromMetastore(err))
	}
	return userInfo(u), nil
}

// SetPassword hashes and stores the user's new password; the cached
// credentials of the old one miss from then on (another hash).
func (a *Accounts) SetPassword(ctx context.Context, name, password string) error {
	hash, err := a.hashPassword(password)
	if err != nil {
		return fmt.Errorf("set password of user %s: %w", name, err)
	}
	if _, err := a.deps.Store.SetUserPassword(ctx, messages.SetUserPassword{Username: name, PasswordHash: hash, UpdatedAtMs: a.deps.Clock.Now().UnixMilli()}); err != nil {
		return fmt.Errorf("set password of user %s: %w", name, errs.FromMetastore(err))
	}
	return nil
}

// SeedAdmin creates the root user admin once the cluster has none: only
// the metadata leader proposes it, and the create is create-if-absent, so
// leaders that change, or nodes that restart, never make a second one.
// It ends when admin exists or ctx ends (the node's loops stop).
func (a *Accounts) SeedAdmin(ctx context.Context) {
	var s adminSeed
	for !a.seedAdminOnce(ctx, &s) {
		if clock.Sleep(ctx, a.deps.Clock, seedInterval) != nil {
			return
		}
	}
}

// adminSeed is what this node proposed: the same password and hash on
// every try, so a create whose answer was lost is recognised (each hash is
// salted) and its password still announced.
type adminSeed struct {
	password, hash string
	generated      bool
}

// seedAdminOnce is one look (and, on the leader, one try); done once
// admin exists.
func (a *Accounts) seedAdminOnce(ctx context.Context, s *adminSeed) (done bool) {
	if u, ok := a.deps.Store.User(AdminUser); ok {
		switch {
		case s.hash != "" && u.PasswordHash == s.hash:
			a.announceAdmin(s)
		case s.generated:
			a.discardGenerated()
		}
		return true
	}
	leader, ok := a.deps.Store.Leader(metastore.MetaShard)
	if !ok || leader != a.deps.Store.ReplicaID() {
		return false
	}
	if s.hash == "" {
		s.password = a.deps.Config.AdminPassword
		if s.password == "" {
			s.password, s.generated = rand.Text(), true
		}
		hash, err := a.hashPassword(s.password)
		if err != nil {
			a.deps.Log.Error("seed the admin user: cannot hash its password", "err", err)
			return true
		}
		if s.generated {
			// Written before it is proposed, so that an admin created with
			// it always has its password on disk.
			if err := writeSecret(a.deps.Config.AdminPasswordFile, s.password); err != nil {
				a.deps.Log.Error("seed the admin user: cannot write its generated password; set NARAD_ADMIN_PASSWORD or fix the data directory", "err", err)
				return true
			}
		}
		s.hash = hash
	}
	now := a.deps.Clock.Now().UnixMilli()
	pctx, cancel := context.WithTimeout(ctx, a.deps.Config.RequestTimeout)
	defer cancel()
	u, err := a.deps.Store.CreateUser(pctx, messages.User{Username: AdminUser, PasswordHash: s.hash, Root: true, CreatedAtMs: now, UpdatedAtMs: now})
	switch {
	case err == nil, errors.Is(err, metastore.ErrExists) && u.PasswordHash == s.hash:
		a.announceAdmin(s)
		return true
	case errors.Is(err, metastore.ErrExists):
		if s.generated {
			a.discardGenerated()
		}
		return true
	default:
		a.deps.Log.Info("seed the admin user: will retry", "err", err)
		return false
	}
}

// discardGenerated removes the file of a generated password that lost to
// another leader's admin, which has a password of its own: the file's is
// no admin's, and would mislead whoever reads it.
func (a *Accounts) discardGenerated() {
	if err := os.Remove(a.deps.Config.AdminPasswordFile); err != nil {
		a.deps.Log.Warn("seed the admin user: cannot remove the unused generated password", "file", a.deps.Config.AdminPasswordFile, "err", err)
	}
}

func (a *Accounts) announceAdmin(s *adminSeed) {
	if s.generated {
		a.deps.Log.Warn("seeded the root user admin with a generated password, written to a file only its owner reads; change it with PUT /v1/users/admin/password (narad users passwd admin)",
			"username", AdminUser, "file", a.deps.Config.AdminPasswordFile)
		return
	}
	a.deps.Log.Info("seeded the root user admin with NARAD_ADMIN_PASSWORD", "username", AdminUser)
}

// writeSecret puts secret in a new file at path that only its owner may
// read (0600), whole or not at all: written beside it, synced, renamed.
func writeSecret(path, secret string) error {
	if path == "" {
		return errs.Invalid("no file named for the generated admin password")
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.WriteString(secret)
	if err == nil {
		err = f.Chmod(0o600) // CreateTemp's mode already; said here because it matters
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
