package measure

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// IsTerminal reports whether w is a character device, where a progress
// line can be redrawn in place with \r.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// PadTo pads s with spaces to width, so that a line redrawn with \r covers
// the rest of a longer one before it without terminal escape codes.
func PadTo(s string, width int) string {
	if len(s) >= width {
		return s
	}
	return s + strings.Repeat(" ", width-len(s))
}

// Progress draws a run's progress line: on a terminal redrawn in place at
// every Draw, elsewhere (a log, a pipe) a plain line at most every
// plainEvery, so that a log gets a line every few seconds, not four a
// second. It is used by one goroutine.
type Progress struct {
	w          io.Writer
	tty        bool
	plainEvery time.Duration
	lastPlain  time.Time
	width      int
}

// NewProgress draws on w, redrawing in place when tty.
func NewProgress(w io.Writer, tty bool, plainEvery time.Duration) *Progress {
	return &Progress{w: w, tty: tty, plainEvery: plainEvery}
}

// Due reports whether a Draw at now would print: always on a terminal,
// else once plainEvery passed since the last plain line. The caller skips
// computing a line that would not be shown.
func (p *Progress) Due(now time.Time) bool {
	return p.tty || now.Sub(p.lastPlain) >= p.plainEvery
}

// Draw shows line at now if Due.
func (p *Progress) Draw(now time.Time, line string) {
	if !p.Due(now) {
		return
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%s", PadTo(line, p.width))
		p.width = max(p.width, len(line))
		return
	}
	p.lastPlain = now
	fmt.Fprintln(p.w, line)
}

// Final shows the last line and ends it, on a terminal over the one drawn.
func (p *Progress) Final(line string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\n", PadTo(line, p.width))
		return
	}
	fmt.Fprintln(p.w, line)
}
