package backend

import (
	"context"
	"log/slog"

	"github.com/argoproj/argo-workflows/v4/util/logging"
)

// argoLogger logs the Go package's lines through Argo's logger in the context.
type argoLogger struct{ logger logging.Logger }

func (l argoLogger) Log(ctx context.Context, level slog.Level, msg string, fields map[string]any) {
	entry := l.logger.WithFields(logging.Fields(fields))
	switch {
	case level >= slog.LevelError:
		entry.Error(ctx, msg)
	case level >= slog.LevelWarn:
		entry.Warn(ctx, msg)
	default:
		entry.Info(ctx, msg)
	}
}
