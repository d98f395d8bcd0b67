package argoresults

import (
	"context"
	"log/slog"
)

// Logger is what the package logs through: a few lines adapt Argo's logging.Logger
// (util/logging), as in
//
//	type argoLogger struct{ logging.Logger }
//
//	func (l argoLogger) Log(ctx context.Context, level slog.Level, msg string, fields map[string]any) {
//		entry := l.WithFields(logging.Fields(fields))
//		switch {
//		case level >= slog.LevelError:
//			entry.Error(ctx, msg)
//		case level >= slog.LevelWarn:
//			entry.Warn(ctx, msg)
//		default:
//			entry.Info(ctx, msg)
//		}
//	}
//
// and [SlogLogger] adapts a *slog.Logger. A nil Logger logs nothing.
type Logger interface {
	Log(ctx context.Context, level slog.Level, msg string, fields map[string]any)
}

// SlogLogger logs through logger.
func SlogLogger(logger *slog.Logger) Logger { return slogLogger{logger} }

type slogLogger struct{ logger *slog.Logger }

func (l slogLogger) Log(ctx context.Context, level slog.Level, msg string, fields map[string]any) {
	attrs := make([]slog.Attr, 0, len(fields))
	for key, value := range fields {
		attrs = append(attrs, slog.Any(key, value))
	}
	l.logger.LogAttrs(ctx, level, msg, attrs...)
}

// logTo logs to logger, if there is one.
func logTo(ctx context.Context, logger Logger, level slog.Level, msg string, fields map[string]any) {
	if logger != nil {
		logger.Log(ctx, level, msg, fields)
	}
}
