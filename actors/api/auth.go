package api

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
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

// The attempt limits of §2.1: two token buckets, both charged for a
// password check before it runs and both handed back when it succeeds.
const (
	// A source is one client address trying one user name: the
	// contract's 5-attempt burst, then one attempt earned back every 12 s.
	// It holds back one machine guessing one user's password, and holds it
	// back alone: failures from a stranger's address leave the user's own
	// address untouched. Behind a proxy every client has the proxy's
	// address (X-Forwarded-For is not trusted), so there it is the
	// contract's old limit per user name again.
	sourceBurst = 5
	sourceEvery = 12 * time.Second
	// A user name across every address: looser, so that holding a name at
	// 429 takes a stranger at least sourceEvery/userEvery = 6 addresses
	// failing without a pause, while a guesser spread over many addresses
	// still gets at most 60 guesses and then 1,800 an hour at one name.
	userBurst = 60
	userEvery = 2 * time.Second
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
	// KnownLogin is the user when password is one the node verified for
	// username and still remembers: a login that costs no slow hash and
	// guesses nothing, so it passes the attempt limits untouched.
	KnownLogin(username, password string) (messages.UserInfo, bool)
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

// exempt are the paths served without credentials: the probes, the
// metrics, and the console's static files (actors/api/console), which hold no
// data; the console's script sends the user's credentials on each /v1
// call.
func exempt(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics" || path == "/ui" || strings.HasPrefix(path, "/ui/")
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
			// and kept out of the attempt tables, whose keys stay short.
			unauthorized(w, r)
			return
		}
		u, err := login(r, users, limits, name, password)
		switch {
		case errors.Is(err, errTooManyAttempts):
			writeError(w, http.StatusTooManyRequests, textTooManyAttempts)
			return
		case errors.Is(err, ErrUnauthenticated):
			unauthorized(w, r)
			return
		case err != nil:
			writeError(w, http.StatusInternalServerError, textAuthUnavailable)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, u)))
	})
}

// errTooManyAttempts is a login refused by the attempt limits, unchecked.
var errTooManyAttempts = errors.New("too many failed attempts")

// login checks name's password under the attempt limits. A password the
// node verified before and remembers is no guess and passes untouched;
// any other takes its attempt before the slow hash runs, not after, so
// that guesses sent at once cannot all pass a check none of them has
// charged yet. The attempt is kept if the password was wrong and handed
// back otherwise.
func login(r *http.Request, users Users, limits *attempts, name, password string) (u messages.UserInfo, err error) {
	if u, ok := users.KnownLogin(name, password); ok {
		return u, nil
	}
	t, ok := limits.reserve(r.Context(), sourceOf(r.RemoteAddr), name)
	if !ok {
		return messages.UserInfo{}, errTooManyAttempts
	}
	defer func() { limits.settle(t, errors.Is(err, ErrUnauthenticated)) }()
	return users.Authenticate(r.Context(), name, password)
}

// sourceOf is the client address a request came from, as the connection
// has it: an IPv4 address, or the /64 of an IPv6 one (one host usually
// holds a whole /64, and so could step through its addresses). An address
// that does not parse is its own source.
func sourceOf(remoteAddr string) string {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.WithZone("").Prefix(64)
	if err != nil {
		return ip.String()
	}
	return p.String()
}

// ConsoleHeader marks a request of the console's script: its 401 carries
// no WWW-Authenticate, since a browser answers that header with a login
// dialog of its own over the console's login form.
const ConsoleHeader = "X-Narad-Console"

func unauthorized(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(ConsoleHeader) == "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="narad"`)
	}
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

// attempts are the failed-attempt limits: a table of buckets per source
// (address and user name) and one per user name, each holding at most
// its maximum of keys, so that a spray of made-up names or addresses
// cannot grow it without bound. A bucket whose tokens all came back is
// dropped; when a table is full, the fullest bucket goes first.
type attempts struct {
	now func() time.Time

	mu      sync.Mutex
	sources table
	users   table
	// settled is closed, and replaced, whenever a check settles: a request
	// that found a bucket empty while checks were still running waits on
	// it, since a check that succeeds hands its attempt back.
	settled chan struct{}
	// waiting counts the requests waiting on settled.
	waiting int
}

