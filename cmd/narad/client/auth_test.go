package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A client given a user sends HTTP Basic credentials with every request
// (a broker with security on, CONTRACT.md §2.1); one without sends none.
func TestTheClientSendsBasicCredentialsWhenGivenAUser(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if ok {
			got = append(got, u+":"+p)
		} else {
			got = append(got, "")
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for _, opts := range []Options{{User: "alice", Password: "s3cret"}, {}} {
		b, err := New(srv.URL, opts)
		if err != nil {
			t.Fatal(err)
		}
		_ = b.DeleteTopic(context.Background(), "t")
		b.Close()
	}
	if len(got) != 2 || got[0] != "alice:s3cret" || got[1] != "" {
		t.Fatalf("credentials the server saw: got %q, want [alice:s3cret, none]", got)
	}
}
