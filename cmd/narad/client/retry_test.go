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
