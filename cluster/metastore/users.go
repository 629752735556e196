package metastore

import (
	"context"
	"fmt"

	"github.com/naradmq/narad/messages"
)

// ---- users (metadata shard) ----
//
// The caller hashes passwords and stamps times; the state machine only
// stores. Errors follow the package's rules: ErrExists, ErrNotFound,
// ErrInvalid were decided by the state machine (or before proposing);
// ErrUnavailable is an unknown outcome.

// CreateUser creates u if the name is free. On ErrExists the existing
// record comes back too, so a retry after ErrUnavailable can tell its own
// create by the password hash (each hash is salted).
func (s *Store) CreateUser(ctx context.Context, u messages.User) (messages.User, error) {
	op := "create user " + u.Username
	if u.Username == "" || u.PasswordHash == "" {
		return messages.User{}, fmt.Errorf("metastore: %s without a name or a password hash: %w", op, ErrInvalid)
	}
	r, err := s.proposeMeta(ctx, op, messages.MetaCommand{CreateUser: &messages.CreateUser{User: u}})
	if err != nil {
		return messages.User{}, err
	}
	if r.Code == messages.ResultExists && r.User != nil {
		return *r.User, codeError(op, r.Code)
	}
	return userOf(r, op)
}

// DeleteUser removes the user and returns the removed record.
func (s *Store) DeleteUser(ctx context.Context, name string) (messages.User, error) {
	op := "delete user " + name
	r, err := s.proposeMeta(ctx, op, messages.MetaCommand{DeleteUser: &messages.DeleteUser{Username: name}})
	if err != nil {
		return messages.User{}, err
	}
	return userOf(r, op)
}

// SetUserGrants replaces the user's grants and returns the record after.
func (s *Store) SetUserGrants(ctx context.Context, c messages.SetUserGrants) (messages.User, error) {
	op := "set grants of user " + c.Username
	r, err := s.proposeMeta(ctx, op, messages.MetaCommand{SetUserGrants: &c})
	if err != nil {
		return messages.User{}, err
	}
	return userOf(r, op)
}

// SetUserPassword replaces the user's password hash.
func (s *Store) SetUserPassword(ctx context.Context, c messages.SetUserPassword) (messages.User, error) {
	op := "set password of user " + c.Username
	if c.PasswordHash == "" {
		return messages.User{}, fmt.Errorf("metastore: %s without a hash: %w", op, ErrInvalid)
	}
	r, err := s.proposeMeta(ctx, op, messages.MetaCommand{SetUserPassword: &c})
	if err != nil {
		return messages.User{}, err
	}
	return userOf(r, op)
}

func userOf(r messages.MetaResult, op string) (messages.User, error) {
	return recordOf(r, op, "user", r.User)
}

// User reads a user from this replica (possibly stale by milliseconds:
// what authentication reads on every request).
func (s *Store) User(name string) (messages.User, bool) {
	return metaLookup(s, name, (*metaState).user)
}

// Users lists the users of this replica, sorted by name.
func (s *Store) Users() []messages.User {
	return metaList(s, (*metaState).userList)
}

// LeaderUser reads a user linearizably: the admin seeding asks it whether
// its create, whose answer it may have lost, applied.
func (s *Store) LeaderUser(ctx context.Context, name string) (messages.User, bool, error) {
	v, err := s.read(ctx, MetaShard, userQuery{name: name})
	if err != nil {
		return messages.User{}, false, fmt.Errorf("metastore: leader read of user %q: %w", name, err)
	}
	a := v.(userAnswer)
	return a.user, a.found, nil
}
