package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/naradmq/narad/cmd/narad/measure"
)

// plainEvery is the pace of progress lines when stderr is not a terminal:
// a log file wants a line a second, not four.
const plainEvery = time.Second

// progress shows counts and current rates until ctx is done, then one
// final line with the averages. On a terminal it redraws one line every
// progressEvery; elsewhere it prints a plain line every plainEvery.
func (l *loadRun) progress(ctx context.Context, w io.Writer, tty bool) {
	t := time.NewTicker(l.cfg.progressEvery)
	defer t.Stop()
	start := time.Now()
	last := progressSample{at: start}
	p := measure.NewProgress(w, tty, plainEvery)
	for {
		select {
		case <-ctx.Done():
			p.Final(l.progressLine(progressSample{at: start}, l.sample(time.Now()), start))
			return
		case now := <-t.C:
			if !p.Due(now) {
				continue
			}
			cur := l.sample(now)
			p.Draw(now, l.progressLine(last, cur, start))
			last = cur
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
		cur.produced, l.cfg.count, measure.Rate(cur.produced-prev.produced, d),
		cur.consumed, measure.Rate(cur.consumed-prev.consumed, d),
		l.acked.Load(), l.hist.Outstanding())
}
