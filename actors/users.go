package actors

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// adminUser is the root user seeded at first cluster start.
const adminUser = "admin"

// seedInterval is how often a node looks again whether admin exists
// (and, on the metadata leader, creates it).
const seedInterval = time.Second

// Authenticate checks name and password against the local replica's
// record: api.ErrUnauthenticated for an unknown user and a wrong password
// alike.
func (n *Node) Authenticate(ctx context.Context, name, password string) (messages.UserInfo, error) {
	u, ok := n.store.User(name)
	good, err := n.creds.Verify(ctx, name, password, u.PasswordHash, ok)
	switch {
	case err != nil:
		return messages.UserInfo{}, fmt.Errorf("verify password of user %s: %w", name, err)
	case !good:
		return messages.UserInfo{}, fmt.Errorf("user %s: %w", name, api.ErrUnauthenticated)
	}
	return userInfo(u), nil
}

func userInfo(u messages.User) messages.UserInfo {
	return messages.UserInfo{Username: u.Username, Grants: u.Grants, Root: u.Root, CreatedAtMs: u.CreatedAtMs, UpdatedAtMs: u.UpdatedAtMs}
}

// User is the user's record on the local replica.
func (n *Node) User(name string) (messages.UserInfo, error) {
	u, ok := n.store.User(name)
	if !ok {
		return messages.UserInfo{}, fmt.Errorf("user %s: %w", name, ErrNotFound)
	}
	return userInfo(u), nil
}

// Users lists the local replica's users by name.
func (n *Node) Users() []messages.UserInfo {
	us := n.store.Users()
	out := make([]messages.UserInfo, len(us))
	for i, u := range us {
		out[i] = userInfo(u)
	}
	return out
}

// hashPassword is the slow hash of a password to store.
func (n *Node) hashPassword(password string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), n.cfg.PasswordHashCost)
	if errors.Is(err, bcrypt.ErrPasswordTooLong) {
		return "", invalid("password longer than 72 bytes")
	}
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// CreateUser hashes the password and stores the user.
func (n *Node) CreateUser(ctx context.Context, req messages.CreateUserRequest) (messages.UserInfo, error) {
	hash, err := n.hashPassword(req.Password)
	if err != nil {
		return messages.UserInfo{}, fmt.Errorf("create user %s: %w", req.Username, err)
	}
	now := time.Now().UnixMilli()
	u, err := n.store.CreateUser(ctx, messages.User{Username: req.Username, PasswordHash: hash, Grants: req.Grants,
		CreatedAtMs: now, UpdatedAtMs: now})
	if err != nil {
		return messages.UserInfo{}, fmt.Errorf("create user %s: %w", req.Username, fromMetastore(err))
	}
	return userInfo(u), nil
}

// DeleteUser removes the user.
func (n *Node) DeleteUser(ctx context.Context, name string) error {
	if _, err := n.store.DeleteUser(ctx, name); err != nil {
		return fmt.Errorf("delete user %s: %w", name, fromMetastore(err))
	}
	return nil
}

// SetGrants replaces the user's grants.
func (n *Node) SetGrants(ctx context.Context, name string, grants []messages.Grant) (messages.UserInfo, error) {
	u, err := n.store.SetUserGrants(ctx, messages.SetUserGrants{Username: name, Grants: grants, UpdatedAtMs: time.Now().UnixMilli()})
	if err != nil {
		return messages.UserInfo{}, fmt.Errorf("set grants of user %s: %w", name, fromMetastore(err))
	}
	return userInfo(u), nil
}

// SetPassword hashes and stores the user's new password; the cached
// credentials of the old one miss from then on (another hash).
func (n *Node) SetPassword(ctx context.Context, name, password string) error {
	hash, err := n.hashPassword(password)
	if err != nil {
		return fmt.Errorf("set password of user %s: %w", name, err)
	}
	if _, err := n.store.SetUserPassword(ctx, messages.SetUserPassword{Username: name, PasswordHash: hash, UpdatedAtMs: time.Now().UnixMilli()}); err != nil {
		return fmt.Errorf("set password of user %s: %w", name, fromMetastore(err))
	}
	return nil
}

// seedAdmin creates the root user admin once the cluster has none: only
// the metadata leader proposes it, and the create is create-if-absent, so
// leaders that change, or nodes that restart, never make a second one.
// It ends when admin exists or ctx ends.
func (n *Node) seedAdmin(ctx context.Context) {
	t := time.NewTicker(seedInterval)
	defer t.Stop()
	var s adminSeed
	for !n.seedAdminOnce(ctx, &s) {
		select {
		case <-t.C:
		case <-ctx.Done():
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
func (n *Node) seedAdminOnce(ctx context.Context, s *adminSeed) (done bool) {
	if u, ok := n.store.User(adminUser); ok {
		if s.hash != "" && u.PasswordHash == s.hash {
			n.announceAdmin(s)
		}
		return true
	}
	leader, ok := n.store.Leader(metastore.MetaShard)
	if !ok || leader != n.store.ReplicaID() {
		return false
	}
	if s.hash == "" {
		s.password = n.cfg.AdminPassword
		if s.password == "" {
			s.password, s.generated = rand.Text(), true
		}
		hash, err := n.hashPassword(s.password)
		if err != nil {
			n.log.Error("seed the admin user: cannot hash its password", "err", err)
			return true
		}
		s.hash = hash
	}
	now := time.Now().UnixMilli()
	pctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	u, err := n.store.CreateUser(pctx, messages.User{Username: adminUser, PasswordHash: s.hash, Root: true, CreatedAtMs: now, UpdatedAtMs: now})
	switch {
	case err == nil, errors.Is(err, metastore.ErrExists) && u.PasswordHash == s.hash:
		n.announceAdmin(s)
		return true
	case errors.Is(err, metastore.ErrExists):
		return true // another leader's
	default:
		n.log.Info("seed the admin user: will retry", "err", err)
		return false
	}
}

func (n *Node) announceAdmin(s *adminSeed) {
	if s.generated {
		n.log.Warn("seeded the root user admin with a generated password; change it with PUT /v1/users/admin/password",
			"username", adminUser, "password", s.password)
		return
	}
	n.log.Info("seeded the root user admin with NARAD_ADMIN_PASSWORD", "username", adminUser)
}
