package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// The fake node's user methods answer as a node without users would; the
// tests below put userBook in front of it.
func (f *fakeNode) Authenticate(context.Context, string, string) (messages.UserInfo, error) {
	return messages.UserInfo{}, ErrUnauthenticated
}
func (f *fakeNode) KnownLogin(string, string) (messages.UserInfo, bool) {
	return messages.UserInfo{}, false
}
func (f *fakeNode) User(string) (messages.UserInfo, error) { return messages.UserInfo{}, ErrNotFound }
func (f *fakeNode) Users() []messages.UserInfo             { return nil }
func (f *fakeNode) CreateUser(context.Context, messages.CreateUserRequest) (messages.UserInfo, error) {
	return messages.UserInfo{}, f.err
}
func (f *fakeNode) DeleteUser(context.Context, string) error { return f.err }
func (f *fakeNode) SetGrants(context.Context, string, []messages.Grant) (messages.UserInfo, error) {
	return messages.UserInfo{}, f.err
}
func (f *fakeNode) SetPassword(context.Context, string, string) error { return f.err }

// userBook is a fakeNode with users in memory (plain passwords: hashing
// is the node's business) and topics with owners.
type userBook struct {
	*fakeNode
	mu        sync.Mutex
	users     map[string]messages.UserInfo
	passwords map[string]string
	owners    map[string]string
	// storeDown makes Authenticate fail as a broken user store does.
	storeDown bool
	created   messages.CreateTopicRequest
	// checks counts the Authenticate calls.
	checks int
	// gate, when set, holds every Authenticate until it is closed; held
	// counts the calls it holds or held.
	gate chan struct{}
	held int
}

func newUserBook() *userBook {
	b := &userBook{fakeNode: readyNode(), users: map[string]messages.UserInfo{}, passwords: map[string]string{},
		owners: map[string]string{"mine": "ann", "theirs": "bob"}}
	b.add(messages.UserInfo{Username: "admin", Root: true}, "rootpw")
	return b
}

func (b *userBook) add(u messages.UserInfo, password string) {
	b.users[u.Username], b.passwords[u.Username] = u, password
}

func (b *userBook) Authenticate(_ context.Context, name, password string) (messages.UserInfo, error) {
	b.mu.Lock()
	gate := b.gate
	if gate != nil {
		b.held++
		b.mu.Unlock()
		<-gate
		b.mu.Lock()
	}
	defer b.mu.Unlock()
	b.checks++
	if b.storeDown {
		return messages.UserInfo{}, fmt.Errorf("user store: %w", ErrUnavailable)
	}
	u, ok := b.users[name]
	if !ok || b.passwords[name] != password {
		return messages.UserInfo{}, ErrUnauthenticated
	}
	return u, nil
}
func (b *userBook) User(name string) (messages.UserInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, ok := b.users[name]
	if !ok {
		return u, fmt.Errorf("user %s: %w", name, ErrNotFound)
	}
	return u, nil
}
func (b *userBook) Users() []messages.UserInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []messages.UserInfo
	for _, u := range b.users {
		out = append(out, u)
	}
	slices.SortFunc(out, func(x, y messages.UserInfo) int { return strings.Compare(x.Username, y.Username) })
	return out
}
func (b *userBook) CreateUser(_ context.Context, req messages.CreateUserRequest) (messages.UserInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.users[req.Username]; ok {
		return messages.UserInfo{}, fmt.Errorf("user %s: %w", req.Username, ErrConflict)
	}
	u := messages.UserInfo{Username: req.Username, Grants: req.Grants, CreatedAtMs: 1, UpdatedAtMs: 1}
	b.add(u, req.Password)
	return u, nil
}
func (b *userBook) DeleteUser(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.users, name)
	return nil
}
func (b *userBook) SetGrants(_ context.Context, name string, grants []messages.Grant) (messages.UserInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.users[name]
	u.Grants = grants
	b.users[name] = u
	return u, nil
}
func (b *userBook) SetPassword(_ context.Context, name, password string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.passwords[name] = password
	return nil
}
func (b *userBook) Topic(name string) (messages.TopicInfo, error) {
	owner, ok := b.owners[name]
	if !ok {
		return messages.TopicInfo{}, fmt.Errorf("topic %s: %w", name, ErrNotFound)
	}
	return messages.TopicInfo{Name: name, Partitions: 3, Owner: owner}, nil
}
func (b *userBook) CreateTopic(_ context.Context, req messages.CreateTopicRequest) (messages.TopicInfo, error) {
	b.created = req
	return messages.TopicInfo{Name: req.Name, Owner: req.Owner}, nil
}

