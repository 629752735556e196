// Package auth is how a node checks a user's password fast enough for
// every request: Credentials runs the slow hash (bcrypt) under a bound on
// how many run at once, and remembers what it verified, keyed so that it
// never holds a password. The users themselves, and their grants, are the
// metastore's; the HTTP layer (actors/api) asks the node, which asks this.
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Verify reports whether password is user's, whose stored hash is hash;
// found is false for a user that does not exist, whose check costs what a
// wrong password's does all the same. A password verified once against
// hash is answered from memory after that. An error is a check that could
// not run (ctx ended while it waited for a slot).
func (c *Credentials) Verify(ctx context.Context, user, password, hash string, found bool) (bool, error) {
	k := c.keyOf(user, password)
	if found && c.known(k, hash) {
		return true, nil
	}
	if !found {
		hash = c.unknownUser()
	}
	err := c.check(ctx, hash, password)
	switch {
	case !found || errors.Is(err, bcrypt.ErrMismatchedHashAndPassword):
		return false, nil
	case err != nil:
		return false, err
	}
	c.remember(k, hash)
	return true, nil
}

// Known reports whether password was verified as user's against hash, and
// is remembered.
func (c *Credentials) Known(user, password, hash string) bool {
	return c.known(c.keyOf(user, password), hash)
}

// Credentials remembers the passwords verified against each user's hash,
// so that a produce pays the slow hash once per user and password rather
// than per request. An entry is keyed by the username and an HMAC of the
// password under a key drawn at start, so the cache never holds a
// password, and it holds the hash it was verified against: a new password
// (a new salted hash) or a deleted and recreated user misses.
type Credentials struct {
	key  []byte
	max  int
	cost int
	// slots bounds the slow hashes running at once.
	slots chan struct{}

	unknownOnce sync.Once
	unknownHash string

	mu       sync.RWMutex
	verified map[credentialKey]string
}

type credentialKey struct {
	user string
	mac  [sha256.Size]byte
}

// NewCredentials remembers at most maxEntries verified passwords, runs at
// most inFlight slow hashes at once, and hashes an unknown user's
// password at cost.
func NewCredentials(maxEntries, inFlight, cost int) *Credentials {
	key := make([]byte, 32)
	rand.Read(key) // never fails (crypto/rand)
	return &Credentials{key: key, max: maxEntries, cost: cost, slots: make(chan struct{}, inFlight),
		verified: make(map[credentialKey]string)}
}

func (c *Credentials) keyOf(user, password string) credentialKey {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(password))
	k := credentialKey{user: user}
	m.Sum(k.mac[:0])
	return k
}

func (c *Credentials) known(k credentialKey, hash string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	h, ok := c.verified[k]
	return ok && h == hash
}

func (c *Credentials) remember(k credentialKey, hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.verified[k]; !ok && len(c.verified) >= c.max {
		for other := range c.verified {
			delete(c.verified, other)
			break
		}
	}
	c.verified[k] = hash
}

// check runs the slow comparison under the in-flight bound.
func (c *Credentials) check(ctx context.Context, hash, password string) error {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("wait to verify a password: %w", ctx.Err())
	}
	defer func() { <-c.slots }()
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password))
}

// unknownUser is the hash compared against for a user that does not
// exist, made at the node's cost the first time it is needed, so an
// unknown name costs what a wrong password does and its answer does not
// come sooner.
func (c *Credentials) unknownUser() string {
	c.unknownOnce.Do(func() {
		h, err := bcrypt.GenerateFromPassword([]byte("no such user"), c.cost)
		if err != nil {
			panic(err) // only a cost out of range fails, and Validate refuses it
		}
		c.unknownHash = string(h)
	})
	return c.unknownHash
}
