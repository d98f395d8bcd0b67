package argoresults

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// Each taker opens the file itself, so the lock is contended as between processes (flock
// locks belong to an open file, not to a process).
func TestConcurrentSequenceTakersNeverShareAValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), SequenceFileName)
	ahead := ClockSequence() + 1_000_000_000_000
	if err := os.WriteFile(path, []byte(strconv.FormatInt(ahead, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var values []int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				value, err := NextSequence(path)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				values = append(values, value)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(values)
	for i, value := range values {
		if value != ahead+int64(i)+1 {
			t.Fatalf("value %d is %d, want %d: every value once, none skipped", i, value, ahead+int64(i)+1)
		}
	}
	if err := os.WriteFile(path, []byte("not a number"), 0o644); err != nil {
		t.Fatal(err)
	}
	if value, err := NextSequence(path); err != nil || value >= ahead {
		t.Errorf("a garbled file counts on from the clock: %d, %v", value, err)
	}
	if _, ok := DefaultSequenceFile(filepath.Join(t.TempDir(), "absent")); ok {
		t.Error("a default file in a directory that does not exist")
	}
}

// A new counter starts at the clock and keeps growing; the file holds the last value
// handed out, so a Rust reporter sharing it counts on from there.
func TestANewCounterStartsAtTheClockAndKeepsTheLastValue(t *testing.T) {
	dir := t.TempDir()
	path, ok := DefaultSequenceFile(dir)
	if !ok || path != filepath.Join(dir, SequenceFileName) {
		t.Fatalf("the default file in an existing directory: %q, %v", path, ok)
	}
	before := ClockSequence()
	first, err := NextSequence(path)
	if err != nil || first < before {
		t.Fatalf("a new counter: %d, %v; want at least the clock, %d", first, err, before)
	}
	second, err := NextSequence(path)
	if err != nil || second <= first {
		t.Fatalf("the next value: %d after %d, %v", second, first, err)
	}
	if text, err := os.ReadFile(path); err != nil || string(text) != strconv.FormatInt(second, 10) {
		t.Errorf("the file holds %q, %v; want %d", text, err, second)
	}
	if _, ok := DefaultSequenceFile(path); ok {
		t.Error("a default file under a file that is not a directory")
	}
	if _, err := NextSequence(filepath.Join(dir, "missing", SequenceFileName)); err == nil {
		t.Error("a counter in a directory that does not exist")
	}
}