// table is the buckets of one limit, by key.
type table struct {
	burst   int
	every   time.Duration
	max     int
	buckets map[string]*bucket
}

type bucket struct {
	tokens int
	// pending are the attempts taken by checks still running.
	pending int
	// since is when the bucket last earned a token back (or filled).
	since time.Time
}

// ticket is one check's hold on its two buckets.
type ticket struct {
	sourceKey, user string
	source, named   *bucket
}

func newAttempts(now func() time.Time, maxSources, maxUsers int) *attempts {
	return &attempts{now: now, settled: make(chan struct{}),
		sources: table{burst: sourceBurst, every: sourceEvery, max: maxSources, buckets: make(map[string]*bucket)},
		users:   table{burst: userBurst, every: userEvery, max: maxUsers, buckets: make(map[string]*bucket)}}
}

// refill earns b its tokens back up to now.
func (t *table) refill(b *bucket, now time.Time) {
	if n := int(now.Sub(b.since) / t.every); n > 0 {
		b.tokens = min(t.burst, b.tokens+n)
		b.since = b.since.Add(time.Duration(n) * t.every)
	}
	if b.tokens == t.burst {
		b.since = now
	}
}

// get is key's bucket refilled to now, made (full) if it has none.
func (t *table) get(key string, now time.Time) *bucket {
	b, ok := t.buckets[key]
	if !ok {
		t.makeRoom(now)
		b = &bucket{tokens: t.burst, since: now}
		t.buckets[key] = b
	}
	t.refill(b, now)
	return b
}

// makeRoom keeps the table below max before a new key goes in: full
// idle buckets go first, then the fullest idle one, then the fullest with
// checks running (which then settle on a bucket no longer held, and so
// change nothing).
func (t *table) makeRoom(now time.Time) {
	if len(t.buckets) < t.max {
		return
	}
	victim, best := "", -1
	for key, b := range t.buckets {
		t.refill(b, now)
		rank := b.tokens
		if b.pending == 0 {
			if b.tokens == t.burst {
				delete(t.buckets, key)
				continue
			}
			rank += t.burst + 1 // any idle bucket before any busy one
		}
		if rank > best {
			victim, best = key, rank
		}
	}
	if len(t.buckets) >= t.max {
		delete(t.buckets, victim)
	}
}

// settle hands b's attempt back (the check did not fail) or keeps it, and
// drops b once it is full and idle.
func (t *table) settle(key string, b *bucket, failed bool) {
	b.pending--
	if !failed {
		b.tokens = min(t.burst, b.tokens+1)
	}
	if b.pending == 0 && b.tokens == t.burst && t.buckets[key] == b {
		delete(t.buckets, key)
	}
}

// reserve takes an attempt from source's bucket for user and from user's
// bucket before the password check runs: false is 429. While a bucket is
// empty but checks that hold its attempts still run, it waits for them
// (or for ctx), since one that succeeds hands its attempt back: many
// requests with the right password at once are then not refused.
func (a *attempts) reserve(ctx context.Context, source, user string) (ticket, bool) {
	key := source + " " + user
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		now := a.now()
		s, u := a.sources.get(key, now), a.users.get(user, now)
		if s.tokens > 0 && u.tokens > 0 {
			s.tokens--
			u.tokens--
			s.pending++
			u.pending++
			return ticket{sourceKey: key, user: user, source: s, named: u}, true
		}
		if (s.tokens == 0 && s.pending == 0) || (u.tokens == 0 && u.pending == 0) {
			return ticket{}, false
		}
		settled := a.settled
		a.waiting++
		a.mu.Unlock()
		select {
		case <-settled:
		case <-ctx.Done():
		}
		a.mu.Lock()
		a.waiting--
		if ctx.Err() != nil {
			return ticket{}, false
		}
	}
}

// settle ends t's check: failed keeps its attempts, anything else hands
// them back.
func (a *attempts) settle(t ticket, failed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sources.settle(t.sourceKey, t.source, failed)
	a.users.settle(t.user, t.named, failed)
	close(a.settled)
	a.settled = make(chan struct{})
}
