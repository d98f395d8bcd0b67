package argoresults

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestSlogLoggerWritesEachField(t *testing.T) {
	var out strings.Builder
	logger := SlogLogger(slog.New(slog.NewTextHandler(&out, nil)))
	logger.Log(context.Background(), slog.LevelWarn, "argo-results: retrying a report", map[string]any{"attempt": 20})
	if line := out.String(); !strings.Contains(line, "level=WARN") || !strings.Contains(line, "attempt=20") {
		t.Errorf("logged %q", line)
	}
	// A nil Logger logs nothing, and does not panic.
	logTo(context.Background(), nil, slog.LevelError, "nobody hears this", nil)
}
