package mysqlfront

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	vtlog "github.com/dolthub/vitess/go/vt/log"
	"github.com/sirupsen/logrus"
)

// go-mysql-server logs through logrus's standard logger and vitess through
// the package variables of vitess/go/vt/log (the standard log package by
// default): both are process-wide. The first New routes them, once, into
// slog: logrus's own output is discarded, its warnings and errors reach the
// Logger of the most recent New (GMS warnings, e.g. a client's syntax error,
// at Debug; errors at Warn); vitess's messages arrive at Debug (info) or Warn.
var (
	routeOnce sync.Once
	libLogger atomic.Pointer[slog.Logger]
)

func routeLibraryLogs(l *slog.Logger) {
	libLogger.Store(l)
	routeOnce.Do(func() {
		logrus.SetOutput(io.Discard)
		logrus.SetLevel(logrus.WarnLevel)
		logrus.AddHook(logrusHook{})
		vtlog.Info = func(args ...any) { libLog(slog.LevelDebug, "vitess", fmt.Sprint(args...)) }
		vtlog.Infof = func(format string, args ...any) { libLog(slog.LevelDebug, "vitess", fmt.Sprintf(format, args...)) }
		vtlog.Warning = func(args ...any) { vitessWarning(fmt.Sprint(args...)) }
		vtlog.Warningf = func(format string, args ...any) { vitessWarning(fmt.Sprintf(format, args...)) }
		vtlog.Error = func(args ...any) { libLog(slog.LevelWarn, "vitess", fmt.Sprint(args...)) }
		vtlog.Errorf = func(format string, args ...any) { libLog(slog.LevelWarn, "vitess", fmt.Sprintf(format, args...)) }
	})
}

// vitessWarning logs a vitess warning at Warn, except the one vitess writes
// for every client that closes before its handshake response (TCP health
// checks, port scans, clients dropped by the handshake timeout): Debug.
func vitessWarning(msg string) {
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "Cannot read client handshake response") {
		level = slog.LevelDebug
	}
	libLog(level, "vitess", msg)
}

func libLog(level slog.Level, lib, msg string, attrs ...any) {
	l := libLogger.Load()
	if l == nil {
		return
	}
	l.Log(context.Background(), level, msg, append([]any{"lib", lib}, attrs...)...)
}

type logrusHook struct{}

func (logrusHook) Levels() []logrus.Level { return logrus.AllLevels }

func (logrusHook) Fire(e *logrus.Entry) error {
	level := slog.LevelDebug
	if e.Level <= logrus.ErrorLevel {
		level = slog.LevelWarn
	}
	attrs := make([]any, 0, 2*len(e.Data))
	for k, v := range e.Data {
		attrs = append(attrs, k, fmt.Sprint(v))
	}
	libLog(level, "go-mysql-server", e.Message, attrs...)
	return nil
}
