package auth

import (
	"context"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// The cache is bounded.
func TestCredentialCacheIsBounded(t *testing.T) {
	c := NewCredentials(3, 1, bcrypt.MinCost)
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		c.remember(c.keyOf(name, "pw"), "hash")
		if len(c.verified) > 3 {
			t.Fatalf("after %s: got %d entries, want at most 3", name, len(c.verified))
		}
	}
}

// A password is verified against its hash, remembered once verified, and
// a wrong one or an unknown user is refused after the same slow compare.
func TestVerifyRemembersOnlyWhatItVerified(t *testing.T) {
	c := NewCredentials(8, 1, bcrypt.MinCost)
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		user, password string
		found, want    bool
	}{
		{"ann", "wrong", true, false},
		{"ann", "pw", true, true},
		{"bob", "pw", false, false},
	} {
		got, err := c.Verify(ctx, tc.user, tc.password, string(h), tc.found)
		if err != nil || got != tc.want {
			t.Errorf("%s/%s (found %v): got %v, %v, want %v", tc.user, tc.password, tc.found, got, err, tc.want)
		}
		if known := c.Known(tc.user, tc.password, string(h)); known != tc.want {
			t.Errorf("%s/%s: got remembered %v, want %v", tc.user, tc.password, known, tc.want)
		}
	}
	// A remembered password counts only against the hash it was checked
	// against: a new hash (a changed password) misses.
	h2, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if c.Known("ann", "pw", string(h2)) {
		t.Error("against a new hash: got remembered, want a miss")
	}
}
