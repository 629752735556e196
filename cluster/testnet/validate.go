package testnet

import (
	"strings"
	"testing"
)

// ConfigCase is one edit of a package's default config, and the field its
// Validate must name in the error: "" when the edit is valid.
type ConfigCase[C any] struct {
	Name  string
	Edit  func(*C)
	Field string
}

// CheckValidate holds a package's Config.Validate to its bounds: the
// default is valid, and each case, applied to a fresh default, is accepted
// (Field "") or refused with an error naming Field. Each case is a subtest
// of its Name, so `go test -run 'Bounds/ChunkWindow_65'` runs one edge.
func CheckValidate[C interface{ Validate() error }](t *testing.T, def func() C, cases []ConfigCase[C]) {
	t.Helper()
	if err := def().Validate(); err != nil {
		t.Fatalf("DefaultConfig: got %v, want valid", err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			c := def()
			tc.Edit(&c)
			err := c.Validate()
			switch {
			case tc.Field == "" && err != nil:
				t.Fatalf("Validate: got %v, want nil", err)
			case tc.Field != "" && (err == nil || !strings.Contains(err.Error(), tc.Field)):
				t.Fatalf("Validate: got %v, want an error naming %s", err, tc.Field)
			}
		})
	}
}