type authRig struct {
	t     *testing.T
	book  *userBook
	clock *testnet.Clock // the attempt limit's
	h     http.Handler
}

func newAuthRig(t *testing.T) *authRig {
	book := newUserBook()
	clock := testnet.NewClock()
	return &authRig{t: t, book: book, clock: clock,
		h: Handler(book, Options{Security: true, Clock: clock, MaxAuthFailureUsers: 100, MaxAuthFailureSources: 100})}
}

// do sends one request as user (no Authorization header when user is "")
// from httptest's address, 192.0.2.1, and returns the recorder.
func (a *authRig) do(user, password, method, target, body string) *httptest.ResponseRecorder {
	a.t.Helper()
	return a.doFrom("192.0.2.1:1234", user, password, method, target, body)
}

// doFrom is do from the client address addr (host:port).
func (a *authRig) doFrom(addr, user, password, method, target, body string) *httptest.ResponseRecorder {
	a.t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.RemoteAddr = addr
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return rec
}

func wantAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder, status int, text string) {
	t.Helper()
	wantError(t, what, rec.Code, rec.Body.String(), status, text)
}

// Every path but exactly /healthz, /readyz and /metrics (and the
// console's files, console_test.go) needs credentials, unknown paths too;
// the 401 carries the challenge.
func TestAuthIsRequiredOnEveryPathButTheExemptOnes(t *testing.T) {
	a := newAuthRig(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if rec := a.do("", "", "GET", path, ""); rec.Code != http.StatusOK {
			t.Errorf("GET %s without credentials: got %d, want 200", path, rec.Code)
		}
	}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/topics"}, {"POST", "/v1/topics/t/produce"}, {"GET", "/v1/users"},
		{"GET", "/v1/cluster/members"}, {"GET", "/nope"}, {"GET", "/healthz/"}, {"GET", "/metricsx"},
	} {
		rec := a.do("", "", tc.method, tc.path, "")
		wantAnswer(t, tc.method+" "+tc.path+" without credentials", rec, http.StatusUnauthorized, textAuthRequired)
		if got := rec.Header().Get("WWW-Authenticate"); got != `Basic realm="narad"` {
			t.Errorf("%s %s: got WWW-Authenticate %q, want %q", tc.method, tc.path, got, `Basic realm="narad"`)
		}
	}
	wantAnswer(t, "wrong password", a.do("admin", "nope", "GET", "/v1/topics", ""), http.StatusUnauthorized, textAuthRequired)
	wantAnswer(t, "unknown user", a.do("nobody", "rootpw", "GET", "/v1/topics", ""), http.StatusUnauthorized, textAuthRequired)
	if rec := a.do("admin", "rootpw", "GET", "/v1/topics", ""); rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/topics as admin: got %d %s, want 200", rec.Code, rec.Body)
	}
}

// A name no user can have (§1's username rule) is 401 without a password
// check, so it never costs a slow hash nor a place in the attempt table.
func TestAuthRefusesAnImpossibleUsernameWithoutChecking(t *testing.T) {
	a := newAuthRig(t)
	for _, name := range []string{strings.Repeat("a", 65), "a b", "é"} {
		wantAnswer(t, "username "+name, a.do(name, "pw", "GET", "/v1/topics", ""), http.StatusUnauthorized, textAuthRequired)
	}
	if a.book.checks != 0 {
		t.Fatalf("got %d password checks, want 0", a.book.checks)
	}
}

// A failing user store is 500, and is no failed attempt.
func TestAuthUnavailableIs500(t *testing.T) {
	a := newAuthRig(t)
	a.book.storeDown = true
	for range sourceBurst + 1 {
		wantAnswer(t, "store down", a.do("admin", "rootpw", "GET", "/v1/topics", ""), http.StatusInternalServerError, textAuthUnavailable)
	}
	a.book.storeDown = false
	if rec := a.do("admin", "rootpw", "GET", "/v1/topics", ""); rec.Code != http.StatusOK {
		t.Fatalf("after the store came back: got %d %s, want 200", rec.Code, rec.Body)
	}
}

