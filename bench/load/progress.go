package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// plainEvery is the pace of progress lines when stderr is not a terminal:
// a log file wants a line a second, not four.
const plainEvery = time.Second

// isTerminal reports whether w is a character device, where a progress
// line can be redrawn in place with \r.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress shows counts and current rates until ctx is done, then one
// final line with the averages. On a terminal it redraws one line every
// progressEvery; elsewhere it prints a plain line every plainEvery.
func (l *loadRun) progress(ctx context.Context, w io.Writer, tty bool) {
	t := time.NewTicker(l.cfg.progressEvery)
	defer t.Stop()
	start := time.Now()
	last := progressSample{at: start}
	width := 0
	for {
		select {
		case <-ctx.Done():
			line := l.progressLine(progressSample{at: start}, l.sample(time.Now()), start)
			if tty {
				fmt.Fprintf(w, "\r%s\n", padTo(line, width))
			} else {
				fmt.Fprintln(w, line)
			}
			return
		case now := <-t.C:
			if !tty && now.Sub(last.at) < plainEvery {
				continue
			}
			cur := l.sample(now)
			line := l.progressLine(last, cur, start)
			last = cur
			if tty {
				// Pad over the rest of a longer previous line instead of
				// relying on terminal escape codes.
				fmt.Fprintf(w, "\r%s", padTo(line, width))
				width = max(width, len(line))
			} else {
				fmt.Fprintln(w, line)
			}
		}
	}
}

type progressSample struct {
	at       time.Time
	produced int64
	consumed int64
}

func (l *loadRun) sample(now time.Time) progressSample {
	return progressSample{at: now, produced: l.produced.Load(), consumed: l.deliveries.Load()}
}

// progressLine shows the totals at cur and the rates between prev and cur.
func (l *loadRun) progressLine(prev, cur progressSample, start time.Time) string {
	d := cur.at.Sub(prev.at)
	return fmt.Sprintf("%6.1fs  produced %d/%d (%.0f/s)  consumed %d (%.0f/s)  acked %d  outstanding %d",
		cur.at.Sub(start).Seconds(),
		cur.produced, l.cfg.count, rate(cur.produced-prev.produced, d),
		cur.consumed, rate(cur.consumed-prev.consumed, d),
		l.acked.Load(), l.hist.Outstanding())
}

func padTo(s string, width int) string {
	if len(s) >= width {
		return s
	}
	return s + strings.Repeat(" ", width-len(s))
}
