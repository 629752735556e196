package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/messages"
)

// The grant actions of §2.1.
const (
	ActionProduce = "produce"
	ActionConsume = "consume"
	ActionCreate  = "create"
	ActionAdmin   = "admin"
)

// The contract's attempt limit per username (§2.1): a burst of 5 failed
// attempts, then one attempt earned back every 12 s.
const (
	authBurst = 5
	authEvery = 12 * time.Second
)

// The contract's texts of §2.1.
const (
	textAuthRequired    = "authentication required"
	textTooManyAttempts = "too many failed authentication attempts"
	textAuthUnavailable = "authentication unavailable"
	textAdminRequired   = "admin privileges required"
	textOwnerRequired   = "only the topic owner or an admin may modify this topic"
)

// ErrUnauthenticated is an unknown user or a wrong password: the two are
// answered alike (401), so a caller cannot tell which names exist
// (actors/errs's, named here too).
var ErrUnauthenticated = errs.ErrUnauthenticated

// Users is user administration and authentication. The node stores users
// and hashes passwords; the contract's rules on who may do what to whom
// are this package's (users.go).
type Users interface {
	// Authenticate checks a username and password: ErrUnauthenticated for
	// an unknown user and a wrong password alike; any other error is the
	// user store failing.
	Authenticate(ctx context.Context, username, password string) (messages.UserInfo, error)
	// User is the user's record (ErrNotFound).
	User(name string) (messages.UserInfo, error)
	// Users lists every user, by name.
	Users() []messages.UserInfo
	// CreateUser stores a new user (ErrConflict when the name is taken).
	CreateUser(ctx context.Context, req messages.CreateUserRequest) (messages.UserInfo, error)
	// DeleteUser removes a user (ErrNotFound).
	DeleteUser(ctx context.Context, name string) error
	// SetGrants replaces a user's grants (ErrNotFound).
	SetGrants(ctx context.Context, name string, grants []messages.Grant) (messages.UserInfo, error)
	// SetPassword replaces a user's password (ErrNotFound).
	SetPassword(ctx context.Context, name, password string) error
}

// builtinRoot is who every request acts as while security is off (§2.2):
// every check passes and topics get no owner.
var builtinRoot = messages.UserInfo{Root: true}

type principalKey struct{}

// principal is the authenticated caller of r (builtinRoot while security
// is off).
func principal(r *http.Request) messages.UserInfo {
	if u, ok := r.Context().Value(principalKey{}).(messages.UserInfo); ok {
		return u
	}
	return builtinRoot
}

// exempt are the exact paths served without credentials.
func exempt(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}

// authenticate is HTTP Basic on every request but the exempt paths.
func authenticate(users Users, limits *attempts, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if exempt(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		name, password, ok := r.BasicAuth()
		if !ok || !usernamePattern.MatchString(name) {
			// A name no user can have is refused before the slow hash
			// and kept out of the attempt table, whose keys stay short.
			unauthorized(w)
			return
		}
		if !limits.allowed(name) {
			writeError(w, http.StatusTooManyRequests, textTooManyAttempts)
			return
		}
		u, err := users.Authenticate(r.Context(), name, password)
		switch {
		case errors.Is(err, ErrUnauthenticated):
			limits.failed(name)
			unauthorized(w)
			return
		case err != nil:
			writeError(w, http.StatusInternalServerError, textAuthUnavailable)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, u)))
	})
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="narad"`)
	writeError(w, http.StatusUnauthorized, textAuthRequired)
}

// Allowed says whether u may take action on topic: root and an admin grant
// allow everything; otherwise a grant of that action with a pattern that
// matches the name (exact, or a prefix ending in "*").
func Allowed(u messages.UserInfo, action, topic string) bool {
	if u.Root {
		return true
	}
	for _, g := range u.Grants {
		if g.Action == ActionAdmin {
			return true
		}
		if g.Action != action {
			continue
		}
		for _, p := range g.Patterns {
			if matches(p, topic) {
				return true
			}
		}
	}
	return false
}

func matches(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

// isAdmin is root or an admin grant.
func isAdmin(u messages.UserInfo) bool {
	if u.Root {
		return true
	}
	for _, g := range u.Grants {
		if g.Action == ActionAdmin {
			return true
		}
	}
	return false
}

// need wraps a topic route with the permission check of §2.1 for action
// on the topic in the path.
func need(action string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !Allowed(principal(r), action, r.PathValue("topic")) {
			writeError(w, http.StatusForbidden, action+" not allowed on this topic")
			return
		}
		next(w, r)
	}
}

// needAdmin wraps a route only an admin may call.
func needAdmin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !isAdmin(principal(r)) {
			writeError(w, http.StatusForbidden, textAdminRequired)
			return
		}
		next(w, r)
	}
}

// ownerOrAdmin wraps a route that modifies the topic in the path: its
// creator or an admin. A missing topic passes, so the handler answers 404.
func (h *handlers) ownerOrAdmin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.mayModify(principal(r), r.PathValue("topic")) {
			writeError(w, http.StatusForbidden, textOwnerRequired)
			return
		}
		next(w, r)
	}
}

func (h *handlers) mayModify(u messages.UserInfo, topic string) bool {
	if isAdmin(u) {
		return true
	}
	t, err := h.node.Topic(topic)
	if err != nil {
		return true // the handler answers the missing topic
	}
	return t.Owner != "" && t.Owner == u.Username
}

// attempts is the failed-attempt limit per username: a token bucket of
// authBurst, one token earned back every authEvery, charged on each
// failure. It holds at most max usernames, so a spray of made-up names
// cannot grow it without bound; buckets that filled up again are dropped
// first, then the fullest.
type attempts struct {
	now func() time.Time
	max int

	mu      sync.Mutex
	buckets map[string]bucket
}

type bucket struct {
	tokens int
	// since is when the bucket last earned a token back (or filled).
	since time.Time
}

func newAttempts(now func() time.Time, max int) *attempts {
	return &attempts{now: now, max: max, buckets: make(map[string]bucket)}
}

// refilled is b at now.
func (b bucket) refilled(now time.Time) bucket {
	if n := int(now.Sub(b.since) / authEvery); n > 0 {
		b.tokens = min(authBurst, b.tokens+n)
		b.since = b.since.Add(time.Duration(n) * authEvery)
	}
	if b.tokens == authBurst {
		b.since = now
	}
	return b
}

// allowed says whether name may try (again) now.
func (a *attempts) allowed(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.buckets[name]
	return !ok || b.refilled(a.now()).tokens > 0
}

// failed charges name one attempt.
func (a *attempts) failed(name string) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.buckets[name]
	if !ok {
		a.makeRoom(now)
		b = bucket{tokens: authBurst, since: now}
	}
	b = b.refilled(now)
	if b.tokens > 0 {
		b.tokens--
	}
	a.buckets[name] = b
}

// makeRoom keeps the table below max before a new name goes in.
func (a *attempts) makeRoom(now time.Time) {
	if len(a.buckets) < a.max {
		return
	}
	fullest, most := "", -1
	for name, b := range a.buckets {
		b = b.refilled(now)
		if b.tokens == authBurst {
			delete(a.buckets, name)
			continue
		}
		if b.tokens > most {
			fullest, most = name, b.tokens
		}
	}
	if len(a.buckets) >= a.max {
		delete(a.buckets, fullest)
	}
}