// Five failures from one address are the burst; the sixth attempt, even
// with the right password (one not remembered from an earlier login), is
// 429 until 12 s earn one attempt back. Another username is not affected.
func TestAuthFailuresPerUsernameAre429AfterTheBurst(t *testing.T) {
	a := newAuthRig(t)
	for i := range sourceBurst {
		wantAnswer(t, fmt.Sprintf("failure %d", i+1), a.do("admin", "wrong", "GET", "/v1/topics", ""), http.StatusUnauthorized, textAuthRequired)
	}
	wantAnswer(t, "right password after the burst", a.do("admin", "rootpw", "GET", "/v1/topics", ""), http.StatusTooManyRequests, textTooManyAttempts)
	a.book.add(messages.UserInfo{Username: "ann"}, "annpw")
	if rec := a.do("ann", "annpw", "GET", "/v1/topics", ""); rec.Code != http.StatusOK {
		t.Fatalf("another user: got %d %s, want 200", rec.Code, rec.Body)
	}
	a.clock.Advance(sourceEvery - time.Millisecond)
	wantAnswer(t, "just before 12 s", a.do("admin", "rootpw", "GET", "/v1/topics", ""), http.StatusTooManyRequests, textTooManyAttempts)
	a.clock.Advance(time.Millisecond)
	if rec := a.do("admin", "rootpw", "GET", "/v1/topics", ""); rec.Code != http.StatusOK {
		t.Fatalf("after 12 s: got %d %s, want 200", rec.Code, rec.Body)
	}
	// The attempt earned back is one: one more failure spends it.
	wantAnswer(t, "a failure after 12 s", a.do("admin", "wrong", "GET", "/v1/topics", ""), http.StatusUnauthorized, textAuthRequired)
	wantAnswer(t, "the next attempt", a.do("admin", "rootpw", "GET", "/v1/topics", ""), http.StatusTooManyRequests, textTooManyAttempts)
	// A full refill takes 5×12 s, and then the burst is whole again.
	a.clock.Advance(sourceBurst * sourceEvery)
	for i := range sourceBurst {
		wantAnswer(t, fmt.Sprintf("failure %d after the refill", i+1), a.do("admin", "wrong", "GET", "/v1/topics", ""), http.StatusUnauthorized, textAuthRequired)
	}
	wantAnswer(t, "after the second burst", a.do("admin", "rootpw", "GET", "/v1/topics", ""), http.StatusTooManyRequests, textTooManyAttempts)
}

// The tables of failed attempts are bounded: a spray of names from many
// addresses never grows either past its limit, and a source still limited
// is kept over sprayed ones; a check that succeeds leaves no entry.
func TestAuthAttemptTablesAreBounded(t *testing.T) {
	ctx := context.Background()
	a := newAttempts(testnet.NewClock().Now, 10, 10)
	fail := func(source, user string) {
		if t, ok := a.reserve(ctx, source, user); ok {
			a.settle(t, true)
		}
	}
	for range sourceBurst {
		fail("192.0.2.1", "victim")
	}
	for i := range 1000 {
		fail(fmt.Sprint("198.51.100.", i%250), fmt.Sprint("spray", i))
		if len(a.sources.buckets) > 10 || len(a.users.buckets) > 10 {
			t.Fatalf("after %d names: got %d sources and %d users, want at most 10 each", i+1, len(a.sources.buckets), len(a.users.buckets))
		}
	}
	if _, ok := a.reserve(ctx, "192.0.2.1", "victim"); ok {
		t.Fatal("victim: got an attempt after its burst, want 429 (evicted before sources with fuller buckets)")
	}
	b := newAttempts(testnet.NewClock().Now, 10, 10)
	tk, _ := b.reserve(ctx, "192.0.2.1", "ann")
	b.settle(tk, false)
	if len(b.sources.buckets) != 0 || len(b.users.buckets) != 0 {
		t.Fatalf("after a check that succeeded: got %d sources and %d users, want none", len(b.sources.buckets), len(b.users.buckets))
	}
}

