package argoresults

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Where a report's sequence comes from. Two processes of one pod report the same node (the
// main container of a resource or data template, then wait), so the clock alone can hand
// both the same value; a counter file in the emptyDir that Argo mounts into every
// container of the pod cannot. The scheme is the one of the Rust CLI
// (executor-client/src/cmd/sequence.rs), so the Go and Rust reporters can share a file.

// ArgoSequenceDir is Argo's var-run-argo mount (common.VarRunArgoPath).
const ArgoSequenceDir = "/var/run/argo"

// SequenceFileName is the counter file's name in that directory.
const SequenceFileName = "argo-results-sequence"

// DefaultSequenceFile is the counter file in dir, if dir exists.
func DefaultSequenceFile(dir string) (string, bool) {
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() {
		return "", false
	}
	return filepath.Join(dir, SequenceFileName), true
}

// ClockSequence is Unix microseconds: later processes of one pod get larger values, but
// two processes may get the same one.
func ClockSequence() int64 {
	return time.Now().UnixMicro()
}

// NextSequence takes the next value from the counter file at path: under an exclusive
// lock, the larger of the stored value + 1 and [ClockSequence], written back before the
// lock is released, so no two takers ever get the same value and values keep growing
// with the clock.
func NextSequence(path string) (int64, error) {
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return 0, fmt.Errorf("open the sequence file: %w", err)
	}
	// Closing the file releases the lock.
	defer file.Close()
	if err := lockFile(file); err != nil {
		return 0, fmt.Errorf("lock the sequence file %s: %w", path, err)
	}
	text, err := io.ReadAll(file)
	if err != nil {
		return 0, fmt.Errorf("read the sequence file %s: %w", path, err)
	}
	// An empty file is new; a torn or foreign value counts as 0, and the clock orders.
	stored, err := strconv.ParseInt(strings.TrimSpace(string(text)), 10, 64)
	if err != nil {
		stored = 0
	}
	if stored < math.MaxInt64 {
		stored++
	}
	next := max(stored, ClockSequence())
	digits := strconv.FormatInt(next, 10)
	if _, err := file.WriteAt([]byte(digits), 0); err != nil {
		return 0, fmt.Errorf("write the sequence file %s: %w", path, err)
	}
	if err := file.Truncate(int64(len(digits))); err != nil {
		return 0, fmt.Errorf("write the sequence file %s: %w", path, err)
	}
	return next, nil
}
