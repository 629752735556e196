package metastore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	dblogger "github.com/lni/dragonboat/v4/logger"
)

// Dragonboat's logger factory is process-wide and may be set only once, so
// the first Open installs an adapter that writes to the *slog.Logger it was
// given (with component=dragonboat and the Dragonboat package as pkg).
// Later Opens in the same process (narad dev, tests) share it: Dragonboat's
// lines carry shard and replica ids, not the Narad node id.
var (
	installLoggerOnce sync.Once
	dragonboatSlog    atomic.Pointer[slog.Logger]
)

// dragonboatLevel is the least level a Dragonboat line needs to be
// written, on top of the logger's own: at info Dragonboat tells of every
// shard, replica and LogDB it starts (over a hundred lines before narad
// dev's banner), which buries the node's own lines. Warn unless
// SetDragonboatLevel says otherwise.
var dragonboatLevel = func() *slog.LevelVar {
	v := new(slog.LevelVar)
	v.Set(DefaultDragonboatLevel)
	return v
}()

// DefaultDragonboatLevel is the level Dragonboat's lines need unless
// SetDragonboatLevel is called.
const DefaultDragonboatLevel = slog.LevelWarn

// SetDragonboatLevel sets the least level of Dragonboat's lines for the
// whole process (its logger is process-wide); the logger given to Open
// still filters them by its own level too.
func SetDragonboatLevel(l slog.Level) { dragonboatLevel.Set(l) }

func installLogger(log *slog.Logger) {
	installLoggerOnce.Do(func() {
		dragonboatSlog.Store(log.With("component", "dragonboat"))
		dblogger.SetLoggerFactory(func(pkg string) dblogger.ILogger {
			l := &slogAdapter{pkg: pkg}
			l.level.Store(int32(dblogger.DEBUG))
			return l
		})
	})
}

// slogAdapter implements Dragonboat's ILogger on top of slog. SetLevel
// (Dragonboat's own per-package knob) filters before slog's level does.
type slogAdapter struct {
	pkg   string
	level atomic.Int32
}

var _ dblogger.ILogger = (*slogAdapter)(nil)

func (l *slogAdapter) SetLevel(level dblogger.LogLevel) { l.level.Store(int32(level)) }

func (l *slogAdapter) log(dl dblogger.LogLevel, sl slog.Level, format string, args []any) {
	if int32(dl) > l.level.Load() || sl < dragonboatLevel.Level() {
		return
	}
	lg := dragonboatSlog.Load()
	if lg == nil || !lg.Enabled(context.Background(), sl) {
		return
	}
	lg.Log(context.Background(), sl, fmt.Sprintf(format, args...), "pkg", l.pkg)
}

func (l *slogAdapter) Debugf(format string, args ...any) {
	l.log(dblogger.DEBUG, slog.LevelDebug, format, args)
}

func (l *slogAdapter) Infof(format string, args ...any) {
	l.log(dblogger.INFO, slog.LevelInfo, format, args)
}

// Warningf logs at warn level, except for the raft package, which reports
// routine elections (became candidate, sent RequestPreVote, dropped a
// proposal for want of a leader) as warnings: those go to info, and the
// Store reports what matters to callers (ErrUnavailable, metrics).
func (l *slogAdapter) Warningf(format string, args ...any) {
	level := slog.LevelWarn
	if l.pkg == "raft" {
		level = slog.LevelInfo
	}
	l.log(dblogger.WARNING, level, format, args)
}

func (l *slogAdapter) Errorf(format string, args ...any) {
	l.log(dblogger.ERROR, slog.LevelError, format, args)
}

// Panicf logs at error level whatever the filters say, then panics, as
// Dragonboat expects.
func (l *slogAdapter) Panicf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if lg := dragonboatSlog.Load(); lg != nil {
		lg.Error(msg, "pkg", l.pkg, "panic", true)
	}
	panic(msg)
}