// gatedRig is a handler whose password checks all wait at the book's gate,
// so that requests sent at once are all in flight together.
func gatedRig(t *testing.T) (*userBook, *attempts, http.Handler) {
	book := newUserBook()
	book.gate = make(chan struct{})
	limits := newAttempts(testnet.NewClock().Now, 100, 100)
	return book, limits, authenticate(book, limits, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
}

// sendAtOnce sends n requests as user at once, the i-th with password(i),
// waits until each is in its check, waiting for the checks before it or
// answered, opens the gate, and returns the count of each status.
func sendAtOnce(t *testing.T, book *userBook, limits *attempts, h http.Handler, n int, user string, password func(int) string) map[int]int {
	t.Helper()
	codes := make(chan int, n)
	for i := range n {
		go func() {
			req := httptest.NewRequest("GET", "/v1/topics", nil)
			req.SetBasicAuth(user, password(i))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			codes <- rec.Code
		}()
	}
	testnet.Eventually(t, 10*time.Second, "every request checked, waiting or answered", func() bool {
		book.mu.Lock()
		held := book.held
		book.mu.Unlock()
		limits.mu.Lock()
		waiting := limits.waiting
		limits.mu.Unlock()
		return held+waiting+len(codes) == n
	})
	close(book.gate)
	got := map[int]int{}
	for range n {
		got[<-codes]++
	}
	return got
}

// Guesses sent at once are charged before their checks run: of 40 wrong
// passwords for admin at once, at most the burst are checked (401) and
// the rest are refused unchecked (429).
func TestAuthWrongGuessesAtOnceGetAtMostTheBurst(t *testing.T) {
	book, limits, h := gatedRig(t)
	const guesses = 40
	got := sendAtOnce(t, book, limits, h, guesses, "admin", func(i int) string { return fmt.Sprint("guess", i) })
	if got[http.StatusUnauthorized] > sourceBurst || got[http.StatusUnauthorized]+got[http.StatusTooManyRequests] != guesses {
		t.Fatalf("%d wrong passwords at once: got %v, want at most %d 401s and the rest 429", guesses, got, sourceBurst)
	}
	if book.checks > sourceBurst {
		t.Fatalf("password checks: got %d, want at most %d", book.checks, sourceBurst)
	}
}

// The right password sent many times at once is not refused: the checks
// past the burst wait for the first ones, which hand their attempts back.
func TestAuthRightPasswordAtOnceIsNotRefused(t *testing.T) {
	book, limits, h := gatedRig(t)
	const logins = 20
	got := sendAtOnce(t, book, limits, h, logins, "admin", func(int) string { return "rootpw" })
	if got[http.StatusOK] != logins {
		t.Fatalf("%d logins at once with the right password: got %v, want all 200", logins, got)
	}
}

// A stranger's failures from one address hold back that address alone:
// admin with the right password from another address is accepted, and
// every address of the stranger's IPv6 /64 is the one source.
func TestAuthStrangerCannotLockOutAnotherAddress(t *testing.T) {
	a := newAuthRig(t)
	for i := range sourceBurst {
		wantAnswer(t, fmt.Sprintf("stranger's failure %d", i+1), a.doFrom("198.51.100.7:40000", "admin", "wrong", "GET", "/v1/topics", ""),
			http.StatusUnauthorized, textAuthRequired)
	}
	wantAnswer(t, "stranger's next attempt", a.doFrom("198.51.100.7:40000", "admin", "wrong", "GET", "/v1/topics", ""),
		http.StatusTooManyRequests, textTooManyAttempts)
	if rec := a.doFrom("203.0.113.9:5555", "admin", "rootpw", "GET", "/v1/topics", ""); rec.Code != http.StatusOK {
		t.Fatalf("admin from another address after the stranger's failures: got %d %s, want 200", rec.Code, rec.Body)
	}
	for i := range sourceBurst {
		a.doFrom(fmt.Sprintf("[2001:db8:0:1::%x]:443", i), "admin", "wrong", "GET", "/v1/topics", "")
	}
	wantAnswer(t, "another address of the same /64", a.doFrom("[2001:db8:0:1::ffff]:443", "admin", "rootpw", "GET", "/v1/topics", ""),
		http.StatusTooManyRequests, textTooManyAttempts)
	if rec := a.doFrom("[2001:db8:0:2::1]:443", "admin", "rootpw", "GET", "/v1/topics", ""); rec.Code != http.StatusOK {
		t.Fatalf("admin from another /64: got %d %s, want 200", rec.Code, rec.Body)
	}
}

// A guesser spread over many addresses is still limited per username:
// after userBurst failures, one from each of as many addresses, a fresh
// address gets 429 for that name (and not for another name) until
// userEvery earns one attempt back.
func TestAuthGuessesFromManyAddressesAreLimitedPerUsername(t *testing.T) {
	a := newAuthRig(t)
	for i := range userBurst {
		rec := a.doFrom(fmt.Sprintf("10.0.%d.%d:1", i/256, i%256), "admin", "wrong", "GET", "/v1/topics", "")
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: got %d %s, want 401", i+1, rec.Code, rec.Body)
		}
	}
	wantAnswer(t, "admin from a fresh address", a.doFrom("203.0.113.9:5555", "admin", "rootpw", "GET", "/v1/topics", ""),
		http.StatusTooManyRequests, textTooManyAttempts)
	a.book.add(messages.UserInfo{Username: "ann"}, "annpw")
	if rec := a.doFrom("203.0.113.9:5555", "ann", "annpw", "GET", "/v1/topics", ""); rec.Code != http.StatusOK {
		t.Fatalf("another name from the fresh address: got %d %s, want 200", rec.Code, rec.Body)
	}
	a.clock.Advance(userEvery)
	if rec := a.doFrom("203.0.113.9:5555", "admin", "rootpw", "GET", "/v1/topics", ""); rec.Code != http.StatusOK {
		t.Fatalf("admin after %s: got %d %s, want 200", userEvery, rec.Code, rec.Body)
	}
}

