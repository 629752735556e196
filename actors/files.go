package actors

import "time"

// msDuration is a topic setting in milliseconds as a duration.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
