package membership

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestConfigValidateSaysWhichBound: each bound refuses with an error that
// names it (and wraps ErrInvalidConfig), checked in the order the fields
// are documented; the edge of the range is valid.
func TestConfigValidateSaysWhichBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" when valid
	}{
		{"no dead timeout, whatever the interval", Config{DeadTimeout: 0, HeartbeatInterval: time.Second}, "dead timeout 0s: must be positive"},
		{"a negative dead timeout before a bad interval", Config{DeadTimeout: -time.Second, HeartbeatInterval: 0}, "dead timeout -1s: must be positive"},
		{"no heartbeat interval", Config{DeadTimeout: 30 * time.Second, HeartbeatInterval: 0}, "heartbeat interval 0s: must be positive"},
		{"a negative heartbeat interval", Config{DeadTimeout: 30 * time.Second, HeartbeatInterval: -time.Second}, "heartbeat interval -1s: must be positive"},
		{"a nanosecond past a third of the timeout", Config{DeadTimeout: 30 * time.Second, HeartbeatInterval: 10*time.Second + 1}, "must be at most a 3th of the dead timeout 30s"},
		{"exactly a third of the timeout", Config{DeadTimeout: 30 * time.Second, HeartbeatInterval: 10 * time.Second}, ""},
		{"a nanosecond each", Config{DeadTimeout: 3, HeartbeatInterval: 1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate(%+v): got %v, want nil", tc.cfg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate(%+v): got %v, want an ErrInvalidConfig containing %q", tc.cfg, err, tc.want)
			}
		})
	}
}