type permCase struct {
	method, path, body string
	// action is the grant that allows it ("" none needed; "owner" the
	// topic's owner or an admin; "admin" an admin).
	action string
	// denied is the 403 text without the grant.
	denied string
}

// The permission table of §2.1, one row per endpoint.
var permTable = []permCase{
	{"POST", "/v1/topics", `{"name":"t1"}`, ActionCreate, "create not allowed on this topic"},
	{"GET", "/v1/topics", "", "", ""},
	{"GET", "/v1/topics/t1", "", "", ""},
	{"PATCH", "/v1/topics/theirs", `{"partitions":9}`, "owner", textOwnerRequired},
	{"DELETE", "/v1/topics/theirs", "", "owner", textOwnerRequired},
	{"POST", "/v1/topics/theirs/children", `{"child":"t1"}`, "owner", textOwnerRequired},
	{"GET", "/v1/topics/theirs/children", "", "", ""},
	{"DELETE", "/v1/topics/theirs/children/t1", "", "owner", textOwnerRequired},
	{"POST", "/v1/topics/t1/produce", "x", ActionProduce, "produce not allowed on this topic"},
	{"GET", "/v1/topics/t1/consume", "", ActionConsume, "consume not allowed on this topic"},
	{"POST", "/v1/topics/t1/ack?receipt_handle=0:0:1", "", ActionConsume, "consume not allowed on this topic"},
	{"POST", "/v1/users", `{"username":"new","password":"p"}`, "admin", textAdminRequired},
	{"GET", "/v1/users", "", "admin", textAdminRequired},
	{"GET", "/v1/users/admin", "", "admin", textAdminRequired},
	{"DELETE", "/v1/users/carl", "", "admin", textAdminRequired},
	{"PUT", "/v1/users/carl/grants", `{"grants":[]}`, "admin", textAdminRequired},
	{"PUT", "/v1/users/carl/password", `{"new_password":"x"}`, "admin", textAdminRequired},
	{"GET", "/v1/cluster/members", "", "", ""},
	{"GET", "/v1/cluster/moves", "", "", ""},
	{"POST", "/v1/cluster/moves/t1/0/abort", "", "admin", textAdminRequired},
	{"POST", "/v1/cluster/members/n2/decommission", "", "admin", textAdminRequired},
	{"DELETE", "/v1/cluster/members/n2/decommission", "", "admin", textAdminRequired},
}

// Every endpoint, as a user without grants (403 where §2.1 checks one,
// never 403 where it checks none), as a user with exactly the grant, and
// as root.
func TestAuthPermissionTableOfEveryEndpoint(t *testing.T) {
	for _, tc := range permTable {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			a := newAuthRig(t)
			a.book.add(messages.UserInfo{Username: "carl"}, "carlpw")
			a.book.add(messages.UserInfo{Username: "none"}, "nonepw")
			granted := messages.UserInfo{Username: "bob"} // owner of "theirs"
			switch tc.action {
			case "admin":
				granted.Grants = []messages.Grant{{Action: ActionAdmin}}
			case ActionCreate, ActionProduce, ActionConsume:
				granted.Grants = []messages.Grant{{Action: tc.action, Patterns: []string{"t*"}}}
			}
			a.book.add(granted, "bobpw")
			rec := a.do("none", "nonepw", tc.method, tc.path, tc.body)
			if tc.action == "" {
				if rec.Code == http.StatusForbidden {
					t.Fatalf("without grants: got 403 %s, want no permission check", rec.Body)
				}
			} else {
				wantAnswer(t, "without grants", rec, http.StatusForbidden, tc.denied)
			}
			for _, who := range []struct{ user, password string }{{"bob", "bobpw"}, {"admin", "rootpw"}} {
				if rec := a.do(who.user, who.password, tc.method, tc.path, tc.body); rec.Code == http.StatusForbidden || rec.Code == http.StatusUnauthorized {
					t.Fatalf("as %s with the grant: got %d %s, want it past the check", who.user, rec.Code, rec.Body)
				}
			}
		})
	}
}

