package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
)

func TestIsRetryableFollowsTheContractsGuidance(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"503", &StatusError{Status: http.StatusServiceUnavailable}, true},
		{"502", fmt.Errorf("produce: %w", &StatusError{Status: http.StatusBadGateway}), true},
		{"404", &StatusError{Status: http.StatusNotFound}, false},
		{"500", &StatusError{Status: http.StatusInternalServerError}, false},
		{"connection refused", fmt.Errorf("POST /v1/topics: %w", syscall.ECONNREFUSED), true},
		{"cancelled by the caller", fmt.Errorf("consume: %w", context.Canceled), false},
		{"refused by the client", fmt.Errorf("ack: %w", ErrInvalid), false},
		{"an answer outside the contract", fmt.Errorf("consume: %w", ErrProtocol), false},
	} {
		if got := IsRetryable(c.err); got != c.want {
			t.Errorf("%s: IsRetryable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestTheClientsOwnErrorsAreNotRetried(t *testing.T) {
	// A broker that answers 200 where the contract says 202.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	b, err := New(srv.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if err := b.Produce(ctx, "orders", []byte("x"), "", nil); !errors.Is(err, ErrProtocol) || IsRetryable(err) {
		t.Fatalf("produce answered 200: got %v (retryable %v), want ErrProtocol, not retryable", err, IsRetryable(err))
	}
	if err := b.Ack(ctx, "orders", ""); !errors.Is(err, ErrInvalid) || IsRetryable(err) {
		t.Fatalf("ack with no handle: got %v (retryable %v), want ErrInvalid, not retryable", err, IsRetryable(err))
	}
	if _, err := b.Consume(ctx, "", ConsumeOptions{}); !errors.Is(err, ErrInvalid) || IsRetryable(err) {
		t.Fatalf("consume with no topic: got %v (retryable %v), want ErrInvalid, not retryable", err, IsRetryable(err))
	}
}

// An ack is retried through 503s until the broker takes it, and stops at
// once on a 410 (lost, not an error) or on an answer the contract says not
// to retry (an error); attempts bound the 503s (lost).
func TestAckRetryingRetriesOnlyWhatTheContractSays(t *testing.T) {
	for _, c := range []struct {
		name      string
		answers   []int
		attempts  int
		wantOut   AckOutcome
		wantTries int
		wantErr   bool
	}{
		{"taken after two 503s", []int{503, 503, 204}, 4, AckOutcome{Acked: true}, 3, false},
		{"410 at once", []int{410}, 4, AckOutcome{Lost: true}, 1, false},
		{"400 is not retried", []int{400}, 4, AckOutcome{}, 1, true},
		{"503 every time", []int{503, 503}, 2, AckOutcome{Lost: true}, 2, false},
	} {
		tries := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			code := c.answers[min(tries, len(c.answers)-1)]
			tries++
			if code >= 400 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(code)
				fmt.Fprint(w, `{"error":"no"}`)
				return
			}
			w.WriteHeader(code)
		}))
		b, err := New(srv.URL, Options{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := b.AckRetrying(context.Background(), "t", "1:2:3", c.attempts)
		out.First = 0
		if out != c.wantOut || tries != c.wantTries || (err != nil) != c.wantErr {
			t.Errorf("%s: got %+v after %d tries, err %v; want %+v after %d, error %v", c.name, out, tries, err, c.wantOut, c.wantTries, c.wantErr)
		}
		b.Close()
		srv.Close()
	}
}