// A grant pattern is a name or a prefix: produce on "t*" allows t1 and
// not u1; produce on "t1" exactly that name; another action none.
func TestAuthGrantPatterns(t *testing.T) {
	for _, tc := range []struct {
		grant messages.Grant
		topic string
		want  bool
	}{
		{messages.Grant{Action: ActionProduce, Patterns: []string{"t*"}}, "t1", true},
		{messages.Grant{Action: ActionProduce, Patterns: []string{"t*"}}, "u1", false},
		{messages.Grant{Action: ActionProduce, Patterns: []string{"t1"}}, "t1", true},
		{messages.Grant{Action: ActionProduce, Patterns: []string{"t1"}}, "t10", false},
		{messages.Grant{Action: ActionProduce, Patterns: []string{"*"}}, "anything", true},
		{messages.Grant{Action: ActionConsume, Patterns: []string{"*"}}, "t1", false},
		{messages.Grant{Action: ActionAdmin}, "t1", true},
	} {
		u := messages.UserInfo{Username: "u", Grants: []messages.Grant{tc.grant}}
		if got := Allowed(u, ActionProduce, tc.topic); got != tc.want {
			t.Errorf("produce on %s with %+v: got %t, want %t", tc.topic, tc.grant, got, tc.want)
		}
	}
}

// The creator of a topic is its owner; what the client sends as owner is
// discarded; an owner may alter and delete its own topic only.
func TestAuthTopicOwner(t *testing.T) {
	a := newAuthRig(t)
	a.book.add(messages.UserInfo{Username: "ann", Grants: []messages.Grant{{Action: ActionCreate, Patterns: []string{"*"}}}}, "annpw")
	rec := a.do("ann", "annpw", "POST", "/v1/topics", `{"name":"fresh","owner":"mallory"}`)
	var got messages.TopicInfo
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &got) != nil || got.Owner != "ann" || a.book.created.Owner != "ann" {
		t.Fatalf("create as ann: got %d %s (owner asked %q), want 201 with owner ann", rec.Code, rec.Body, a.book.created.Owner)
	}
	if rec := a.do("ann", "annpw", "DELETE", "/v1/topics/mine", ""); rec.Code != http.StatusNoContent {
		t.Fatalf("delete own topic: got %d %s, want 204", rec.Code, rec.Body)
	}
	wantAnswer(t, "delete bob's topic", a.do("ann", "annpw", "DELETE", "/v1/topics/theirs", ""), http.StatusForbidden, textOwnerRequired)
	a.book.found = false
	if rec := a.do("ann", "annpw", "DELETE", "/v1/topics/missing", ""); rec.Code == http.StatusForbidden {
		t.Fatalf("delete a missing topic: got 403, want it to pass to the handler's 404")
	}
}

// Security off (§2.2): no header needed, a sent one ignored, every check
// passes, /v1/users open, no owner.
func TestSecurityOffActsAsRoot(t *testing.T) {
	book := newUserBook()
	h := Handler(book, Options{})
	for _, tc := range permTable {
		for _, auth := range []bool{false, true} {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if auth {
				req.SetBasicAuth("nobody", "wrong")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusForbidden || rec.Code == http.StatusUnauthorized || rec.Code == http.StatusTooManyRequests {
				t.Errorf("%s %s (header sent: %t): got %d %s, want past every check", tc.method, tc.path, auth, rec.Code, rec.Body)
			}
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/topics", strings.NewReader(`{"name":"x","owner":"mallory"}`)))
	if book.created.Owner != "" || strings.Contains(rec.Body.String(), "owner") {
		t.Fatalf("create with security off: got owner %q, body %s, want no owner", book.created.Owner, rec.Body)
	}
}
